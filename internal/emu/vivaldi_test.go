package emu

import (
	"reflect"
	"testing"
)

// Vivaldi (serf's coordinate package) over the 490-node PlanetLab matrix. 400
// rounds keep the test short; the error keeps falling slowly after that
// (about 6.6% after 1,200 rounds).
func TestVivaldiOnPlanetLab490(t *testing.T) {
	m, err := PlanetLab490()
	if err != nil {
		t.Fatal(err)
	}
	if m.Len() != 490 {
		t.Fatalf("%d nodes", m.Len())
	}
	for i := range m.RTT {
		for j := range m.RTT {
			if m.RTT[i][j] != m.RTT[j][i] || (i != j) != (m.RTT[i][j] > 0) {
				t.Fatalf("RTT[%d][%d] = %v", i, j, m.RTT[i][j])
			}
		}
	}
	cfg := VivaldiConfig{Rounds: 400, Seed: 1}
	t.Logf("seed %d, %d rounds, no jitter", cfg.Seed, cfg.Rounds)
	cs, err := Embed(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	acc := Accuracy(m, cs)
	t.Logf("PlanetLab 490: median relative error %.2f%%, p90 %.1f%%, median absolute error %.1f ms",
		100*acc.MedianRel, 100*acc.P90Rel, acc.MedianAbsMS)
	if acc.MedianRel < 0.04 || acc.MedianRel > 0.10 {
		t.Fatalf("median relative error %.3f, expected about 0.07", acc.MedianRel)
	}
}

func TestEmbedIsDeterministic(t *testing.T) {
	_, full, err := USCities()
	if err != nil {
		t.Fatal(err)
	}
	m := full.Sub([]int{0, 7, 14, 21, 28, 35})
	cfg := VivaldiConfig{Rounds: 100, Jitter: 0.05, Seed: 9}
	a, err := Embed(m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Embed(m, cfg)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed, different coordinates")
	}
	cfg.Seed++
	if c, _ := Embed(m, cfg); reflect.DeepEqual(a, c) {
		t.Fatal("different seeds, same coordinates")
	}
	if acc := Accuracy(m, a); acc.MedianRel > 0.15 {
		t.Fatalf("6 cities, 100 rounds: median error %.3f", acc.MedianRel)
	}
}

func TestKMeansIsDeterministicAndAssignsToNearest(t *testing.T) {
	sites, err := Sites("atlanta")
	if err != nil {
		t.Fatal(err)
	}
	proj := newProjector(sites)
	pts := make([]point, len(sites))
	for i, s := range sites {
		pts[i] = proj.project(s.Lat, s.Lon)
	}
	c1, g1 := kMeans(pts, 5, 3)
	c2, g2 := kMeans(pts, 5, 3)
	if !reflect.DeepEqual(c1, c2) || !reflect.DeepEqual(g1, g2) {
		t.Fatal("k-means not deterministic")
	}
	sizes := make([]int, 5)
	for i, p := range pts {
		if g1[i] != nearest(c1, p) {
			t.Fatalf("site %d in group %d, nearest centre %d", i, g1[i], nearest(c1, p))
		}
		sizes[g1[i]]++
	}
	for g, n := range sizes {
		if n == 0 {
			t.Fatalf("group %d empty: %v", g, sizes)
		}
	}
}
