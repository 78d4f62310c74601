package message

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
	"time"
	"unsafe"
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

// TestDecodeAfterSharesEqualStrings: a message of a run decodes to the
// message Decode gives, with each string field that equals the previous
// message's being that very string (no allocation), the others new, and
// room for the caller's own user properties.
func TestDecodeAfterSharesEqualStrings(t *testing.T) {
	first := sample()
	prev, err := Decode(Append(nil, first))
	if err != nil {
		t.Fatal(err)
	}
	next := sample()
	next.Topic, next.Payload = "sensors/b/temp", []byte("19")
	got, err := DecodeAfter(Append(nil, next), prev, 1)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := Decode(Append(nil, next))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeAfter:\n got %+v\nwant %+v", got, want)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for name, f := range map[string][2]string{
		"content type": {got.ContentType, prev.ContentType}, "response topic": {got.ResponseTopic, prev.ResponseTopic},
		"publisher": {got.Publisher, prev.Publisher}, "origin": {got.Origin, prev.Origin},
	} {
		if !same(f[0], f[1]) {
			t.Errorf("%s %q: a new string, want the previous message's", name, f[0])
		}
	}
	if same(got.Topic, prev.Topic) || got.Topic != "sensors/b/temp" {
		t.Errorf("topic %q shares the previous message's %q", got.Topic, prev.Topic)
	}
	if cap(got.User) != len(got.User)+1 {
		t.Errorf("user properties: len %d cap %d, want room for one more", len(got.User), cap(got.User))
	}
	if m, _ := DecodeAfter(Append(nil, &Message{Topic: "t"}), nil, 1); m == nil || m.User == nil || cap(m.User) != 1 {
		t.Errorf("no properties, one spare: %+v", m)
	}
}

func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, sample()))
	f.Add(Append(nil, &Message{Topic: "a"}))
	prev := sample()
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := Decode(b)
		after, errAfter := DecodeAfter(b, prev, 1)
		if (err == nil) != (errAfter == nil) {
			t.Fatalf("Decode: %v, DecodeAfter: %v", err, errAfter)
		}
		if err != nil {
			return
		}
		// A run's decoding is the same message (less the spare room).
		if !bytes.Equal(Append(nil, after), Append(nil, m)) {
			t.Fatal("DecodeAfter decoded another message than Decode")
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

// BenchmarkDecodeRun decodes a run of 600 records of one topic, publisher
// and origin, as a feed's batch brings them: alone (Decode) or each after
// the one before (DecodeAfter, which shares the equal strings).
func BenchmarkDecodeRun(b *testing.B) {
	recs := make([][]byte, 600)
	for i := range recs {
		recs[i] = Append(nil, &Message{Topic: "sxbench/r3/t", Payload: make([]byte, 64), QoS: 1,
			Publisher: "bench-pub-0", Origin: "n1", Created: time.Unix(1700000000, int64(i))})
	}
	for _, after := range []bool{false, true} {
		name := "alone"
		if after {
			name = "after"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				var prev *Message
				for _, r := range recs {
					var m *Message
					var err error
					if after {
						m, err = DecodeAfter(r, prev, 1)
					} else {
						m, err = Decode(r)
					}
					if err != nil {
						b.Fatal(err)
					}
					prev = m
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(recs)), "ns/record")
		})
	}
}
