package retained

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/topic"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0: run the fixed default seeds)")

func msg(name, payload string) *message.Message {
	return &message.Message{Topic: name, Payload: []byte(payload), Retain: true}
}

// matched returns the topics Match reports for filter, sorted.
func matched(s *Index, filter string) []string {
	var out []string
	s.Match(filter, func(m *message.Message) bool {
		out = append(out, m.Topic)
		return true
	})
	slices.Sort(out)
	return out
}

func TestSetGetDelete(t *testing.T) {
	var s Index
	if s.Set(msg("a/b", "1")) {
		t.Fatal("first Set reported a replacement")
	}
	if !s.Set(msg("a/b", "2")) {
		t.Fatal("second Set did not report a replacement")
	}
	if m := s.Get("a/b"); m == nil || string(m.Payload) != "2" {
		t.Fatalf("Get = %+v, want payload 2", m)
	}
	if s.Get("a") != nil || s.Get("a/b/c") != nil || s.Get("x") != nil {
		t.Fatal("Get found a message under a name never set")
	}
	s.Set(msg("a", "p"))
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
	// An empty payload deletes, and is not stored.
	if !s.Set(msg("a/b", "")) || s.Get("a/b") != nil || s.Len() != 1 {
		t.Fatalf("empty payload did not delete: Len %d", s.Len())
	}
	if s.Set(msg("a/b", "")) {
		t.Fatal("deleting a missing message reported one")
	}
	if s.Delete("a/b") || !s.Delete("a") || s.Delete("a") {
		t.Fatal("Delete reported wrongly")
	}
	if s.Len() != 0 || s.mu.nodes != 0 || len(s.mu.root.kids) != 0 || s.mu.root.kidMap != nil {
		t.Fatalf("after deleting everything: Len %d, nodes %d", s.Len(), s.mu.nodes)
	}
}

func TestMatchSpecCases(t *testing.T) {
	var s Index
	names := []string{"a", "a/b", "a/b/c", "a//c", "a/", "/", "/b", "$SYS", "$SYS/uptime", "$x/a", "b/$y", "sport/tennis/player1", "sport"}
	for _, n := range names {
		s.Set(msg(n, "x"))
	}
	cases := []struct {
		filter string
		want   []string
	}{
		{"#", []string{"/", "/b", "a", "a/", "a//c", "a/b", "a/b/c", "b/$y", "sport", "sport/tennis/player1"}},
		{"a/#", []string{"a", "a/", "a//c", "a/b", "a/b/c"}},
		{"a/+", []string{"a/", "a/b"}},
		{"a/+/c", []string{"a//c", "a/b/c"}},
		{"+", []string{"a", "sport"}},
		{"+/+", []string{"/", "/b", "a/", "a/b", "b/$y"}},
		{"+/b", []string{"/b", "a/b"}},
		{"$SYS/#", []string{"$SYS", "$SYS/uptime"}},
		{"$SYS/+", []string{"$SYS/uptime"}},
		{"+/uptime", nil},
		{"+/a", nil},
		{"$x/+", []string{"$x/a"}},
		{"sport/tennis/#", []string{"sport/tennis/player1"}},
		{"sport/+", nil},
		{"a/b", []string{"a/b"}},
		{"nothing/#", nil},
	}
	for _, c := range cases {
		if got := matched(&s, c.filter); !slices.Equal(got, c.want) {
			t.Errorf("Match(%q) = %q, want %q", c.filter, got, c.want)
		}
		var want []string
		for _, n := range names {
			if topic.Match(c.filter, n) {
				want = append(want, n)
			}
		}
		slices.Sort(want)
		if !slices.Equal(want, c.want) {
			t.Errorf("topic.Match disagrees with the table for %q: %q", c.filter, want)
		}
	}
}

func TestMatchAndAllStopEarly(t *testing.T) {
	var s Index
	for i := range 50 {
		s.Set(msg(fmt.Sprintf("t/%d/x", i), "p"))
	}
	for _, filter := range []string{"#", "t/+/x", "t/#"} {
		calls := 0
		s.Match(filter, func(*message.Message) bool { calls++; return calls < 3 })
		if calls != 3 {
			t.Errorf("Match(%q) called fn %d times after it returned false at 3", filter, calls)
		}
	}
	calls := 0
	s.All(func(*message.Message) bool { calls++; return false })
	if calls != 1 {
		t.Errorf("All called fn %d times, want 1", calls)
	}
	var all []string
	s.All(func(m *message.Message) bool { all = append(all, m.Topic); return true })
	if len(all) != 50 {
		t.Errorf("All visited %d messages, want 50", len(all))
	}
}

func TestSetCopiesTopicLevels(t *testing.T) {
	var s Index
	m := &message.Message{Topic: string([]byte("keep/this/name")), Payload: []byte("p")}
	s.Set(m)
	// The trie's levels are its own copy, so a node does not pin the memory
	// of whichever message first created it.
	base := uintptr(unsafe.Pointer(unsafe.StringData(m.Topic)))
	for n := s.find(m.Topic); n != &s.mu.root; n = n.parent {
		p := uintptr(unsafe.Pointer(unsafe.StringData(n.level)))
		if p >= base && p < base+uintptr(len(m.Topic)) {
			t.Fatalf("level %q points into the message's topic", n.level)
		}
	}
	if s.Get("keep/this/name") != m {
		t.Fatal("Get did not return the stored message")
	}
}

