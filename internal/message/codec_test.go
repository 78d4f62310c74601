package message

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
)

func sample() *Message {
	return &Message{
		Topic: "sensors/a/temp", Payload: []byte("21.5"), QoS: 1, Retain: true,
		PayloadFormat: 1, ContentType: "text/plain", ResponseTopic: "replies/a",
		CorrelationData: []byte{1, 2, 3}, User: []UserProperty{{"k", "v"}, {"k", "w"}},
		Expiry: time.Unix(1700000000, 5), Publisher: "client-1", Created: time.Unix(1699999990, 7),
		Origin: "node-a", Stamp: 1 << 40,
	}
}

func TestRoundTrip(t *testing.T) {
	for _, m := range []*Message{sample(), {Topic: "t"}} {
		enc := Append(nil, m)
		got, err := Decode(enc)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Expiry.Equal(m.Expiry) || !got.Created.Equal(m.Created) {
			t.Fatalf("times differ: %v %v vs %v %v", got.Expiry, got.Created, m.Expiry, m.Created)
		}
		got.Expiry, got.Created = m.Expiry, m.Created
		if !reflect.DeepEqual(got, m) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, m)
		}
	}
}

func TestDecodeRejectsTruncationAndTrailingBytes(t *testing.T) {
	enc := Append(nil, sample())
	for i := 0; i < len(enc); i++ {
		if _, err := Decode(enc[:i]); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("prefix of %d bytes: err %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := Decode(append(enc, 0)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("trailing byte accepted: %v", err)
	}
}

func TestExpiryInterval(t *testing.T) {
	now := time.Unix(1000, 0)
	m := &Message{Expiry: now.Add(1500 * time.Millisecond)}
	if v, ok := m.ExpiryInterval(now); !ok || v != 2 {
		t.Fatalf("interval %d %v, want 2 (rounded up)", v, ok)
	}
	if m.Expired(now) || !m.Expired(now.Add(2*time.Second)) {
		t.Fatal("Expired wrong")
	}
	if _, ok := (&Message{}).ExpiryInterval(now); ok {
		t.Fatal("message without expiry reported an interval")
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, sample()))
	f.Add(Append(nil, &Message{Topic: "a"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		if err != nil {
			return
		}
		// Whatever decodes must re-encode to bytes that decode to the same message.
		again, err := Decode(Append(nil, m))
		if err != nil {
			t.Fatalf("re-decode failed: %v", err)
		}
		if !bytes.Equal(Append(nil, again), Append(nil, m)) {
			t.Fatal("encoding not stable")
		}
	})
}
