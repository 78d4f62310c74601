package broker_test

import (
	"slices"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/store"
)

// TestCursorStoredWithFirstRecord: a persistent session online when the
// first record of a sequenced group reaches it has its stored record
// carry its cursor on the group at once, not only at its next disconnect:
// after a kill -9 of its node it would otherwise have no cursor on a
// group created after it subscribed, and the records published while the
// node was down would never be replayed to it.
func TestCursorStoredWithFirstRecord(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	s, _ := rawConnect(t, n, connect5("s", true, 3600))
	s.Subscribe(1, sub("g/#", 1))
	n.Broker().DeliverSequenced(&message.Message{Topic: "g/a", Payload: []byte("first"), QoS: 1}, "grp", 7)
	s.ExpectPublish("g/a", "first")
	brokertest.Eventually(t, 5*time.Second, func() bool {
		var cursors []store.CursorRecord
		_ = n.Store().LoadSessions(func(r *store.SessionRecord) error {
			if r.ClientID == "s" {
				cursors = r.Cursors
			}
			return nil
		})
		return slices.Contains(cursors, store.CursorRecord{Group: "grp", Seq: 7})
	}, "the session's stored record has its cursor on grp at 7")
}