func TestConcurrentUse(t *testing.T) {
	var s Index
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				name := fmt.Sprintf("c/%d/%d", w, i%17)
				s.Set(msg(name, "p"))
				s.Get(name)
				s.Match("c/+/#", func(*message.Message) bool { return true })
				if i%3 == 0 {
					s.Delete(name)
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	s.All(func(*message.Message) bool { n++; return true })
	if n != s.Len() {
		t.Fatalf("All saw %d messages, Len says %d", n, s.Len())
	}
}

func TestDifferentialAgainstNaiveMatcher(t *testing.T) {
	seeds := []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			t.Logf("seed %d (reproduce with -run TestDifferentialAgainstNaiveMatcher -seed %d)", seed, seed)
			runDifferential(t, seed)
		})
	}
}

var levelVocab = []string{"a", "b", "c", "", "dev", "ü", "d", "e", "f", "g"}

func randomTopic(r *rand.Rand, filter bool) string {
	n := 1 + r.IntN(4)
	parts := make([]string, n)
	for i := range parts {
		p := r.IntN(10)
		switch {
		case filter && p < 2:
			parts[i] = "+"
		case filter && p < 3 && i == n-1:
			parts[i] = "#"
		case i == 0 && p == 9:
			parts[i] = []string{"$SYS", "$x"}[r.IntN(2)]
		default:
			parts[i] = levelVocab[r.IntN(len(levelVocab))]
		}
	}
	return strings.Join(parts, "/")
}

func runDifferential(t *testing.T, seed uint64) {
	r := rand.New(rand.NewPCG(seed, seed))
	var s Index
	model := map[string]*message.Message{}
	var keys []string // model's keys in insertion order, for reproducible picks
	matches := 0
	for step := range 5000 {
		switch op := r.IntN(10); {
		case op < 5:
			name := randomTopic(r, false)
			payload := fmt.Sprint(step)
			if r.IntN(8) == 0 {
				payload = "" // deletes
			}
			m := msg(name, payload)
			_, had := model[name]
			if got := s.Set(m); got != had {
				t.Fatalf("step %d: Set(%q, %q) = %v, want %v", step, name, payload, got, had)
			}
			switch {
			case payload == "" && had:
				delete(model, name)
				keys = slices.DeleteFunc(keys, func(k string) bool { return k == name })
			case payload != "":
				if !had {
					keys = append(keys, name)
				}
				model[name] = m
			}
		case op < 7:
			name := randomTopic(r, false)
			if len(keys) > 0 && r.IntN(2) == 0 {
				name = keys[r.IntN(len(keys))]
			}
			_, had := model[name]
			if got := s.Delete(name); got != had {
				t.Fatalf("step %d: Delete(%q) = %v, want %v", step, name, got, had)
			}
			delete(model, name)
			keys = slices.DeleteFunc(keys, func(k string) bool { return k == name })
		case op < 8:
			name := randomTopic(r, false)
			if got, want := s.Get(name), model[name]; got != want {
				t.Fatalf("step %d: Get(%q) = %v, want %v", step, name, got, want)
			}
		default:
			filter := randomTopic(r, true)
			var got, want []string
			s.Match(filter, func(m *message.Message) bool {
				if model[m.Topic] != m {
					t.Fatalf("step %d: Match(%q) returned a stale message for %q", step, filter, m.Topic)
				}
				got = append(got, m.Topic)
				return true
			})
			for name := range model {
				if topic.Match(filter, name) {
					want = append(want, name)
				}
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("step %d: Match(%q) = %q, want %q", step, filter, got, want)
			}
			matches += len(got)
		}
		if s.Len() != len(model) {
			t.Fatalf("step %d: Len = %d, want %d", step, s.Len(), len(model))
		}
	}
	t.Logf("%d retained at the end; matches returned %d messages", len(model), matches)
	if matches == 0 {
		t.Fatal("the workload matched nothing")
	}
	for _, name := range keys {
		if !s.Delete(name) {
			t.Fatalf("final Delete(%q) found nothing", name)
		}
	}
	if s.Len() != 0 || s.mu.nodes != 0 {
		t.Fatalf("after deleting everything: Len %d, nodes %d", s.Len(), s.mu.nodes)
	}
}

func TestSetIfOrdersUpdates(t *testing.T) {
	var s Index
	newer := func(m *message.Message) func(*message.Message) bool {
		return func(cur *message.Message) bool { return cur.Stamp >= m.Stamp }
	}
	m2 := &message.Message{Topic: "a/b", Payload: []byte("2"), Stamp: 2}
	m1 := &message.Message{Topic: "a/b", Payload: []byte("1"), Stamp: 1}
	if !s.SetIf(m2, newer(m2)) {
		t.Fatal("first update not applied")
	}
	if s.SetIf(m1, newer(m1)) {
		t.Fatal("an older update overwrote a newer one")
	}
	if got := s.Get("a/b"); got != m2 || s.Len() != 1 {
		t.Fatalf("held %v, len %d", got, s.Len())
	}
	del := &message.Message{Topic: "a/b", Stamp: 3}
	if !s.SetIf(del, newer(del)) || s.Get("a/b") != nil || s.Len() != 0 {
		t.Fatal("a newer deletion was not applied")
	}
	if !s.SetIf(m1, newer(m1)) || s.Len() != 1 {
		t.Fatal("an update of an empty topic was refused")
	}
}

// TestNewerIsLastWriterWins: the later stamp wins; equal stamps are ordered
// by origin node id; an update never wins over itself.
func TestNewerIsLastWriterWins(t *testing.T) {
	m := &message.Message{Topic: "t", Stamp: 10, Origin: "n2"}
	for _, c := range []struct {
		stamp  uint64
		origin string
		want   bool
	}{{9, "n9", true}, {11, "n1", false}, {10, "n1", true}, {10, "n3", false}, {10, "n2", false}} {
		if got := Newer(m, c.stamp, c.origin); got != c.want {
			t.Errorf("Newer(10/n2 over %d/%s) = %v, want %v", c.stamp, c.origin, got, c.want)
		}
	}
}
