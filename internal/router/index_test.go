package router

import (
	"errors"
	"slices"
	"sort"
	"sync"
	"testing"

	"github.com/sextantmq/sextant/internal/topic"
)

func mustSub[S comparable](t *testing.T, ix *Index[S], sub S, filter string, o Options) {
	t.Helper()
	if _, err := ix.Subscribe(sub, filter, o); err != nil {
		t.Fatalf("Subscribe(%v, %q): %v", sub, filter, err)
	}
}

// direct returns the subscribers of m.Direct, sorted.
func direct(m *Matches[string]) []string {
	var out []string
	for _, d := range m.Direct {
		out = append(out, d.Sub)
	}
	sort.Strings(out)
	return out
}

func TestMatchSpecCases(t *testing.T) {
	cases := []struct {
		filters []string // subscriber i subscribes to filters[i]
		name    string
		want    []string // matching filters
	}{
		{[]string{"#", "+/uptime", "+", "$SYS/#", "$SYS/+", "$SYS/uptime", "$SYS/+/x"}, "$SYS/uptime", []string{"$SYS/#", "$SYS/+", "$SYS/uptime"}},
		{[]string{"#", "+", "$SYS/#", "$SYS"}, "$SYS", []string{"$SYS", "$SYS/#"}},
		{[]string{"#", "a/#", "a/b/#", "a/+/#", "+/#", "a"}, "a", []string{"#", "+/#", "a", "a/#"}},
		{[]string{"a/+", "+/+", "+", "a/#", "a"}, "a/", []string{"+/+", "a/#", "a/+"}},
		{[]string{"+/b", "/b", "+/+/+", "#"}, "/b", []string{"#", "+/b", "/b"}},
		{[]string{"a/+/c", "a/b/c", "a//c", "+/+/+"}, "a//c", []string{"+/+/+", "a/+/c", "a//c"}},
		{[]string{"a/b", "a/b/", "a/b/#", "a/b/+"}, "a/b/", []string{"a/b/", "a/b/#", "a/b/+"}},
		{[]string{"a/b", "A/b", "a/B"}, "a/b", []string{"a/b"}},
		{[]string{"#", "a/+"}, "$a/b", nil},
		{[]string{"a/+", "a/#"}, "a/$b", []string{"a/#", "a/+"}},
	}
	for _, c := range cases {
		ix := New[string]()
		for _, f := range c.filters {
			mustSub(t, ix, f, f, Options{}) // the subscriber is named after its filter
		}
		var m Matches[string]
		ix.Match(c.name, "", &m)
		if got := direct(&m); !slices.Equal(got, c.want) {
			t.Errorf("filters %q, name %q: matched %q, want %q", c.filters, c.name, got, c.want)
		}
		for _, f := range c.filters { // the reference matcher agrees
			if topic.Match(f, c.name) != slices.Contains(c.want, f) {
				t.Errorf("topic.Match(%q, %q) disagrees with the table", f, c.name)
			}
		}
	}
}

