package sequencer

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// TestCommandFormatIsPinned: the encodings replicas exchange, byte for
// byte (a change needs a new CommandVersion).
func TestCommandFormatIsPinned(t *testing.T) {
	retained := Publish{Topic: "a/b", Message: []byte("hi"), Retain: true, QoS: 2, Key: Key{Client: "c1", PacketID: 300, Nonce: 5}}
	for _, tc := range []struct {
		cmd  Command
		want string
	}{
		{PublishCommand(retained, Publish{Topic: "t", Message: nil}),
			"01 50 02" + " 0e 03612f62 026331 ac02 05 026869" + " 00 0174 00"},
		{RetentionCommand(topiclog.Retention{MaxRecordsPerTopic: 3, MaxBytes: 1 << 20, MaxAge: time.Second}),
			"01 52 03 808040 8094ebdc03"},
	} {
		b, err := EncodeCommand(tc.cmd)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := hex.EncodeToString(b), strings.ReplaceAll(tc.want, " ", ""); got != want {
			t.Errorf("%c: %s, want %s", tc.cmd.Kind, got, want)
		}
		back, err := DecodeCommand(b)
		if err != nil || fmt.Sprint(back) != fmt.Sprint(tc.cmd) {
			t.Errorf("%c: decodes as %+v, %v", tc.cmd.Kind, back, err)
		}
	}
	env := appendEnvelope(nil, &retained)
	if got := hex.EncodeToString(env); got != "010a026331ac0205"+"6869" {
		t.Errorf("envelope %s", got)
	}
	if len(env) != envelopeLen(&retained) {
		t.Errorf("envelope of %d bytes, envelopeLen says %d", len(env), envelopeLen(&retained))
	}
}

func TestCommandRejects(t *testing.T) {
	good, _ := EncodeCommand(PublishCommand(pub("a", "m", "c", 1, 1)))
	for name, c := range map[string]Command{
		"no publishes":       PublishCommand(),
		"empty topic":        PublishCommand(Publish{Message: []byte("x")}),
		"long topic":         PublishCommand(Publish{Topic: strings.Repeat("t", topiclog.MaxTopicLen+1)}),
		"QoS 3":              PublishCommand(Publish{Topic: "a", QoS: 3}),
		"QoS 0 with a key":   PublishCommand(Publish{Topic: "a", Key: Key{Client: "c", PacketID: 1}}),
		"key without pid":    PublishCommand(Publish{Topic: "a", QoS: 1, Key: Key{Client: "c", Nonce: 4}}),
		"long client id":     PublishCommand(Publish{Topic: "a", QoS: 1, Key: Key{Client: strings.Repeat("c", MaxClientIDLen+1), PacketID: 1}}),
		"negative bytes":     RetentionCommand(topiclog.Retention{MaxBytes: -1}),
		"unknown kind":       {Kind: 'X'},
		"too many publishes": PublishCommand(make([]Publish, MaxPublishes+1)...),
	} {
		if _, err := EncodeCommand(c); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: encode: %v, want ErrInvalid", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":                nil,
		"version 2":            append([]byte{2}, good[1:]...),
		"unknown kind":         {1, 'X'},
		"trailing":             append(append([]byte(nil), good...), 0),
		"truncated":            good[:len(good)-1],
		"unknown flag":         {1, 'P', 1, 0x10, 1, 'a', 0},
		"key pid 0":            {1, 'P', 1, 0x09, 1, 'a', 1, 'c', 0, 0, 0},
		"pid over 16 bits":     {1, 'P', 1, 0x09, 1, 'a', 1, 'c', 0x80, 0x80, 0x04, 0, 0},
		"count 0":              {1, 'P', 0},
		"huge count":           {1, 'P', 0xff, 0xff, 0xff, 0x0f},
		"retention over int64": {1, 'R', 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0},
	} {
		if _, err := DecodeCommand(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: decode: %v, want ErrInvalid", name, err)
		}
	}
	for name, b := range map[string][]byte{
		"empty":      nil,
		"version 2":  {2, 0},
		"bad flags":  {1, 0x04},
		"QoS 3":      {1, 0x03},
		"key pid 0":  {1, 0x09, 1, 'c', 0, 0},
		"cut in key": {1, 0x09, 5, 'c'},
	} {
		if _, err := decodeEnvelope(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("envelope %s: %v, want ErrCorrupt", name, err)
		}
	}
}

// TestCommandLen: the encoding's length is the one computed beforehand
// (the buffer is allocated once), exactly for publishes.
func TestCommandLen(t *testing.T) {
	w := newWorkload(testSeed(t))
	for range 200 {
		var ps []Publish
		for range 1 + w.r.IntN(8) {
			ps = append(ps, w.publish())
		}
		c := PublishCommand(ps...)
		b, err := EncodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		// The count's varint is reserved at its widest.
		if want := commandLen(c) - binary.MaxVarintLen64 + uvarintLen(uint64(len(ps))); len(b) != want || cap(b) != commandLen(c) {
			t.Fatalf("%d publishes: encoded %d bytes in a buffer of %d, computed %d", len(ps), len(b), cap(b), commandLen(c))
		}
	}
}
