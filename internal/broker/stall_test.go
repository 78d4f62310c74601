package broker

import (
	"context"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/session"
	"github.com/sextantmq/sextant/internal/store"
)

// stalledStore is a store whose write queue never has room: Commit blocks
// until its context ends, as on a disk that stalls.
type stalledStore struct{}

var _ Store = stalledStore{}

func (stalledStore) Commit(ctx context.Context, _ *store.Batch, _ func(error)) error {
	<-ctx.Done()
	return ctx.Err()
}
func (stalledStore) LoadMessagesFrom(string, uint64, int, func(*store.QueuedMessage) error) error {
	return nil
}
func (stalledStore) LoadSessions(func(*store.SessionRecord) error) error         { return nil }
func (stalledStore) LoadMessages(string, func(*store.QueuedMessage) error) error { return nil }
func (stalledStore) LoadInbound(string) ([]uint16, error)                        { return nil, nil }
func (stalledStore) LoadRetained(func(*message.Message) error) error             { return nil }

// TestStalledStoreFailsThePublishAfterItsDeadline: a QoS 1 retained publish
// needs a durable write; with the store's queue stalled, the publisher gets
// 0x83 after storeWaitTimeout instead of waiting for ever.
func TestStalledStoreFailsThePublishAfterItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b, err := New(Config{MaxConnections: 10}, stalledStore{}, clock.Real{}, slog.New(slog.DiscardHandler), metrics.NewNode())
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		got := make(chan packet.ReasonCode, 1)
		b.Publish(nil, &message.Message{Topic: "t", Payload: []byte("p"), QoS: 1, Retain: true},
			session.AckFunc(func(c packet.ReasonCode) { got <- c }))
		if c := <-got; c != packet.ImplementationSpecificError {
			t.Fatalf("acknowledged %s, want %s", c, packet.ImplementationSpecificError)
		}
		if waited := time.Since(start); waited != storeWaitTimeout {
			t.Fatalf("waited %v for the store, want %v", waited, storeWaitTimeout)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = b.Close(ctx)
	})
}
