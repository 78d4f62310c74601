package manager

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/memnet"
	"github.com/sextantmq/sextant/internal/monitor"
	"github.com/sextantmq/sextant/internal/monitor/agent"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/procstat"
)

// methodReport stands for the method byte the cluster layer will give
// reports on peer links.
const methodReport byte = 200

// reportHandler is the receiving side's peer handler: reports go to the
// manager with the link's node id as the sender. The embedded interface
// stands for the methods this test does not use.
type reportHandler struct {
	peer.Handler
	m *Manager
}

func (h reportHandler) LinkUp(*peer.Link)                         {}
func (h reportHandler) LinkDown(string)                           {}
func (h reportHandler) Interest(string, bool, []string, []string) {}
func (h reportHandler) Publish(string, []byte, bool, []string)    {}
func (h reportHandler) Retained(string, []byte)                   {}
func (h reportHandler) Serve(_ context.Context, node string, method byte, body []byte) ([]byte, error) {
	if method != methodReport {
		return nil, fmt.Errorf("unknown method %d", method)
	}
	return nil, h.m.Receive(node, body)
}

// Reports travel as one-way notifications on the peer link to the leader,
// and the receiver names the sender by the link, not by the report: a
// node cannot report for another.
func TestReportsTravelOnPeerLinks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		nw := memnet.New(memnet.Options{DefaultRTT: 20 * time.Millisecond})
		defer nw.Close()
		f := newWorld(t, 0, []string{"leader", "edge"}, nil)
		m, err := New(Config{Interval: 5 * time.Second}, f)
		if err != nil {
			t.Fatal(err)
		}
		start := func(id, host string, h peer.Handler) *peer.Manager {
			ln, err := nw.Listen(host + ":7000")
			if err != nil {
				t.Fatal(err)
			}
			pm, err := peer.New(peer.Config{NodeID: id, Listener: ln, Dial: nw.DialFrom(host), Handler: h, Seed: 1})
			if err != nil {
				t.Fatal(err)
			}
			pm.Start()
			t.Cleanup(func() { _ = pm.Close() })
			return pm
		}
		leader := start("leader", "10.0.0.1", reportHandler{m: m})
		edge := start("edge", "10.0.0.2", reportHandler{m: m})
		leader.Add("edge", "10.0.0.2:7000")
		edge.Add("leader", "10.0.0.1:7000")
		for deadline := time.Now().Add(10 * time.Second); !edge.Up("leader"); {
			if time.Now().After(deadline) {
				t.Fatal("the link to the leader did not come up")
			}
			time.Sleep(10 * time.Millisecond) // lint:sleep-ok polls in the bubble's fake time while the link connects
		}

		tr := monitor.NewTracker(monitor.Limits{})
		tr.Subscribed(fakeClient("sub"), "swarm/#")
		tr.Delivered("swarm/1")
		sizes := make(chan int, 8)
		a, err := agent.New(agent.Config{
			Node: "edge", Tracker: tr, Interval: 5 * time.Second,
			Capacity:   monitor.Capacity{CPUs: 1, Memory: 1 << 30},
			Coordinate: func() *coordinate.Coordinate { return at(10, 0) },
			Process:    func() (procstat.Sample, error) { return procstat.Sample{}, nil },
			Send: func(_ context.Context, b []byte) error {
				sizes <- len(b)
				if !edge.Notify("leader", methodReport, b) {
					return fmt.Errorf("link to the leader down")
				}
				return nil
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		defer background(a.Run)()
		for range 2 {
			time.Sleep(5 * time.Second) // lint:sleep-ok advances the bubble's clock by one report interval
		}
		synctest.Wait()
		if sent, failed := a.Stats(); sent == 0 {
			t.Fatalf("no report sent (%d failed)", failed)
		}
		m.mu.Lock()
		rc := m.mu.reports["edge"]
		m.mu.Unlock()
		if rc == nil || len(rc.r.Topics) != 1 || rc.r.Topics[0].Consumers.Count != 1 || rc.r.Coord == nil {
			t.Fatalf("the leader holds %+v", rc)
		}
		t.Logf("a report of one topic: %d bytes", <-sizes)
		// A report naming another node, sent on edge's link, is refused.
		forged := monitor.Report{Node: "leader", Seq: 1, Window: time.Second}
		b, err := monitor.AppendReport(nil, &forged)
		if err != nil {
			t.Fatal(err)
		}
		refused := m.Status().Refused
		edge.Notify("leader", methodReport, b)
		time.Sleep(time.Second) // lint:sleep-ok lets the notification cross the 20 ms link in fake time
		synctest.Wait()
		if m.Status().Refused != refused+1 {
			t.Fatal("a forged report was not refused")
		}
	})
}

type fakeClient string

func (c fakeClient) ClientID() string         { return string(c) }
func (c fakeClient) AccessRTT() time.Duration { return 4 * time.Millisecond }
