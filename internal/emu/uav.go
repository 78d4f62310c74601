package emu

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/sextantmq/sextant/internal/placement"
)

// UAV parameters (ePulsar Sections 5.1.1 and 5.5.3). uavAccess and
// uavSwarmRadius are not given by the paper; see docs/placement.md.
const (
	uavSwarms      = 16
	uavDrones      = 8 // one leader and 7 followers
	uavThreshold   = 40 * time.Millisecond
	uavEdgeRTT     = 30.0                  // ms between any two edge sites
	uavCloudOneWay = 40.0                  // ms from any edge site to the cloud broker
	uavAccess      = 10 * time.Millisecond // drone <-> edge site over LTE, one way
	uavSwarmRadius = 2.0                   // km: drones of a swarm are within this of its centre
	uavRate        = 200                   // messages per second per drone
)

// UAVZones are the numbers of MEC zones the UAV scenario varies.
var UAVZones = []int{2, 3, 4, 5, 6, 7, 8}

// RunUAV runs the UAV swarm policy evaluation: the base-station sites of
// opt.Sites are clustered into k MEC zones by k-means, each zone has an edge
// site with a broker, the edge sites are 30 ms RTT apart and 40 ms one way
// from a cloud broker, which is also a candidate home. Each permutation puts
// 16 swarms of 8 drones around random sites; a drone attaches to the zone
// whose centre is nearest. Each swarm has a follow_leader topic (leader ->
// followers) and a sensor_data topic (followers -> leader).
func RunUAV(ctx context.Context, opt Options) (*Result, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	if opt.Sites == "" {
		opt.Sites = "melbourne"
	}
	sites, err := Sites(opt.Sites)
	if err != nil {
		return nil, err
	}
	proj := newProjector(sites)
	pts := make([]point, len(sites))
	for i, s := range sites {
		pts[i] = proj.project(s.Lat, s.Lon)
	}
	r := &Result{
		Scenario: "uav", XLabel: "MEC zones", Threshold: uavThreshold, Policies: policyNames,
		Title: fmt.Sprintf("UAV swarms (%s sites)", opt.Sites),
	}
	r.Notes = append(r.Notes,
		fmt.Sprintf("seed %d; %d permutations per point; sites: %s (%d)", opt.Seed, opt.Permutations, opt.Sites, len(sites)),
		fmt.Sprintf("%d swarms of %d drones within %.0f km of a random site; %v one-way drone access; edge sites %.0f ms RTT apart; cloud %.0f ms one way; Lth %v",
			uavSwarms, uavDrones, uavSwarmRadius, uavAccess, uavEdgeRTT, uavCloudOneWay, uavThreshold),
		fmt.Sprintf("vivaldi: serf defaults (8 dimensions + height), %d gossip rounds, %.0f%% RTT jitter", opt.Vivaldi.Rounds, 100*opt.Vivaldi.Jitter))
	var points []scenarioPoint
	for p, k := range UAVZones {
		centres, group := kMeans(pts, k, opt.Seed+uint64(k))
		sizes := make([]int, k)
		for _, g := range group {
			sizes[g]++
		}
		m := uavMatrix(k)
		vc := opt.Vivaldi
		vc.Seed = opt.Seed ^ uint64(p)<<40
		cs, err := Embed(m, vc)
		if err != nil {
			return nil, err
		}
		w := newWorld(m, cs)
		r.Notes = append(r.Notes, fmt.Sprintf("%d zones: sites per zone %v; vivaldi median relative error %.1f%% (%.1f ms)",
			k, sizes, 100*w.accuracy.MedianRel, w.accuracy.MedianAbsMS))
		perm := func(_ int, rng *rand.Rand) (*world, []placement.Topic, error) {
			topics, err := uavSwarmTopics(w, pts, centres, rng)
			return w, topics, err
		}
		points = append(points, scenarioPoint{x: k, label: fmt.Sprintf("%d zones", k), perm: perm})
	}
	if r.Points, err = runPoints(ctx, opt, r.Scenario, points); err != nil {
		return nil, err
	}
	return r, nil
}

// uavMatrix is the RTT matrix of k edge sites ("zone1".."zoneK") and "cloud".
func uavMatrix(k int) *Matrix {
	m := &Matrix{}
	for i := 1; i <= k; i++ {
		m.Names = append(m.Names, fmt.Sprintf("zone%d", i))
	}
	m.Names = append(m.Names, "cloud")
	m.RTT = make([][]float64, k+1)
	for i := range m.RTT {
		m.RTT[i] = make([]float64, k+1)
		for j := range m.RTT[i] {
			switch {
			case i == j:
			case i == k || j == k:
				m.RTT[i][j] = 2 * uavCloudOneWay
			default:
				m.RTT[i][j] = uavEdgeRTT
			}
		}
	}
	return m
}

func uavSwarmTopics(w *world, sites []point, centres []point, rng *rand.Rand) ([]placement.Topic, error) {
	topics := make([]placement.Topic, 0, 2*uavSwarms)
	for s := 0; s < uavSwarms; s++ {
		centre := sites[rng.IntN(len(sites))]
		drones := make([]placement.Client, uavDrones)
		for d := range drones {
			r := uavSwarmRadius * math.Sqrt(rng.Float64())
			a := 2 * math.Pi * rng.Float64()
			pos := point{centre.x + r*math.Cos(a), centre.y + r*math.Sin(a)}
			drones[d] = w.client(nearest(centres, pos), uavAccess, uavRate) // zone i is node i
		}
		leader, followers := drones[:1], drones[1:]
		follow, err := newTopic(fmt.Sprintf("swarm/%02d/follow_leader", s), uavThreshold,
			placement.Clients{Producers: leader, Consumers: followers})
		if err != nil {
			return nil, err
		}
		sensor, err := newTopic(fmt.Sprintf("swarm/%02d/sensor_data", s), uavThreshold,
			placement.Clients{Producers: followers, Consumers: leader})
		if err != nil {
			return nil, err
		}
		topics = append(topics, follow, sensor)
	}
	return topics, nil
}
