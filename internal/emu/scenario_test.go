package emu

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func stats(r *Result, point int, policy string) Stats {
	return r.Points[point].Stats[slices.Index(r.Policies, policy)]
}

// The paper's UAV claim: latency-aware placement keeps every swarm under
// 40 ms, whatever the number of zones; consistent hashing does not.
func TestUAVCentroidHasNoViolations(t *testing.T) {
	opt := Options{Permutations: 20, Seed: 4, Vivaldi: VivaldiConfig{Rounds: 200, Jitter: 0.05}}
	t.Logf("seed %d", opt.Seed)
	for _, sites := range []string{"melbourne", "atlanta"} {
		opt.Sites = sites
		r, err := RunUAV(context.Background(), opt)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Points) != len(UAVZones) {
			t.Fatalf("%d points", len(r.Points))
		}
		for i, p := range r.Points {
			c, h := stats(r, i, "centroid"), stats(r, i, "hash")
			if c.Violations != 0 || c.Pairs != int64(opt.Permutations*uavSwarms*2*(uavDrones-1)) {
				t.Errorf("%s, %d zones: centroid %d violations of %d pairs", sites, p.X, c.Violations, c.Pairs)
			}
			if h.ViolationRatio() < 0.3 {
				t.Errorf("%s, %d zones: hash violation ratio %.3f", sites, p.X, h.ViolationRatio())
			}
		}
	}
}

func TestMMOGPoliciesRankAsExpected(t *testing.T) {
	opt := Options{Permutations: 4, Topologies: 2, Seed: 2, Vivaldi: VivaldiConfig{Rounds: 200, Jitter: 0.05}}
	t.Logf("seed %d", opt.Seed)
	r, err := RunMMOG(context.Background(), opt, false)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range r.Points {
		c, a, h := stats(r, i, "centroid"), stats(r, i, "allpairs"), stats(r, i, "hash")
		if c.Pairs != h.Pairs || c.Pairs == 0 {
			t.Fatalf("%d cities: pairs %d vs %d", p.X, c.Pairs, h.Pairs)
		}
		if h.MeanWorst < c.MeanWorst*13/10 {
			t.Errorf("%d cities: hash worst %v not well behind centroid %v", p.X, h.MeanWorst, c.MeanWorst)
		}
		if c.MeanTopicWorst > a.MeanTopicWorst*11/10 {
			t.Errorf("%d cities: centroid topic worst %v more than 10%% behind all-pairs %v", p.X, c.MeanTopicWorst, a.MeanTopicWorst)
		}
	}
}

func TestMMOGMultiCentroidBeatsPublisherAndCenterTracksAllPairs(t *testing.T) {
	opt := Options{Permutations: 4, Topologies: 2, Seed: 2, Vivaldi: VivaldiConfig{Rounds: 200, Jitter: 0.05}}
	t.Logf("seed %d", opt.Seed)
	r, err := RunMMOG(context.Background(), opt, true)
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range r.Points {
		c, ctr, a, pub := stats(r, i, "centroid"), stats(r, i, "center"), stats(r, i, "allpairs"), stats(r, i, "publisher")
		if c.MeanTopicWorst >= pub.MeanTopicWorst {
			t.Errorf("%d cities: centroid topic worst %v, publisher-local %v", p.X, c.MeanTopicWorst, pub.MeanTopicWorst)
		}
		if ctr.MeanTopicWorst > a.MeanTopicWorst*105/100 || ctr.MeanTopicWorst > c.MeanTopicWorst {
			t.Errorf("%d cities: center topic worst %v, all-pairs %v, centroid %v", p.X, ctr.MeanTopicWorst, a.MeanTopicWorst, c.MeanTopicWorst)
		}
	}
}

func TestResultsDoNotDependOnWorkers(t *testing.T) {
	base := Options{Permutations: 6, Topologies: 3, Seed: 8, Vivaldi: VivaldiConfig{Rounds: 50, Jitter: 0.05}}
	t.Logf("seed %d", base.Seed)
	var got []*Result
	for _, workers := range []int{1, 3} {
		opt := base
		opt.Workers = workers
		r, err := RunMMOG(context.Background(), opt, true)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	if !reflect.DeepEqual(got[0], got[1]) {
		t.Fatal("results differ between 1 and 3 workers")
	}
}

func TestRunStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := RunUAV(ctx, Options{Permutations: 50, Seed: 1})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if _, err := RunUAV(context.Background(), Options{Permutations: 0}); !errors.Is(err, ErrOptions) {
		t.Fatalf("0 permutations: %v", err)
	}
}

func wellFormedSVG(t *testing.T, name string, data []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := d.Token()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatalf("%s: not well-formed XML: %v", name, err)
		}
	}
}

func TestFilesAreWrittenWithChartsPerPolicy(t *testing.T) {
	r, err := RunUAV(context.Background(), Options{Permutations: 2, Seed: 1, Vivaldi: VivaldiConfig{Rounds: 50}})
	if err != nil {
		t.Fatal(err)
	}
	files := r.Files()
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
		if strings.HasSuffix(f.Name, ".svg") {
			wellFormedSVG(t, f.Name, f.Data)
			for _, p := range r.Policies {
				if !bytes.Contains(f.Data, []byte(">"+p+"<")) {
					t.Errorf("%s: no legend entry for %s", f.Name, p)
				}
			}
		}
	}
	if want := []string{"uav.md", "uav.csv", "uav-worst.svg", "uav-violations.svg"}; !slices.Equal(names, want) {
		t.Fatalf("files %v, want %v", names, want)
	}
	if rows := bytes.Count(files[1].Data, []byte("\n")); rows != 1+len(UAVZones)*len(r.Policies) {
		t.Fatalf("csv has %d lines", rows)
	}
}

func TestMonitoringSummaryIsConstantAndAllPairsGrows(t *testing.T) {
	r, err := RunMonitoring(Options{Permutations: 1, Seed: 1, Vivaldi: VivaldiConfig{Rounds: 50}})
	if err != nil {
		t.Fatal(err)
	}
	last := len(r.ClientsPerTopic) - 1
	if spread := slices.Max(r.Summary) - slices.Min(r.Summary); spread > 40 {
		t.Errorf("centroid report sizes %v vary by %d bytes", r.Summary, spread)
	}
	perClient := float64(r.AllPairs[last]-r.AllPairs[last-1]) / float64(r.ClientsPerTopic[last]-r.ClientsPerTopic[last-1])
	if perClient < 80 || perClient > 100 {
		t.Errorf("all-pairs grows %.1f bytes per client, want about 90 (an 8-dimensional coordinate)", perClient)
	}
	for _, f := range r.Files() {
		if strings.HasSuffix(f.Name, ".svg") {
			wellFormedSVG(t, f.Name, f.Data)
		}
	}
}