func TestOverlappingSubscriptionsFoldIntoOneDelivery(t *testing.T) {
	ix := New[string]()
	mustSub(t, ix, "A", "a/b", Options{QoS: 0, ID: 1})
	mustSub(t, ix, "A", "a/+", Options{QoS: 2, ID: 2})
	mustSub(t, ix, "A", "#", Options{QoS: 1, RetainAsPublished: true})
	mustSub(t, ix, "A", "a/#", Options{QoS: 0, ID: 7})
	mustSub(t, ix, "B", "a/+", Options{QoS: 1, ID: 9})
	var m Matches[string]
	ix.Match("a/b", "", &m)
	if len(m.Direct) != 2 {
		t.Fatalf("got %d deliveries, want 2: %+v", len(m.Direct), m.Direct)
	}
	for _, d := range m.Direct {
		ids := slices.Sorted(slices.Values(d.IDs))
		switch d.Sub {
		case "A":
			if d.QoS != 2 || !d.RetainAsPublished || !slices.Equal(ids, []uint32{1, 2, 7}) {
				t.Errorf("A: %+v, want QoS 2, retain as published, ids [1 2 7]", d)
			}
		case "B":
			if d.QoS != 1 || d.RetainAsPublished || !slices.Equal(ids, []uint32{9}) {
				t.Errorf("B: %+v, want QoS 1, ids [9]", d)
			}
		default:
			t.Errorf("unexpected delivery %+v", d)
		}
	}
	// Appending to one delivery's ids must not clobber another's.
	a := m.Direct[0].IDs
	_ = append(a, 99)
	if m.Direct[1].IDs[0] == 99 {
		t.Error("Delivery.IDs slices share capacity")
	}
	// A topic matching only one of A's subscriptions keeps just its options.
	ix.Match("x", "", &m)
	if len(m.Direct) != 1 || m.Direct[0].QoS != 1 || !m.Direct[0].RetainAsPublished || m.Direct[0].IDs != nil {
		t.Errorf("x: %+v, want A via # only", m.Direct)
	}
}

func TestNoLocal(t *testing.T) {
	ix := New[string]()
	mustSub(t, ix, "A", "a", Options{QoS: 2, NoLocal: true, ID: 1})
	mustSub(t, ix, "B", "a", Options{NoLocal: true})
	var m Matches[string]
	ix.Match("a", "A", &m)
	if got := direct(&m); !slices.Equal(got, []string{"B"}) {
		t.Errorf("A publishing: matched %q, want [B]", got)
	}
	ix.Match("a", "C", &m)
	if got := direct(&m); !slices.Equal(got, []string{"A", "B"}) {
		t.Errorf("C publishing: matched %q, want [A B]", got)
	}
	// A's other subscription without No Local still delivers, with its own options.
	mustSub(t, ix, "A", "+", Options{QoS: 1})
	ix.Match("a", "A", &m)
	if len(m.Direct) != 2 {
		t.Fatalf("got %+v", m.Direct)
	}
	for _, d := range m.Direct {
		if d.Sub == "A" && (d.QoS != 1 || len(d.IDs) != 0) {
			t.Errorf("A via +: %+v, want QoS 1 and no ids", d)
		}
	}
}

func TestSharedRoundRobin(t *testing.T) {
	ix := New[string]()
	for _, s := range []string{"x", "y", "z"} {
		mustSub(t, ix, s, "$share/g/a/+", Options{QoS: 1})
	}
	mustSub(t, ix, "x", "a/b", Options{QoS: 2}) // x's own subscription is separate
	mustSub(t, ix, "w", "$share/h/a/b", Options{})
	var m Matches[string]
	for i := range 6 {
		ix.Match("a/b", "", &m)
		if got := direct(&m); !slices.Equal(got, []string{"x"}) {
			t.Fatalf("direct %q, want [x]", got)
		}
		if len(m.Shared) != 2 {
			t.Fatalf("shared %+v, want groups g and h", m.Shared)
		}
		for _, s := range m.Shared {
			switch s.Group {
			case "g":
				if s.Filter != "a/+" || s.Start != uint64(i) || len(s.Members) != 3 ||
					s.Members[0].Sub != "x" || s.Members[1].Sub != "y" || s.Members[2].Sub != "z" || s.Members[0].Opts.QoS != 1 {
					t.Fatalf("match %d: group g = %+v", i, s)
				}
			case "h":
				if s.Filter != "a/b" || s.Start != uint64(i) || len(s.Members) != 1 {
					t.Fatalf("match %d: group h = %+v", i, s)
				}
			}
		}
	}
	// A topic matching only g advances only g.
	ix.Match("a/c", "", &m)
	if len(m.Shared) != 1 || m.Shared[0].Group != "g" || m.Shared[0].Start != 6 {
		t.Fatalf("a/c: %+v", m.Shared)
	}
	// Leaving keeps the others' order; re-subscribing replaces in place.
	if !ix.Unsubscribe("y", "$share/g/a/+") {
		t.Fatal("y was not a member")
	}
	if existed, _ := ix.Subscribe("x", "$share/g/a/+", Options{QoS: 2}); !existed {
		t.Fatal("x's resubscription not reported as a replacement")
	}
	ix.Match("a/c", "", &m)
	if ms := m.Shared[0].Members; len(ms) != 2 || ms[0].Sub != "x" || ms[0].Opts.QoS != 2 || ms[1].Sub != "z" {
		t.Fatalf("members after changes: %+v", ms)
	}
	// The group outlives nobody: once empty it is gone, and a new one starts at 0.
	ix.Unsubscribe("x", "$share/g/a/+")
	ix.Unsubscribe("z", "$share/g/a/+")
	mustSub(t, ix, "v", "$share/g/a/+", Options{})
	ix.Match("a/c", "", &m)
	if len(m.Shared) != 1 || m.Shared[0].Start != 0 {
		t.Fatalf("recreated group: %+v", m.Shared)
	}
}

