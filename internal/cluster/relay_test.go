package cluster

import (
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/message"
)

func sampleRelay() (string, []broker.Relayed) {
	return "client-7", []broker.Relayed{
		{Msg: &message.Message{Topic: "a/b", Payload: []byte("x"), QoS: 1, Origin: "n1"}, QoS: 1, IDs: []uint32{3, 9}},
		{Msg: &message.Message{Topic: "a/c", QoS: 2, Retain: true}, QoS: 2, Retain: true, Shared: "$share/g/a/#"},
	}
}

func encodeRelay(id string, ds []broker.Relayed) []byte {
	b := appendRelayHeader(nil, id)
	b = binary.AppendUvarint(b, uint64(len(ds)))
	for _, d := range ds {
		b = appendRelayed(b, d)
	}
	return b
}

func TestRelayRoundTrip(t *testing.T) {
	id, ds := sampleRelay()
	gotID, got, err := decodeRelay(encodeRelay(id, ds))
	if err != nil || gotID != id || len(got) != 2 {
		t.Fatalf("%q %v %v", gotID, got, err)
	}
	for i := range ds {
		if got[i].QoS != ds[i].QoS || got[i].Retain != ds[i].Retain || got[i].Shared != ds[i].Shared ||
			!reflect.DeepEqual(got[i].IDs, ds[i].IDs) || got[i].Msg.Topic != ds[i].Msg.Topic || string(got[i].Msg.Payload) != string(ds[i].Msg.Payload) {
			t.Errorf("delivery %d: %+v, want %+v", i, got[i], ds[i])
		}
	}
	if _, _, err := decodeRelay(append(encodeRelay(id, ds), 0)); err == nil {
		t.Fatal("trailing bytes decoded")
	}
}

// FuzzDecodeRelay: no input may panic, and what decodes re-encodes to the
// same deliveries.
func FuzzDecodeRelay(f *testing.F) {
	f.Add(encodeRelay(sampleRelay()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		id, ds, err := decodeRelay(b)
		if err != nil {
			return
		}
		id2, ds2, err := decodeRelay(encodeRelay(id, ds))
		if err != nil || id2 != id || len(ds2) != len(ds) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
