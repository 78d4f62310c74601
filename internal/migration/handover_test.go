package migration

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/replicas"
	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/topiclog"
)

// direct routes MethodMigrate calls to a Receiver in the same process.
type direct struct{ rv *Receiver }

func (d direct) Call(ctx context.Context, _ string, _ byte, body []byte) ([]byte, error) {
	return d.rv.Serve(ctx, "a", body)
}

type oneReplica struct{ r *replicas.Replica }

func (o oneReplica) Get(id string) *replicas.Replica {
	if o.r != nil && o.r.ID == id {
		return o.r
	}
	return nil
}

// TestHandoverInstallsAnEqualLog: the snapshot, sent in many chunks while
// publishes go on, then the tail, leave the target a log equal to the old
// home's, installed where its replica set opens the group; a second
// handover of a group the target already runs is refused.
func TestHandoverInstallsAnEqualLog(t *testing.T) {
	old := chunkBytes
	chunkBytes = 4096
	defer func() { chunkBytes = old }()
	opts := topiclog.Options{SegmentBytes: topiclog.MinSegmentBytes}
	src, err := sequencer.Open(topiclog.OSFS{}, filepath.Join(t.TempDir(), "log"), sequencer.Options{BatchEntries: true, Log: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	at := time.Unix(1700000000, 0)
	index := uint64(0)
	publish := func(n int) {
		for range n {
			index++
			cmd, err := sequencer.EncodeCommand(sequencer.PublishCommand(sequencer.Publish{Topic: fmt.Sprintf("t/%d", index%4),
				Message: bytes.Repeat([]byte("m"), 300), QoS: 1, Key: sequencer.Key{Client: "c", PacketID: uint16(index%1000 + 1), Nonce: index}}))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := src.Apply([]sequencer.Entry{{Index: index, Term: 1, Time: at.Add(time.Duration(index) * time.Millisecond), Cmd: cmd}}); err != nil {
				t.Fatal(err)
			}
		}
	}
	publish(300)
	dstDir := t.TempDir()
	rv := NewReceiver(dstDir, oneReplica{}, opts, nil, nil)
	d := &Driver{cfg: Config{Peers: direct{rv}}}
	rec := fsm.Group{ID: "g", Home: "a", Voters: []string{"a"}, Epoch: 1, Desired: &fsm.Desired{Home: "b", Voters: []string{"b"}, Index: 9}}
	x := &exec{d: d, m: &Machine{Group: "g", rec: rec}}
	d.cfg.Replicas = oneReplica{&replicas.Replica{ID: "g", Seq: src}}
	ctx := context.Background()
	if o := x.sendSnapshot(ctx, "b"); o.Result != ResultOK {
		t.Fatalf("snapshot: %+v", o)
	}
	publish(200) // the tail
	if o := x.sendTail(ctx, "b"); o.Result != ResultOK {
		t.Fatalf("tail: %+v", o)
	}
	dst, err := sequencer.Open(topiclog.OSFS{}, filepath.Join(dstDir, replication.GroupID("g").DirName(), "log"), sequencer.Options{BatchEntries: true, Log: opts})
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	a, _ := src.ReadRaw(1, 1<<20, 64<<20)
	b, _ := dst.ReadRaw(1, 1<<20, 64<<20)
	if len(a) != 500 || len(a) != len(b) {
		t.Fatalf("%d records handed over, the old home has %d", len(b), len(a))
	}
	for i := range a {
		if a[i].Seq != b[i].Seq || a[i].Index != b[i].Index || !a[i].Time.Equal(b[i].Time) || a[i].Mark != b[i].Mark || !bytes.Equal(a[i].Payload, b[i].Payload) {
			t.Fatalf("record %d: %+v, old home %+v", i, b[i], a[i])
		}
	}
	if dst.Applied() != src.Applied() {
		t.Errorf("applied %d, old home %d", dst.Applied(), src.Applied())
	}
	// The target runs the group now: another handover is refused.
	rv.groups = oneReplica{&replicas.Replica{ID: "g", Seq: dst}}
	if o := x.sendSnapshot(ctx, "b"); o.Result != ResultFailed {
		t.Fatalf("snapshot to a node that runs the group: %+v", o)
	}
}
