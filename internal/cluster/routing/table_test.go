package routing

import (
	"reflect"
	"testing"
)

// TestRouteOncePerNodeOneNodePerGroup: a node with several matching filters
// is one target; a shared group goes to one node (the first whose link is
// up from the group's cursor), never when served at the origin; a dropped
// node gets nothing; full announcements replace and deltas change.
func TestRouteOncePerNodeOneNodePerGroup(t *testing.T) {
	tb := NewTable()
	if bad := tb.Announce("b", true, []string{"x/#", "x/+", "$share/g/x/#", "$share/bad"}, nil); !reflect.DeepEqual(bad, []string{"$share/bad"}) {
		t.Fatalf("invalid filters %v", bad)
	}
	tb.Announce("c", true, []string{"$share/g/x/#", "$share/h/x/y"}, nil)
	if n := tb.Len(); n != 5 {
		t.Fatalf("Len %d, want 5", n)
	}
	all := func(string) bool { return true }
	gAt := map[string]int{}
	for range 4 {
		ts := tb.Route("x/y", nil, all, nil)
		byNode := map[string]Target{}
		for _, tg := range ts {
			if _, dup := byNode[tg.Node]; dup {
				t.Fatalf("node %s twice in %+v", tg.Node, ts)
			}
			byNode[tg.Node] = tg
		}
		if !byNode["b"].Direct || byNode["c"].Direct {
			t.Fatalf("direct interest: %+v", ts)
		}
		for node, tg := range byNode {
			for _, g := range tg.Groups {
				if g == "$share/g/x/#" {
					gAt[node]++
				}
			}
		}
		if !contains(byNode["c"].Groups, "$share/h/x/y") {
			t.Fatalf("group h not at c: %+v", ts)
		}
	}
	if gAt["b"]+gAt["c"] != 4 || gAt["b"] == 0 || gAt["c"] == 0 {
		t.Fatalf("group g served %v for 4 messages, want round robin over b and c", gAt)
	}
	if ts := tb.Route("x/y", []string{"$share/g/x/#", "$share/h/x/y"}, all, nil); len(ts) != 1 || ts[0].Node != "b" || len(ts[0].Groups) != 0 {
		t.Fatalf("groups served at the origin routed again: %+v", ts)
	}
	onlyB := func(n string) bool { return n == "b" }
	for range 3 {
		for _, tg := range tb.Route("x/y", nil, onlyB, nil) {
			if tg.Node == "c" && contains(tg.Groups, "$share/g/x/#") {
				t.Fatal("group g routed to c, whose link is down, while b's is up")
			}
		}
	}
	tb.Drop("c")
	if ts := tb.Route("x/y", nil, all, nil); len(ts) != 1 || ts[0].Node != "b" || !reflect.DeepEqual(ts[0].Groups, []string{"$share/g/x/#"}) {
		t.Fatalf("after dropping c: %+v", ts)
	}
	tb.Announce("b", false, nil, []string{"x/#", "x/+"})
	tb.Announce("b", true, []string{"z"}, nil)
	if got := tb.Interest(); !reflect.DeepEqual(got, map[string][]string{"b": {"z"}}) {
		t.Fatalf("interest %v", got)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
