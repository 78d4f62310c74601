package cluster

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/logging/logtest"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/memnet"
)

// TestLinkUpAndDownAreLoggedOnce: a node logs its link to another node
// coming up and going down once each; while the other node stays away, the
// link's redials add nothing at info level.
func TestLinkUpAndDownAreLoggedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: time.Millisecond})
		defer nw.Close()
		log, out := logtest.New(slog.LevelInfo)
		ms := []membership.Member{
			{ID: "a", State: membership.StateAlive, Labels: membership.Labels{Tier: membership.TierEdge, PeerAddr: "10.0.0.1:7950"}},
			{ID: "b", State: membership.StateAlive, Labels: membership.Labels{Tier: membership.TierEdge, PeerAddr: "10.0.0.2:7950"}},
		}
		start := func(i int, id string, log *slog.Logger) *Layer {
			ln, err := nw.Listen(ms[i].Labels.PeerAddr)
			if err != nil {
				t.Fatal(err)
			}
			b := &fakeBroker{}
			l, err := New(Config{NodeID: id, Deliver: b, Relays: b, Retained: b, Sessions: b,
				Members: &staticMembers{ms: ms, events: make(chan membership.Event, 4)}, Listener: ln,
				Dial: nw.DialFrom(strings.Split(ms[i].Labels.PeerAddr, ":")[0]), Log: log})
			if err != nil {
				t.Fatal(err)
			}
			l.Start()
			return l
		}
		a := start(0, "a", log)
		defer a.Close()
		b := start(1, "b", nil)
		poll(t, "link a-b up", func() bool { l := a.Peers().Link("b"); return l != nil && l.Up() })
		_ = b.Close()
		poll(t, "link a-b down", func() bool { return !a.Peers().Link("b").Up() })
		time.Sleep(time.Minute) // lint:sleep-ok fake time: a redials b, which is gone, many times

		logged := out.String()
		for _, want := range []string{`level=INFO msg="link to node up" peer=b`, `level=INFO msg="link to node down" peer=b`} {
			if n := strings.Count(logged, want); n != 1 {
				t.Errorf("%d lines with %s; want 1; log:\n%s", n, want, logged)
			}
		}
		if n := strings.Count(logged, "\n"); n != 2 {
			t.Errorf("%d lines; want the two above:\n%s", n, logged)
		}
	})
}
