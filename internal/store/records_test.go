package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/message"
)

func sampleMessage(topic string, payload string) *message.Message {
	return &message.Message{
		Topic: topic, Payload: []byte(payload), QoS: 1, PayloadFormat: 1,
		ContentType: "text/plain", CorrelationData: []byte{9}, User: []message.UserProperty{{Key: "k", Value: "v"}},
		Expiry: time.Unix(1800000000, 0), Publisher: "pub", Created: time.Unix(1700000000, 42),
	}
}

func sampleSession() *SessionRecord {
	return &SessionRecord{
		ClientID: "client-1", Version: 5, ExpiryInterval: NeverExpires,
		DisconnectedAt: time.Unix(1700000100, 5),
		Subscriptions: []SubscriptionRecord{
			{Filter: "a/+/c", QoS: 2, NoLocal: true, RetainAsPublished: true, RetainHandling: 2, ID: maxSubID},
			{Filter: "$share/g/x/#", QoS: 1, RetainHandling: 1},
		},
		Will: sampleMessage("will/client-1", "gone"), WillDelay: 30,
		Cursors:      []CursorRecord{{Group: "swarm/7", Seq: 1 << 40}, {Group: "t", Seq: 0}},
		SubscribedAt: time.Unix(1700000000, 7),
	}
}

func sampleQueued() *QueuedMessage {
	return &QueuedMessage{Seq: 7, Msg: sampleMessage("a/b/c", "hello"), QoS: 2, RetainFlag: true,
		SubIDs: []uint32{1, maxSubID}, PacketID: 513, State: SentAwaitingAck}
}

// sameMessage compares messages ignoring time representation (monotonic
// clock, location), which the encoding does not keep.
func sameMessage(a, b *message.Message) bool {
	if a == nil || b == nil {
		return a == b
	}
	if !a.Expiry.Equal(b.Expiry) || !a.Created.Equal(b.Created) {
		return false
	}
	x, y := *a, *b
	x.Expiry, x.Created, y.Expiry, y.Created = time.Time{}, time.Time{}, time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

func sameSession(a, b *SessionRecord) bool {
	if !a.DisconnectedAt.Equal(b.DisconnectedAt) || !a.SubscribedAt.Equal(b.SubscribedAt) || !sameMessage(a.Will, b.Will) {
		return false
	}
	x, y := *a, *b
	x.DisconnectedAt, x.Will, y.DisconnectedAt, y.Will = time.Time{}, nil, time.Time{}, nil
	x.SubscribedAt, y.SubscribedAt = time.Time{}, time.Time{}
	return reflect.DeepEqual(x, y)
}

func sameQueued(a, b *QueuedMessage) bool {
	if !sameMessage(a.Msg, b.Msg) {
		return false
	}
	x, y := *a, *b
	x.Msg, y.Msg = nil, nil
	return reflect.DeepEqual(x, y)
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

func TestSessionRecordRoundTrip(t *testing.T) {
	for _, r := range []*SessionRecord{
		sampleSession(),
		{ClientID: "c", Version: 4}, // connected, nothing else
		{ClientID: "c", Version: 3, DisconnectedAt: time.Unix(0, 0)},               // the epoch is not "connected"
		{ClientID: "c", Version: 5, Will: &message.Message{Topic: "w"}},            // will without delay
		{ClientID: "c", Version: 5, Cursors: []CursorRecord{{Group: "g", Seq: 9}}}, // cursors, no will
		{ClientID: "c", Version: 5, SubscribedAt: time.Unix(0, 1)},                 // subscribed at, no cursors
	} {
		if err := validateSession(r); err != nil {
			t.Fatal(err)
		}
		got, err := decodeSession([]byte(r.ClientID), appendSession(nil, r))
		if err != nil {
			t.Fatalf("%+v: %v", r, err)
		}
		if !sameSession(got, r) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, r)
		}
	}
}

func TestQueuedRecordRoundTrip(t *testing.T) {
	for _, q := range []*QueuedMessage{
		sampleQueued(),
		{Seq: 1, Msg: &message.Message{Topic: "t"}},                                     // queued QoS 0
		{Seq: 1<<64 - 1, QoS: 2, PacketID: 65535, State: ReleaseSent},                   // payload dropped after PUBREC
		{Seq: 2, Msg: sampleMessage("x", "p"), QoS: 2, PacketID: 1, State: ReleaseSent}, // payload kept
	} {
		if err := validateQueued("c", q); err != nil {
			t.Fatal(err)
		}
		got, err := decodeQueued(seqKey(q.Seq), appendQueued(nil, q))
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		if !sameQueued(got, q) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, q)
		}
	}
}

func TestRetainedRecordRoundTrip(t *testing.T) {
	m := sampleMessage("sensors/1", "21.5")
	got, err := decodeRetained([]byte(m.Topic), message.Append(nil, m))
	if err != nil || !sameMessage(got, m) {
		t.Fatalf("got %+v, %v", got, err)
	}
	if _, err := decodeRetained([]byte("other"), message.Append(nil, m)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("topic mismatch: %v, want ErrCorrupt", err)
	}
	if _, err := decodeRetained([]byte(m.Topic), []byte{1, 2}); !errors.Is(err, ErrCorrupt) || !errors.Is(err, message.ErrCorrupt) {
		t.Fatalf("garbage: %v, want ErrCorrupt wrapping message.ErrCorrupt", err)
	}
}

