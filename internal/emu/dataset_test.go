package emu

import (
	"errors"
	"testing"
)

func TestUSCitiesAreACompleteSymmetricMatrix(t *testing.T) {
	sites, m, err := USCities()
	if err != nil {
		t.Fatal(err)
	}
	if len(sites) != 66 || m.Len() != 66 {
		t.Fatalf("%d sites, %d matrix nodes, want 66 (67 US cities less Jackson)", len(sites), m.Len())
	}
	for i := range m.RTT {
		if m.Names[i] == "Jackson" {
			t.Fatal("Jackson kept although its RTT to Phoenix is missing")
		}
		for j := range m.RTT {
			if m.RTT[i][j] != m.RTT[j][i] || (i != j) != (m.RTT[i][j] > 0) {
				t.Fatalf("RTT[%d][%d] = %v, RTT[%d][%d] = %v", i, j, m.RTT[i][j], j, i, m.RTT[j][i])
			}
		}
	}
	sub := m.Sub([]int{3, 1})
	if sub.Names[0] != m.Names[3] || sub.RTT[0][1] != m.RTT[3][1] {
		t.Fatalf("Sub: %+v", sub)
	}
}

func TestSitesLoad(t *testing.T) {
	for name, want := range map[string]int{"melbourne": 1464, "atlanta": 400} {
		s, err := Sites(name)
		if err != nil || len(s) != want {
			t.Fatalf("%s: %d sites (%v), want %d", name, len(s), err, want)
		}
	}
	if _, err := Sites("paris"); !errors.Is(err, ErrDataset) {
		t.Fatalf("unknown dataset: %v", err)
	}
}
