package router

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/topic"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0: run the fixed default seeds)")

// seeds returns the seeds a randomized test runs: the -seed flag's, or a
// fixed set so that the default run is reproducible.
func seeds() []uint64 {
	if *seedFlag != 0 {
		return []uint64{*seedFlag}
	}
	return []uint64{1, 2, 3, 4, 5, 6, 7, 8}
}

// workload generates random filters and names over a small vocabulary, so
// that they collide often.
type workload struct{ r *rand.Rand }

var levelVocab = []string{"a", "b", "c", "", "dev", "x y", "ü", "d", "e", "f"}

func (w workload) level(first bool) string {
	if first && w.r.IntN(8) == 0 {
		return []string{"$SYS", "$x"}[w.r.IntN(2)]
	}
	return levelVocab[w.r.IntN(len(levelVocab))]
}

func (w workload) name() string {
	n := 1 + w.r.IntN(5)
	parts := make([]string, n)
	for i := range parts {
		parts[i] = w.level(i == 0)
	}
	return strings.Join(parts, "/")
}

func (w workload) filter() string {
	n := 1 + w.r.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		switch p := w.r.IntN(10); {
		case p < 2:
			parts[i] = "+"
		case p < 3 && i == n-1:
			parts[i] = "#"
		default:
			parts[i] = w.level(i == 0)
		}
	}
	f := strings.Join(parts, "/")
	if f == "" {
		f = "/" // the empty filter is invalid; the filter of two empty levels is not
	}
	if w.r.IntN(6) == 0 {
		f = "$share/" + []string{"g", "h"}[w.r.IntN(2)] + "/" + f
	}
	return f
}

func (w workload) options(shared bool) Options {
	o := Options{QoS: byte(w.r.IntN(3)), RetainAsPublished: w.r.IntN(2) == 0, RetainHandling: byte(w.r.IntN(3))}
	if w.r.IntN(2) == 0 {
		o.ID = uint32(1 + w.r.IntN(1000))
	}
	if !shared {
		o.NoLocal = w.r.IntN(4) == 0
	}
	return o
}

// model is the obvious implementation: a list of subscriptions matched one
// by one with topic.Match.
type model struct {
	subs map[modelKey]Options
	keys []modelKey // the keys of subs in the order they were added

	order  map[string][]int  // shared filter -> members in joining order
	cursor map[string]uint64 // shared filter -> round-robin cursor
}

type modelKey struct {
	sub    int
	filter string
}

func (md *model) subscribe(sub int, filter string, o Options) bool {
	k := modelKey{sub, filter}
	_, existed := md.subs[k]
	md.subs[k] = o
	if !existed {
		md.keys = append(md.keys, k)
	}
	if _, _, shared, _ := topic.ParseShared(filter); shared && !existed {
		md.order[filter] = append(md.order[filter], sub)
	}
	return existed
}

func (md *model) unsubscribe(sub int, filter string) bool {
	k := modelKey{sub, filter}
	_, existed := md.subs[k]
	delete(md.subs, k)
	if existed {
		md.keys = slices.DeleteFunc(md.keys, func(x modelKey) bool { return x == k })
		if _, _, shared, _ := topic.ParseShared(filter); shared {
			md.order[filter] = slices.DeleteFunc(md.order[filter], func(s int) bool { return s == sub })
			if len(md.order[filter]) == 0 {
				delete(md.order, filter)
				delete(md.cursor, filter)
			}
		}
	}
	return existed
}

// match returns the expected deliveries (ids sorted) and shared groups keyed
// by "$share/group/filter", advancing the model's cursors.
func (md *model) match(name string, from int) (map[int]Delivery[int], map[string]SharedMatch[int]) {
	direct := map[int]Delivery[int]{}
	for k, o := range md.subs {
		if _, _, shared, _ := topic.ParseShared(k.filter); shared || !topic.Match(k.filter, name) || o.NoLocal && k.sub == from {
			continue
		}
		d, ok := direct[k.sub]
		d.Sub = k.sub
		if !ok || o.QoS > d.QoS {
			d.QoS = o.QoS
		}
		d.RetainAsPublished = d.RetainAsPublished || o.RetainAsPublished
		if o.ID != 0 {
			d.IDs = append(d.IDs, o.ID)
		}
		direct[k.sub] = d
	}
	for s, d := range direct {
		slices.Sort(d.IDs)
		direct[s] = d
	}
	shared := map[string]SharedMatch[int]{}
	for f, members := range md.order {
		g, inner, _, _ := topic.ParseShared(f)
		if !topic.Match(inner, name) {
			continue
		}
		sm := SharedMatch[int]{Group: g, Filter: inner, Start: md.cursor[f]}
		md.cursor[f]++
		for _, s := range members {
			sm.Members = append(sm.Members, Member[int]{s, md.subs[modelKey{s, f}]})
		}
		shared[f] = sm
	}
	return direct, shared
}

func (md *model) filters() map[string]int {
	out := map[string]int{}
	for k := range md.subs {
		out[k.filter]++
	}
	return out
}