func TestSharedStartIsAtomicUnderConcurrentMatch(t *testing.T) {
	ix := New[int]()
	for i := range 3 {
		mustSub(t, ix, i, "$share/g/t", Options{})
	}
	const workers, each = 4, 500
	starts := make(chan uint64, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var m Matches[int]
			for range each {
				ix.Match("t", -1, &m)
				starts <- m.Shared[0].Start
			}
		}()
	}
	wg.Wait()
	close(starts)
	seen := make([]bool, workers*each)
	for s := range starts {
		if s >= uint64(len(seen)) || seen[s] {
			t.Fatalf("cursor %d repeated or out of range", s)
		}
		seen[s] = true
	}
}

func TestSubscribeReplacesAndUnsubscribeCleansUp(t *testing.T) {
	ix := New[string]()
	filters := []string{"a", "a/b", "a/b/c", "a/+/c", "a/#", "#", "+", "/", "//", "$SYS/#", "$share/g/a/b", "$share/h/a/b", "$share/g/#"}
	for i := range 40 { // enough children on one node to switch to a map and back
		filters = append(filters, "wide/"+string(rune('a'+i%26))+string(rune('a'+i/26))+"/x")
	}
	for _, s := range []string{"A", "B"} {
		for _, f := range filters {
			if existed, err := ix.Subscribe(s, f, Options{QoS: 1}); existed || err != nil {
				t.Fatalf("Subscribe(%s, %q) = %v, %v", s, f, existed, err)
			}
		}
	}
	if ix.Len() != 2*len(filters) {
		t.Fatalf("Len = %d, want %d", ix.Len(), 2*len(filters))
	}
	if existed, err := ix.Subscribe("A", "a/b", Options{QoS: 2}); !existed || err != nil {
		t.Fatalf("resubscribe = %v, %v; want a replacement", existed, err)
	}
	if ix.Len() != 2*len(filters) {
		t.Fatalf("Len changed on replacement: %d", ix.Len())
	}
	var m Matches[string]
	ix.Match("a/b", "", &m)
	for _, d := range m.Direct {
		if want := map[string]byte{"A": 2, "B": 1}[d.Sub]; d.QoS != want {
			t.Errorf("%s: QoS %d, want %d", d.Sub, d.QoS, want)
		}
	}
	if ix.Unsubscribe("C", "a/b") || ix.Unsubscribe("A", "a/b/c/d") || ix.Unsubscribe("A", "$share/zz/a/b") || ix.Unsubscribe("A", "$share//") {
		t.Fatal("Unsubscribe reported a subscription that does not exist")
	}
	for _, s := range []string{"B", "A"} {
		for _, f := range filters {
			if !ix.Unsubscribe(s, f) {
				t.Fatalf("Unsubscribe(%s, %q) found nothing", s, f)
			}
			if ix.Unsubscribe(s, f) {
				t.Fatalf("Unsubscribe(%s, %q) twice", s, f)
			}
		}
	}
	if ix.Len() != 0 || ix.nodes != 0 || !ix.root.empty() {
		t.Fatalf("after removing everything: Len %d, nodes %d, root %+v", ix.Len(), ix.nodes, ix.root)
	}
}

