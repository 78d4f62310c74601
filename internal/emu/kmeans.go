package emu

import (
	"math"
	"math/rand/v2"
)

// point is a position in kilometres on a local equirectangular projection.
type point struct{ x, y float64 }

// projector maps latitude/longitude to kilometres around a reference
// latitude; good enough at city scale.
type projector struct{ cosLat float64 }

const kmPerDegree = 111.195

func newProjector(sites []Site) projector {
	var lat float64
	for _, s := range sites {
		lat += s.Lat
	}
	if len(sites) > 0 {
		lat /= float64(len(sites))
	}
	return projector{cosLat: math.Cos(lat * math.Pi / 180)}
}

func (p projector) project(lat, lon float64) point {
	return point{x: lon * kmPerDegree * p.cosLat, y: lat * kmPerDegree}
}

func dist2(a, b point) float64 {
	dx, dy := a.x-b.x, a.y-b.y
	return dx*dx + dy*dy
}

// kMeans clusters pts into k groups with k-means++ seeding and Lloyd
// iterations (at most 100, or until no point changes group). It returns the
// centroids and each point's group. Deterministic for a given seed.
func kMeans(pts []point, k int, seed uint64) ([]point, []int) {
	rng := rand.New(rand.NewPCG(seed, 0xc1_05_7e_25))
	k = min(k, len(pts))
	centres := []point{pts[rng.IntN(len(pts))]}
	d2 := make([]float64, len(pts))
	for len(centres) < k {
		var total float64
		for i, p := range pts {
			d2[i] = math.Inf(1)
			for _, c := range centres {
				d2[i] = min(d2[i], dist2(p, c))
			}
			total += d2[i]
		}
		r := rng.Float64() * total
		pick := len(pts) - 1
		for i := range pts {
			if r -= d2[i]; r < 0 {
				pick = i
				break
			}
		}
		centres = append(centres, pts[pick])
	}
	group := make([]int, len(pts))
	for iter := 0; iter < 100; iter++ {
		changed := false
		for i, p := range pts {
			g := nearest(centres, p)
			if g != group[i] || iter == 0 {
				changed = changed || g != group[i]
				group[i] = g
			}
		}
		sum := make([]point, k)
		count := make([]int, k)
		for i, p := range pts {
			sum[group[i]].x += p.x
			sum[group[i]].y += p.y
			count[group[i]]++
		}
		for g := range centres {
			if count[g] > 0 {
				centres[g] = point{sum[g].x / float64(count[g]), sum[g].y / float64(count[g])}
			}
		}
		if !changed && iter > 0 {
			break
		}
	}
	return centres, group
}

// nearest is the index of the centre closest to p (the lowest index on ties).
func nearest(centres []point, p point) int {
	best, bestD := 0, math.Inf(1)
	for i, c := range centres {
		if d := dist2(p, c); d < bestD {
			best, bestD = i, d
		}
	}
	return best
}
