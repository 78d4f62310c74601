package auth

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/topic"
)

// universe is every topic name of up to five levels over a small alphabet
// that includes a level no filter uses ("c") and a '$' level: enough to
// witness any difference between filters of up to four levels over
// {a, b, $s, +, #}.
func universe() []string {
	levels := []string{"a", "b", "c", "$s"}
	var out, prev []string
	prev = []string{""}
	for depth := 1; depth <= 5; depth++ {
		var next []string
		for _, p := range prev {
			for _, l := range levels {
				n := l
				if depth > 1 {
					n = p + "/" + l
				}
				next = append(next, n)
			}
		}
		out = append(out, next...)
		prev = next
	}
	return out
}

func randomFilter(r *rand.Rand) string {
	n := 1 + r.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = []string{"a", "b", "$s", "+"}[r.IntN(4)]
	}
	if r.IntN(3) == 0 {
		parts[n-1] = "#"
	}
	return strings.Join(parts, "/")
}

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0: the fixed default seeds)")

func seeds() []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	return []uint64{1, 2, 3, 4}
}

// TestCoversAndOverlapsAgainstOracle compares covers and overlaps with their
// definitions evaluated over a universe of topic names with topic.Match.
func TestCoversAndOverlapsAgainstOracle(t *testing.T) {
	names := universe()
	for _, seed := range seeds() {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("seed %d (reproduce with -run TestCoversAndOverlapsAgainstOracle -seed %d)", seed, seed)
			checkAgainstOracle(t, rand.New(rand.NewPCG(seed, 0)), names)
		})
	}
}

func checkAgainstOracle(t *testing.T, r *rand.Rand, names []string) {
	for i := 0; i < 1500; i++ {
		a, b := randomFilter(r), randomFilter(r)
		if topic.ValidateFilter(a) != nil || topic.ValidateFilter(b) != nil {
			continue
		}
		wantCovers, wantOverlaps := true, false
		for _, n := range names {
			ma, mb := topic.Match(a, n), topic.Match(b, n)
			if mb && !ma {
				wantCovers = false
			}
			if ma && mb {
				wantOverlaps = true
			}
		}
		if got := covers(a, b); got != wantCovers {
			t.Fatalf("covers(%q, %q) = %v, want %v", a, b, got, wantCovers)
		}
		if got := topic.Overlap(a, b); got != wantOverlaps {
			t.Fatalf("topic.Overlap(%q, %q) = %v, want %v", a, b, got, wantOverlaps)
		}
	}
}

func TestCoversExamples(t *testing.T) {
	for _, c := range []struct {
		rule, filter string
		covers       bool
	}{
		{"#", "a/b", true},
		{"#", "$SYS/#", false},
		{"$SYS/#", "$SYS/broker/uptime", true},
		{"a/#", "a", true},
		{"a", "a/#", false},
		{"a/+", "a/+", true},
		{"a/+", "a/#", false},
		{"a/+/c", "a/b/c", true},
		{"a/b", "a/+", false},
	} {
		if got := covers(c.rule, c.filter); got != c.covers {
			t.Errorf("covers(%q, %q) = %v", c.rule, c.filter, got)
		}
	}
}

// TestRefusedSubscriptionsLoseNothing: against random rule lists, a
// refused subscription matches no topic the rules would let the client
// receive, so refusing it takes nothing from the client; and a granted one
// whose filter matches a receivable topic is never refused (the per-message
// check withholds the rest).
func TestRefusedSubscriptionsLoseNothing(t *testing.T) {
	names := universe()
	for _, seed := range seeds() {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("seed %d (reproduce with -run TestRefusedSubscriptionsLoseNothing -seed %d)", seed, seed)
			r := rand.New(rand.NewPCG(seed, 1))
			for range 800 {
				var rules []compiled
				for range 1 + r.IntN(4) {
					f := randomFilter(r)
					if topic.ValidateFilter(f) != nil {
						continue
					}
					rules = append(rules, compiled{allow: r.IntN(2) == 0, access: Subscribe, filter: f})
				}
				f := randomFilter(r)
				if topic.ValidateFilter(f) != nil {
					continue
				}
				receivable := false
				for _, n := range names {
					if topic.Match(f, n) && decideName(rules, Subscribe, n) {
						receivable = true
						break
					}
				}
				if receivable && !decideFilter(rules, f) {
					t.Fatalf("rules %+v refuse %q, which matches a topic they let the client receive", rules, f)
				}
			}
		})
	}
}
