package session

import (
	"bytes"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// TestSharedEncodingMatchesOwnEncoding checks the fan-out encoding sharing
// against its oracle, each connection's own encoding: for random messages
// (topic and payload lengths across the remaining-length varint sizes, MQTT
// 5 properties) sent to a run of connections (3.1.1 and 5, each QoS, DUP,
// RETAIN, packet ids, some with subscription identifiers or topic aliases,
// which must not share), the bytes are the same either way, and the shared
// encoding is actually used.
func TestSharedEncodingMatchesOwnEncoding(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(uint64(seed), 11))
	env := &Env{Clock: clock.Real{}, Log: slog.New(slog.DiscardHandler), Metrics: metrics.NewNode()}
	now := time.Now()
	hits := 0
	newMessage := func(round int) *message.Message {
		m := &message.Message{
			Topic:   strings.Repeat("t", 1+rnd.IntN(300)),
			Payload: bytes.Repeat([]byte{byte(round)}, rnd.IntN(20000)),
			QoS:     byte(rnd.IntN(3)),
		}
		if rnd.IntN(2) == 0 {
			m.ContentType, m.User = "text/plain", []message.UserProperty{{Key: "k", Value: "v"}}
		}
		if rnd.IntN(4) == 0 {
			m.Expiry = now.Add(time.Hour)
		}
		return m
	}
	for round := 0; round < 100; round++ {
		// One flush: each connection writes the same few messages (a read
		// that brought several), so their encodings interleave.
		msgs := make([]*message.Message, 1+rnd.IntN(sharedEntries+2))
		for i := range msgs {
			msgs[i] = newMessage(round)
		}
		var sh sharedPublish
		for k := 0; k < 6; k++ {
			c := &Conn{env: env, version: packet.V311}
			if rnd.IntN(2) == 0 {
				c.version = packet.V5
				if rnd.IntN(5) == 0 {
					c.clientAliasMax = 4
				}
			}
			own := &Conn{env: env, version: c.version, clientAliasMax: c.clientAliasMax}
			for _, m := range msgs {
				d := Delivery{Msg: m, QoS: byte(rnd.IntN(int(m.QoS) + 1)), Retain: rnd.IntN(2) == 0}
				if d.QoS > 0 {
					d.pid = uint16(1 + rnd.IntN(65535))
				}
				if rnd.IntN(5) == 0 {
					d.IDs = []uint32{uint32(1 + rnd.IntN(1000))}
				}
				dup := rnd.IntN(2) == 0
				// The oracle: a connection in the same state encoding alone.
				want, ok1 := own.appendPublish(nil, &d, dup, now, nil)
				e := sh.find(m, formOf(c.version, d.QoS))
				kept := e != nil && e.kept
				got, ok2 := c.appendPublish([]byte("prefix"), &d, dup, now, &sh)
				if ok1 != ok2 || !bytes.Equal(got[len("prefix"):], want) {
					t.Fatalf("round %d conn %d (v%d QoS %d retain %v dup %v pid %d ids %v alias %d): shared encoding differs\n got %x\nwant %x",
						round, k, c.version, d.QoS, d.Retain, dup, d.pid, d.IDs, c.clientAliasMax, got[len("prefix"):min(len(got), 40)], want[:min(len(want), 34)])
				}
				if kept && c.shareable(&d) {
					hits++
				}
			}
		}
	}
	if hits == 0 {
		t.Fatal("no connection used a shared encoding")
	}
}