func TestDifferentialAgainstNaiveMatcher(t *testing.T) {
	for _, seed := range seeds() {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("seed %d (reproduce with -run 'TestDifferentialAgainstNaiveMatcher' -seed %d)", seed, seed)
			runDifferential(t, seed)
		})
	}
}

func runDifferential(t *testing.T, seed uint64) {
	w := workload{rand.New(rand.NewPCG(seed, seed))}
	ix := New[int]()
	md := &model{subs: map[modelKey]Options{}, order: map[string][]int{}, cursor: map[string]uint64{}}
	var m Matches[int]
	var stats struct{ deliveries, ids, shared int }
	const nsubs = 24
	for step := range 4000 {
		switch op := w.r.IntN(10); {
		case op < 5:
			sub, f := w.r.IntN(nsubs), w.filter()
			_, _, shared, _ := topic.ParseShared(f)
			o := w.options(shared)
			got, err := ix.Subscribe(sub, f, o)
			if err != nil {
				t.Fatalf("step %d: Subscribe(%d, %q): %v", step, sub, f, err)
			}
			if want := md.subscribe(sub, f, o); got != want {
				t.Fatalf("step %d: Subscribe(%d, %q) existed = %v, want %v", step, sub, f, got, want)
			}
		case op < 8:
			sub, f := w.r.IntN(nsubs), w.filter()
			if w.r.IntN(2) == 0 && len(md.keys) > 0 { // pick an existing subscription half the time
				k := md.keys[w.r.IntN(len(md.keys))]
				sub, f = k.sub, k.filter
			}
			if got, want := ix.Unsubscribe(sub, f), md.unsubscribe(sub, f); got != want {
				t.Fatalf("step %d: Unsubscribe(%d, %q) = %v, want %v", step, sub, f, got, want)
			}
		default:
			name, from := w.name(), w.r.IntN(nsubs+1) // nsubs: a publisher that subscribes to nothing
			ix.Match(name, from, &m)
			wantDirect, wantShared := md.match(name, from)
			checkMatch(t, step, name, from, &m, wantDirect, wantShared)
			for _, d := range m.Direct {
				stats.deliveries++
				stats.ids += len(d.IDs)
			}
			stats.shared += len(m.Shared)
		}
		if ix.Len() != len(md.subs) {
			t.Fatalf("step %d: Len = %d, model has %d", step, ix.Len(), len(md.subs))
		}
		if step%500 == 0 {
			got := map[string]int{}
			ix.Filters(func(f string, n int) { got[f] += n })
			if want := md.filters(); !mapsEqual(got, want) {
				t.Fatalf("step %d: Filters = %v, want %v", step, got, want)
			}
		}
	}
	t.Logf("%d subscriptions at the end; matched %d deliveries with %d ids, %d shared groups", len(md.keys), stats.deliveries, stats.ids, stats.shared)
	if stats.deliveries == 0 || stats.ids == 0 || stats.shared == 0 {
		t.Fatalf("the workload exercised too little: %+v", stats)
	}
	for _, k := range slices.Clone(md.keys) {
		if !ix.Unsubscribe(k.sub, k.filter) {
			t.Fatalf("final Unsubscribe(%d, %q) found nothing", k.sub, k.filter)
		}
	}
	if ix.Len() != 0 || ix.nodes != 0 || !ix.root.empty() {
		t.Fatalf("after unsubscribing everything: Len %d, nodes %d", ix.Len(), ix.nodes)
	}
}

func checkMatch(t *testing.T, step int, name string, from int, m *Matches[int], wantDirect map[int]Delivery[int], wantShared map[string]SharedMatch[int]) {
	t.Helper()
	if len(m.Direct) != len(wantDirect) {
		t.Fatalf("step %d: Match(%q, from %d): %d deliveries %+v, want %d %+v", step, name, from, len(m.Direct), m.Direct, len(wantDirect), wantDirect)
	}
	seen := map[int]bool{}
	for _, d := range m.Direct {
		want, ok := wantDirect[d.Sub]
		ids := slices.Sorted(slices.Values(d.IDs))
		if !ok || seen[d.Sub] || d.QoS != want.QoS || d.RetainAsPublished != want.RetainAsPublished || !slices.Equal(ids, want.IDs) {
			t.Fatalf("step %d: Match(%q, from %d): delivery %+v, want %+v (present %v, duplicate %v)", step, name, from, d, want, ok, seen[d.Sub])
		}
		seen[d.Sub] = true
	}
	if len(m.Shared) != len(wantShared) {
		t.Fatalf("step %d: Match(%q): %d shared groups %+v, want %d %+v", step, name, len(m.Shared), m.Shared, len(wantShared), wantShared)
	}
	for _, s := range m.Shared {
		want, ok := wantShared[topic.SharePrefix+s.Group+"/"+s.Filter]
		if !ok || s.Start != want.Start || !slices.Equal(s.Members, want.Members) {
			t.Fatalf("step %d: Match(%q): shared %+v, want %+v", step, name, s, want)
		}
	}
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
