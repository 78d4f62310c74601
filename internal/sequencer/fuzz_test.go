package sequencer

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
)

func fuzzCommands() []Command {
	return []Command{
		PublishCommand(pub("a", "m", "c", 1, 1)),
		PublishCommand(Publish{Topic: "a/b", Message: []byte("hi"), Retain: true, QoS: 2, Key: Key{Client: "c1", PacketID: 65535, Nonce: 1 << 63}},
			Publish{Topic: "t", Message: nil}),
		RetentionCommand(topiclog.Retention{MaxRecordsPerTopic: 3, MaxBytes: 1 << 20, MaxAge: time.Hour}),
	}
}

// FuzzDecodeCommand: the decoder never panics, refuses with ErrInvalid,
// and what it accepts encodes to bytes that decode to the same command.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range fuzzCommands() {
		b, err := EncodeCommand(c)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCommand(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("decode error %v is not ErrInvalid", err)
			}
			return
		}
		enc, err := EncodeCommand(c)
		if err != nil {
			t.Fatalf("accepted command does not encode: %v", err)
		}
		c2, err := DecodeCommand(enc)
		if err != nil || fmt.Sprint(c2) != fmt.Sprint(c) {
			t.Fatalf("re-encoded command decodes as %+v, %v; want %+v", c2, err, c)
		}
		if enc2, _ := EncodeCommand(c2); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding not stable")
		}
	})
}

// FuzzDecodeEnvelope: a record payload never panics the decoder; what it
// accepts re-encodes to a payload that decodes the same.
func FuzzDecodeEnvelope(f *testing.F) {
	for _, c := range fuzzCommands()[:2] {
		for i := range c.Publishes {
			f.Add(appendEnvelope(nil, &c.Publishes[i]))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeEnvelope(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("decode error %v is not ErrCorrupt", err)
			}
			return
		}
		p := Publish{QoS: e.qos, Key: e.key, Message: e.message}
		again, err := decodeEnvelope(appendEnvelope(nil, &p))
		if err != nil || fmt.Sprint(again) != fmt.Sprint(e) {
			t.Fatalf("re-encoded envelope decodes as %+v, %v; want %+v", again, err, e)
		}
	})
}

// FuzzSnapshotTable: a snapshot's header and dedup table never panic the
// reader; what it accepts encodes back to the same table.
func FuzzSnapshotTable(f *testing.F) {
	tb := newTable()
	tb.insert(dedupKey{"c", 1}, dedupEntry{nonce: 9, seq: 3, index: 1})
	tb.insert(dedupKey{"d", 65535}, dedupEntry{nonce: 1 << 60, seq: 7, index: 4})
	for _, t := range []*table{newTable(), tb} {
		var buf bytes.Buffer
		sn := &Snapshot{applied: 12, table: t.appendTo(nil, DefaultHorizon)}
		if err := sn.writeHeader(&buf); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_, tb, horizon, err := readSnapshotTable(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		enc := tb.appendTo(nil, horizon)
		again, h2, err := decodeTable(enc)
		if err != nil || h2 != horizon || tableString(again) != tableString(tb) {
			t.Fatalf("re-encoded table decodes as %s, %v", tableString(again), err)
		}
	})
}
