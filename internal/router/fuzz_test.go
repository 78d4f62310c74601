package router

import (
	"slices"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/topic"
)

// FuzzMatchAgainstReference subscribes one subscriber per line of filters
// and checks that Match on name returns exactly the subscribers whose filter
// topic.Match accepts.
func FuzzMatchAgainstReference(f *testing.F) {
	f.Add("a/+\n#\n+/+/c\n$SYS/#\na/#", "a/b")
	f.Add("#\n+\n$SYS/+", "$SYS/x")
	f.Add("+/+\n/+\n+/\n//", "/")
	f.Fuzz(func(t *testing.T, filters, name string) {
		ix := New[int]()
		lines := strings.Split(filters, "\n")
		if len(lines) > 64 {
			return
		}
		var want []int
		for i, fl := range lines {
			if _, err := ix.Subscribe(i, fl, Options{}); err != nil {
				continue
			}
			if _, inner, shared, _ := topic.ParseShared(fl); !shared && topic.Match(inner, name) {
				want = append(want, i)
			}
		}
		var m Matches[int]
		ix.Match(name, -1, &m)
		var got []int
		for _, d := range m.Direct {
			got = append(got, d.Sub)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("Match(%q) over %q = %v, want %v", name, lines, got, want)
		}
		for i := range lines {
			ix.Unsubscribe(i, lines[i])
		}
		if ix.Len() != 0 || ix.nodes != 0 {
			t.Fatalf("left %d subscriptions, %d nodes", ix.Len(), ix.nodes)
		}
	})
}