func TestDecodersRejectTruncationAndTrailingBytes(t *testing.T) {
	type dec func([]byte) error
	cases := map[string]struct {
		enc []byte
		dec dec
	}{
		"session": {appendSession(nil, sampleSession()), func(b []byte) error { _, err := decodeSession([]byte("c"), b); return err }},
		"queued":  {appendQueued(nil, sampleQueued()), func(b []byte) error { _, err := decodeQueued(seqKey(7), b); return err }},
		"retained": {message.Append(nil, sampleMessage("t", "p")), func(b []byte) error {
			_, err := decodeRetained([]byte("t"), b)
			return err
		}},
	}
	for name, c := range cases {
		if err := c.dec(c.enc); err != nil {
			t.Fatalf("%s: full record: %v", name, err)
		}
		for i := range c.enc {
			if err := c.dec(c.enc[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s: prefix of %d bytes: %v, want ErrCorrupt", name, i, err)
			}
		}
		if err := c.dec(append(bytes.Clone(c.enc), 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: trailing byte: %v, want ErrCorrupt", name, err)
		}
	}
}

func TestDecodersRejectBadFields(t *testing.T) {
	sess := func(mut func([]byte) []byte) error {
		_, err := decodeSession([]byte("c"), mut(appendSession(nil, &SessionRecord{ClientID: "c", Version: 5,
			Subscriptions: []SubscriptionRecord{{Filter: "f", QoS: 1, ID: 3}}})))
		return err
	}
	// Layout of that record: version, protocol, flags, expiry 0, count 1, len 1, 'f', options, id.
	for name, mut := range map[string]func([]byte) []byte{
		"record version":   func(b []byte) []byte { b[0] = 2; return b },
		"protocol version": func(b []byte) []byte { b[1] = 6; return b },
		"unknown flag":     func(b []byte) []byte { b[2] = 0x80; return b },
		"qos 3":            func(b []byte) []byte { b[7] = 3; return b },
		"retain handling":  func(b []byte) []byte { b[7] = 3 << 4; return b },
		"empty filter":     func(b []byte) []byte { return append(b[:5], 0, 1, 3, 0) },
		"huge count":       func(b []byte) []byte { b[4] = 100; return b },
		"id too large":     func(b []byte) []byte { return binary.AppendUvarint(b[:8], maxSubID+1) },
		"expiry > 32 bits": func(b []byte) []byte { return append(binary.AppendUvarint(b[:3], 1<<32), b[4:]...) },
	} {
		if err := sess(mut); !errors.Is(err, ErrCorrupt) {
			t.Errorf("session %s: %v, want ErrCorrupt", name, err)
		}
	}
	if _, err := decodeSession(nil, appendSession(nil, sampleSession())); !errors.Is(err, ErrCorrupt) {
		t.Errorf("empty session key: %v", err)
	}

	queued := func(key []byte, mut func([]byte) []byte) error {
		_, err := decodeQueued(key, mut(appendQueued(nil, sampleQueued())))
		return err
	}
	id := func(b []byte) []byte { return b }
	for name, c := range map[string]struct {
		key []byte
		mut func([]byte) []byte
	}{
		"seq 0":               {seqKey(0), id},
		"short key":           {[]byte{1}, id},
		"qos 3":               {seqKey(1), func(b []byte) []byte { b[1] = 3; return b }},
		"state 3":             {seqKey(1), func(b []byte) []byte { b[2] = 3; return b }},
		"queued with id":      {seqKey(1), func(b []byte) []byte { b[2] = Queued; return b }},
		"sent without id":     {seqKey(1), func(b []byte) []byte { b[4], b[5] = 0, 0; return b }},
		"sent qos 0":          {seqKey(1), func(b []byte) []byte { b[1] = 0; return b }},
		"release qos 1":       {seqKey(1), func(b []byte) []byte { b[1], b[2] = 1, ReleaseSent; return b }},
		"no msg, not release": {seqKey(1), func(b []byte) []byte { b[3] &^= qFlagMsg; return b[:12] }},
		"unknown flag":        {seqKey(1), func(b []byte) []byte { b[3] |= 0x40; return b }},
		"sub id 0":            {seqKey(1), func(b []byte) []byte { b[7] = 0; return b }},
	} {
		if err := queued(c.key, c.mut); !errors.Is(err, ErrCorrupt) {
			t.Errorf("queued %s: %v, want ErrCorrupt", name, err)
		}
	}

	for _, k := range [][]byte{nil, {0, 0}, {1}, {0, 1, 2}} {
		if _, err := decodeInbound(k); !errors.Is(err, ErrCorrupt) {
			t.Errorf("inbound key %x: %v, want ErrCorrupt", k, err)
		}
	}
}

func TestBatchRejectsInvalidRecords(t *testing.T) {
	long := strings.Repeat("x", maxKeyLen+1)
	m := &message.Message{Topic: "t"}
	for name, add := range map[string]func(*Batch){
		"empty client id":     func(b *Batch) { b.PutSession(&SessionRecord{Version: 5}) },
		"long client id":      func(b *Batch) { b.DeleteSession(long) },
		"protocol version 2":  func(b *Batch) { b.PutSession(&SessionRecord{ClientID: "c", Version: 2}) },
		"will delay, no will": func(b *Batch) { b.PutSession(&SessionRecord{ClientID: "c", Version: 5, WillDelay: 1}) },
		"subscription qos 3": func(b *Batch) {
			b.PutSession(&SessionRecord{ClientID: "c", Version: 5, Subscriptions: []SubscriptionRecord{{Filter: "f", QoS: 3}}})
		},
		"seq 0":                 func(b *Batch) { b.PutMessage("c", &QueuedMessage{Msg: m}) },
		"queued with packet id": func(b *Batch) { b.PutMessage("c", &QueuedMessage{Seq: 1, Msg: m, QoS: 1, PacketID: 1}) },
		"nil msg while queued":  func(b *Batch) { b.PutMessage("c", &QueuedMessage{Seq: 1}) },
		"sub id 0":              func(b *Batch) { b.PutMessage("c", &QueuedMessage{Seq: 1, Msg: m, SubIDs: []uint32{0}}) },
		"inbound id 0":          func(b *Batch) { b.PutInbound("c", 0) },
		"empty retained topic":  func(b *Batch) { b.PutRetained(&message.Message{}) },
		"long retained topic":   func(b *Batch) { b.DeleteRetained(long) },
	} {
		var b Batch
		b.PutInbound("c", 1)
		add(&b)
		b.PutInbound("c", 2) // ignored: the batch is already invalid
		if !errors.Is(b.Err(), ErrInvalid) || b.Len() != 1 {
			t.Errorf("%s: err %v, len %d; want ErrInvalid and only the first op", name, b.Err(), b.Len())
		}
		b.Reset()
		if b.Err() != nil || b.Len() != 0 {
			t.Errorf("%s: Reset left err %v, len %d", name, b.Err(), b.Len())
		}
	}
}

// fuzzInput joins a key and a value into one fuzz input (a length byte, the
// key, the value), so that corpus files hold one []byte.
func fuzzInput(key, val []byte) []byte {
	return append(append([]byte{byte(len(key))}, key...), val...)
}

func splitFuzzInput(data []byte) (key, val []byte) {
	if len(data) == 0 {
		return nil, nil
	}
	n := min(int(data[0]), len(data)-1)
	return data[1 : 1+n], data[1+n:]
}

func FuzzDecodeSession(f *testing.F) {
	f.Add(fuzzInput([]byte("client-1"), appendSession(nil, sampleSession())))
	f.Add(fuzzInput([]byte("c"), appendSession(nil, &SessionRecord{ClientID: "c", Version: 4})))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, b := splitFuzzInput(data)
		r, err := decodeSession(key, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		// Whatever decodes is a valid record and re-encodes stably.
		if err := validateSession(r); err != nil {
			t.Fatalf("decoded an invalid record: %v", err)
		}
		enc := appendSession(nil, r)
		again, err := decodeSession(key, enc)
		if err != nil || !sameSession(again, r) || !bytes.Equal(appendSession(nil, again), enc) {
			t.Fatalf("re-decode: %+v, %v", again, err)
		}
	})
}

func FuzzDecodeQueued(f *testing.F) {
	f.Add(fuzzInput(seqKey(7), appendQueued(nil, sampleQueued())))
	f.Add(fuzzInput(seqKey(1), appendQueued(nil, &QueuedMessage{Seq: 1, QoS: 2, PacketID: 9, State: ReleaseSent})))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, b := splitFuzzInput(data)
		q, err := decodeQueued(key, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if err := validateQueued("c", q); err != nil {
			t.Fatalf("decoded an invalid record: %v", err)
		}
		enc := appendQueued(nil, q)
		again, err := decodeQueued(key, enc)
		if err != nil || !sameQueued(again, q) || !bytes.Equal(appendQueued(nil, again), enc) {
			t.Fatalf("re-decode: %+v, %v", again, err)
		}
	})
}

func FuzzDecodeRetained(f *testing.F) {
	f.Add(fuzzInput([]byte("a/b"), message.Append(nil, sampleMessage("a/b", "x"))))
	f.Add(fuzzInput([]byte("t"), message.Append(nil, &message.Message{Topic: "t"})))
	f.Fuzz(func(t *testing.T, data []byte) {
		key, b := splitFuzzInput(data)
		m, err := decodeRetained(key, b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error not ErrCorrupt: %v", err)
			}
			return
		}
		if m.Topic != string(key) {
			t.Fatalf("topic %q under key %q", m.Topic, key)
		}
		enc := message.Append(nil, m)
		again, err := decodeRetained(key, enc)
		if err != nil || !sameMessage(again, m) {
			t.Fatalf("re-decode: %+v, %v", again, err)
		}
	})
}
