package sequenced

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/sequencer/replica"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// homesPeers reaches other nodes' home sides in the same process; every
// request comes from node "a".
type homesPeers map[string]*Home

func (p homesPeers) Call(ctx context.Context, node string, _ byte, body []byte) ([]byte, error) {
	return p[node].Serve(ctx, "a", body)
}
func (p homesPeers) Up(string) bool { return true }

func testReplica(t *testing.T, gid, node string) *replicas.Replica {
	seq, err := sequencer.Open(topiclog.OSFS{}, t.TempDir(), sequencer.Options{BatchEntries: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := replication.NewSingle[sequencer.Result](replication.GroupID(gid), replica.New(seq), replication.SingleConfig{NodeID: node})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rep.Close(); _ = seq.Close() })
	return &replicas.Replica{ID: gid, Rep: rep, Seq: seq}
}

// TestMoveLearnedFromTheRecordStartsANewStream: when the access node
// learns that its group moved from the record (its publishes came before
// the fence and after the switch, so no answer told it), the next batch
// goes to the new home in a new stream. (It went on in the old stream,
// whose first batches the new home never saw: it waited turnTimeout for
// them, a 10 s stall of the group's publishes from that node.)
func TestMoveLearnedFromTheRecordStartsANewStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		meta := newOneNodeMeta(t, "a", fsm.Rule{Match: "mv/#", Mode: fsm.Sequenced, Replicas: 1})
		if _, res := meta.apply(fsm.RegisterNode(fsm.Node{ID: "b", Labels: fsm.Labels{Tier: "core"}, JoinedAt: time.Now()})); res.Err() != nil {
			t.Fatal(res.Err())
		}
		gid, _, _ := meta.State().GroupFor("mv/t")
		ha := NewHome(oneGroup{testReplica(t, gid, "a")}, nil, nil)
		hb := NewHome(oneGroup{testReplica(t, gid, "b")}, nil, nil)
		r, err := New(Config{NodeID: "a", Meta: meta, Home: ha, Peers: homesPeers{"b": hb}})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		pub := func(i uint16) *countAcker {
			a := &countAcker{}
			r.Publish("pub", i, &message.Message{Topic: "mv/t", Payload: []byte{byte(i)}, QoS: 1}, a)
			return a
		}
		wait := func(a *countAcker) time.Duration {
			start := time.Now()
			for len(a.acked()) == 0 {
				time.Sleep(time.Millisecond) // lint:sleep-ok fake time: waiting for the acknowledgement
			}
			return time.Since(start)
		}
		wait(pub(1))
		rec, _ := meta.State().Group(gid)
		if rec.Home != "a" {
			t.Fatalf("home %s", rec.Home)
		}
		// Switched: the log handed over (not needed here), b is home.
		_, res := meta.apply(fsm.SetGroupHome(fsm.HomeChange{Group: gid, Home: "b", Epoch: rec.Epoch + 1, Reason: fsm.ReasonManual, At: time.Now(), Handover: []string{"b"}}))
		if res.Err() != nil {
			t.Fatal(res.Err())
		}
		d := wait(pub(2))
		t.Logf("second publish acknowledged after %v", d)
		if d > time.Second {
			t.Fatalf("the publish after the move waited %v for its acknowledgement", d)
		}
	})
}
