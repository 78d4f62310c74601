package emu

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/sextantmq/sextant/internal/placement"
)

// MMOG parameters (ePulsar Sections 5.1.2 and 5.5.2).
const (
	mmogClients   = 1024
	mmogGroups    = 128
	mmogAccess    = 5 * time.Millisecond // game server <-> broker in the same city, one way
	mmogThreshold = 100 * time.Millisecond
	mmogRate      = 300 // avatar updates per second
)

// MMOGCities are the numbers of cities the MMOG scenario varies.
var MMOGCities = []int{3, 5, 8, 12, 16}

// RunMMOG runs the MMOG policy evaluation over US cities of the WonderNetwork
// dataset, one broker and one game server per city. For each number of
// cities k it draws opt.Topologies sets of k distinct cities and embeds each
// with Vivaldi (only those cities gossip, as in a k-node deployment); each
// permutation takes one of these topologies in turn, puts 1,024 clients in
// its cities uniformly at random and splits them into 128 groups of 8.
//
// With multi false, each avatar has a topic published by its game server and
// subscribed by the servers of the other members of its group (one
// producer). With multi true, each group has one topic published and
// subscribed by the servers of all its members (several producers; a
// server's rate is proportional to its members).
func RunMMOG(ctx context.Context, opt Options, multi bool) (*Result, error) {
	if err := opt.check(); err != nil {
		return nil, err
	}
	sites, full, err := USCities()
	if err != nil {
		return nil, err
	}
	r := &Result{
		Scenario: "mmog", XLabel: "cities", Threshold: mmogThreshold, Policies: policyNames,
		Title: "MMOG avatar topics (1 producer)",
	}
	if multi {
		r.Scenario, r.Title = "mmog-multi", "MMOG group topics (several producers)"
	}
	r.Notes = append(r.Notes,
		fmt.Sprintf("seed %d; %d permutations per point over %d topologies (random sets of cities among %d US cities, each with its own Vivaldi coordinates)",
			opt.Seed, opt.Permutations, opt.Topologies, len(sites)),
		fmt.Sprintf("%d clients in %d groups of %d; %v one-way access (game server <-> broker); Lth %v",
			mmogClients, mmogGroups, mmogClients/mmogGroups, mmogAccess, mmogThreshold),
		fmt.Sprintf("vivaldi: serf defaults (8 dimensions + height), %d gossip rounds, %.0f%% RTT jitter", opt.Vivaldi.Rounds, 100*opt.Vivaldi.Jitter))
	var points []scenarioPoint
	for _, k := range MMOGCities {
		if k > len(sites) {
			return nil, fmt.Errorf("%w: %d cities asked, dataset has %d", ErrOptions, k, len(sites))
		}
		gen := mmogAvatars
		if multi {
			gen = mmogGroupTopics
		}
		worlds := newWorldCache(opt.Topologies, opt.Seed, len(points), func(_ int, rng *rand.Rand) (*world, error) {
			m := full.Sub(rng.Perm(len(sites))[:k])
			vc := opt.Vivaldi
			vc.Seed = rng.Uint64()
			cs, err := Embed(m, vc)
			if err != nil {
				return nil, err
			}
			return newWorld(m, cs), nil
		})
		perm := func(i int, rng *rand.Rand) (*world, []placement.Topic, error) {
			w, err := worlds.get(i)
			if err != nil {
				return nil, nil, err
			}
			topics, err := gen(w, rng)
			return w, topics, err
		}
		points = append(points, scenarioPoint{x: k, label: fmt.Sprintf("%d cities", k), perm: perm})
	}
	if r.Points, err = runPoints(ctx, opt, r.Scenario, points); err != nil {
		return nil, err
	}
	for _, p := range r.Points {
		r.Notes = append(r.Notes, fmt.Sprintf("%d cities: vivaldi median relative error %.1f%% (%.1f ms), p90 %.1f%%",
			p.X, 100*p.Vivaldi.MedianRel, p.Vivaldi.MedianAbsMS, 100*p.Vivaldi.P90Rel))
	}
	return r, nil
}

// mmogPopulation places the clients in cities and groups: city[c] is client c's
// city; groups[g] lists the clients of group g.
func mmogPopulation(w *world, rng *rand.Rand) (city []int, groups [][]int) {
	city = make([]int, mmogClients)
	for c := range city {
		city[c] = rng.IntN(len(w.nodes))
	}
	perm := rng.Perm(mmogClients)
	size := mmogClients / mmogGroups
	for g := 0; g < mmogGroups; g++ {
		groups = append(groups, perm[g*size:(g+1)*size])
	}
	return city, groups
}

func mmogAvatars(w *world, rng *rand.Rand) ([]placement.Topic, error) {
	city, groups := mmogPopulation(w, rng)
	topics := make([]placement.Topic, 0, mmogClients)
	for _, members := range groups {
		for _, a := range members {
			var subscribers []int
			for _, o := range members {
				if o != a && !slices.Contains(subscribers, city[o]) {
					subscribers = append(subscribers, city[o])
				}
			}
			slices.Sort(subscribers)
			c := placement.Clients{Producers: []placement.Client{w.client(city[a], mmogAccess, mmogRate)}}
			for _, s := range subscribers {
				c.Consumers = append(c.Consumers, w.client(s, mmogAccess, mmogRate))
			}
			t, err := newTopic(fmt.Sprintf("avatar/%04d", a), mmogThreshold, c)
			if err != nil {
				return nil, err
			}
			topics = append(topics, t)
		}
	}
	return topics, nil
}

func mmogGroupTopics(w *world, rng *rand.Rand) ([]placement.Topic, error) {
	city, groups := mmogPopulation(w, rng)
	topics := make([]placement.Topic, 0, len(groups))
	for g, members := range groups {
		perCity := map[int]int{}
		for _, m := range members {
			perCity[city[m]]++
		}
		servers := make([]int, 0, len(perCity))
		for s := range perCity {
			servers = append(servers, s)
		}
		slices.Sort(servers)
		var c placement.Clients
		for _, s := range servers {
			c.Producers = append(c.Producers, w.client(s, mmogAccess, float64(mmogRate*perCity[s])))
			c.Consumers = append(c.Consumers, w.client(s, mmogAccess, float64(mmogRate*len(members))))
		}
		t, err := newTopic(fmt.Sprintf("group/%03d", g), mmogThreshold, c)
		if err != nil {
			return nil, err
		}
		topics = append(topics, t)
	}
	return topics, nil
}
