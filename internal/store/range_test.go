package store

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/sextantmq/sextant/internal/message"
)

func TestLoadMessagesFromIsARangeInSeqOrder(t *testing.T) {
	s, err := Open(filepath.Join(t.TempDir(), "s.db"), Options{Fsync: FsyncNever})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b Batch
	for seq := uint64(1); seq <= 10; seq++ {
		b.PutMessage("c", &QueuedMessage{Seq: seq, QoS: 1, Msg: &message.Message{Topic: "t"}})
	}
	b.PutMessage("other", &QueuedMessage{Seq: 4, QoS: 1, Msg: &message.Message{Topic: "t"}})
	if err := s.CommitWait(context.Background(), &b); err != nil {
		t.Fatal(err)
	}
	var got []uint64
	if err := s.LoadMessagesFrom("c", 4, 3, func(q *QueuedMessage) error { got = append(got, q.Seq); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0] != 4 || got[2] != 6 {
		t.Fatalf("got %v, want [4 5 6]", got)
	}
	got = nil
	_ = s.LoadMessagesFrom("c", 9, 100, func(q *QueuedMessage) error { got = append(got, q.Seq); return nil })
	if len(got) != 2 || got[1] != 10 {
		t.Fatalf("got %v, want [9 10]", got)
	}
}