func TestSubscribeRejects(t *testing.T) {
	ix := New[string]()
	cases := []struct {
		filter string
		o      Options
		want   error
	}{
		{"a/#/b", Options{}, topic.ErrInvalidFilter},
		{"", Options{}, topic.ErrInvalidFilter},
		{"$share/g", Options{}, topic.ErrInvalidShare},
		{"a", Options{QoS: 3}, ErrInvalidOptions},
		{"a", Options{RetainHandling: 3}, ErrInvalidOptions},
		{"$share/g/a", Options{NoLocal: true}, ErrInvalidOptions},
	}
	for _, c := range cases {
		if _, err := ix.Subscribe("A", c.filter, c.o); !errors.Is(err, c.want) {
			t.Errorf("Subscribe(%q, %+v) = %v, want %v", c.filter, c.o, err, c.want)
		}
	}
	if ix.Len() != 0 || ix.nodes != 0 {
		t.Fatalf("rejected subscriptions left state: Len %d, nodes %d", ix.Len(), ix.nodes)
	}
}

func TestFilters(t *testing.T) {
	ix := New[string]()
	mustSub(t, ix, "A", "a/+", Options{})
	mustSub(t, ix, "B", "a/+", Options{})
	mustSub(t, ix, "A", "/x", Options{})
	mustSub(t, ix, "A", "#", Options{})
	mustSub(t, ix, "A", "$share/g/a/+", Options{})
	mustSub(t, ix, "B", "$share/g/a/+", Options{})
	mustSub(t, ix, "C", "$share/h/a/+", Options{})
	got := map[string]int{}
	ix.Filters(func(f string, n int) {
		if _, dup := got[f]; dup {
			t.Errorf("filter %q reported twice", f)
		}
		got[f] = n
	})
	want := map[string]int{"a/+": 2, "/x": 1, "#": 1, "$share/g/a/+": 2, "$share/h/a/+": 1}
	if len(got) != len(want) {
		t.Errorf("Filters = %v, want %v", got, want)
	}
	for f, n := range want {
		if got[f] != n {
			t.Errorf("Filters[%q] = %d, want %d", f, got[f], n)
		}
	}
}

func TestMatchDoesNotAllocate(t *testing.T) {
	ix := New[*int]()
	subs := make([]*int, 50)
	for i := range subs {
		subs[i] = new(int)
		mustSub(t, ix, subs[i], "a/+/c", Options{ID: uint32(i + 1)})
		mustSub(t, ix, subs[i], "a/b/#", Options{QoS: 1})
		if i%10 == 0 {
			mustSub(t, ix, subs[i], "$share/g/a/b/c", Options{})
		}
	}
	mustSub(t, ix, subs[0], "a/b/c", Options{NoLocal: true})
	var m Matches[*int]
	for _, name := range []string{"a/b/c", "a/x/c", "a/b"} {
		ix.Match(name, subs[0], &m) // warm up the buffers
		if n := testing.AllocsPerRun(100, func() { ix.Match(name, subs[0], &m) }); n != 0 {
			t.Errorf("Match(%q) allocates %.1f times per call", name, n)
		}
	}
	ix.Match("a/b/c", subs[0], &m)
	if len(m.Direct) != 50 || len(m.Shared) != 1 || len(m.Shared[0].Members) != 5 {
		t.Fatalf("unexpected result: %d direct, %+v shared", len(m.Direct), m.Shared)
	}
}
