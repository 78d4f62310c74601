package directory

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/store"
)

func TestRendezvousOwnership(t *testing.T) {
	nodes := []string{"n1", "n2", "n3", "n4", "n5"}
	const ids = 20000
	count := map[string]int{}
	before := map[string]string{}
	for i := range ids {
		id := fmt.Sprintf("client-%d", i)
		o := owner(id, nodes)
		count[o]++
		before[id] = o
		if o2 := owner(id, []string{"n5", "n3", "n1", "n4", "n2"}); o2 != o {
			t.Fatalf("owner depends on the order of the member list")
		}
	}
	for _, n := range nodes {
		if share := float64(count[n]) / ids; share < 0.17 || share > 0.23 {
			t.Errorf("%s owns %.3f of the ids, want about 0.2", n, share)
		}
	}
	// Removing n3 moves exactly the ids n3 owned.
	rest := []string{"n1", "n2", "n4", "n5"}
	for id, o := range before {
		o2 := owner(id, rest)
		if o != "n3" && o2 != o {
			t.Fatalf("%s moved from %s to %s when n3 left", id, o, o2)
		}
	}
	if owner("x", nil) != "" {
		t.Fatal("owner among no nodes")
	}
}

func sampleState() *broker.SessionState {
	m := &message.Message{Topic: "a/b", Payload: []byte("p"), QoS: 1, Origin: "n1", Created: time.Unix(5, 0)}
	return &broker.SessionState{
		Record: &store.SessionRecord{
			ClientID: "c1", Version: 5, ExpiryInterval: 300, DisconnectedAt: time.Unix(100, 0),
			Subscriptions: []store.SubscriptionRecord{
				{Filter: "a/#", QoS: 1, RetainAsPublished: true, ID: 7},
				{Filter: "$share/g/b", QoS: 2, RetainHandling: 2},
			},
			Will: &message.Message{Topic: "w", Payload: []byte("bye"), Retain: true, Created: time.Unix(6, 0)}, WillDelay: 30,
		},
		Messages: []*store.QueuedMessage{
			{Seq: 1, Msg: m, QoS: 1, PacketID: 10, State: store.SentAwaitingAck, SubIDs: []uint32{7}},
			{Seq: 2, QoS: 2, PacketID: 11, State: store.ReleaseSent},
			{Seq: 3, Msg: m, QoS: 0, RetainFlag: true},
		},
		Inbound: []uint16{3, 9},
	}
}

func TestSessionStateRoundTrip(t *testing.T) {
	st := sampleState()
	got, err := decodeState(appendState(nil, st))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(normalise(got), normalise(st)) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, st)
	}
	if got, err := decodeState(appendState(nil, nil)); got != nil || err != nil {
		t.Fatalf("no session: %v %v", got, err)
	}
	enc := appendState(nil, st)
	for i := 1; i < len(enc); i++ {
		if _, err := decodeState(enc[:i]); err == nil {
			t.Fatalf("truncated to %d bytes decoded", i)
		}
	}
}

// normalise makes times comparable with DeepEqual (monotonic and location).
func normalise(st *broker.SessionState) *broker.SessionState {
	cp := *st
	r := *st.Record
	r.DisconnectedAt = r.DisconnectedAt.UTC()
	if r.Will != nil {
		w := *r.Will
		w.Created = w.Created.UTC()
		r.Will = &w
	}
	cp.Record = &r
	cp.Messages = nil
	for _, q := range st.Messages {
		q2 := *q
		if q.Msg != nil {
			m := *q.Msg
			m.Created = m.Created.UTC()
			q2.Msg = &m
		}
		cp.Messages = append(cp.Messages, &q2)
	}
	return &cp
}

func TestDirectoryBodiesRoundTrip(t *testing.T) {
	cl, err := decodeClaim(appendClaim(nil, claim{ClientID: "client", Node: "n2", Stamp: 1 << 40}))
	if err != nil || cl != (claim{ClientID: "client", Node: "n2", Stamp: 1 << 40}) {
		t.Fatalf("claim: %+v %v", cl, err)
	}
	node, ids, stamps, err := decodeAssert(appendAssert(nil, "n3", []string{"a", "b"}, []uint64{0, 9}))
	if err != nil || node != "n3" || !reflect.DeepEqual(ids, []string{"a", "b"}) || !reflect.DeepEqual(stamps, []uint64{0, 9}) {
		t.Fatalf("assert: %q %v %v %v", node, ids, stamps, err)
	}
	id, clean, err := decodeHandOver(appendHandOver(nil, "c", true))
	if err != nil || id != "c" || !clean {
		t.Fatalf("hand-over: %q %v %v", id, clean, err)
	}
	if _, _, err := decodeHandOver([]byte{1, 'c', 2}); err == nil {
		t.Fatal("hand-over with a bad flag decoded")
	}
	mine, prev := claim{ClientID: "c", Node: "n2", Stamp: 9}, claim{ClientID: "c", Node: "n1", Stamp: 3}
	m2, p2, err := decodeRestore(appendRestore(nil, mine, prev))
	if err != nil || m2 != mine || p2 != prev {
		t.Fatalf("restore: %+v %+v %v", m2, p2, err)
	}
	if p, err := decodePrevious(appendPrevious(nil, claim{ClientID: "c"})); err != nil || p.Node != "" {
		t.Fatalf("no previous claim: %+v %v", p, err)
	}
	if p, err := decodePrevious(appendPrevious(nil, prev)); err != nil || p != prev {
		t.Fatalf("previous claim: %+v %v", p, err)
	}
	if id, err := decodeClientID(appendClientID(nil, "c")); err != nil || id != "c" {
		t.Fatalf("release: %q %v", id, err)
	}
	if _, err := decodeClientID(append(appendClientID(nil, "c"), 0)); err == nil {
		t.Fatal("release with trailing bytes decoded")
	}
}

// FuzzDecodeState: no input may panic, and what decodes re-encodes to an
// equal state.
func FuzzDecodeState(f *testing.F) {
	f.Add(appendState(nil, sampleState()))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := decodeState(b)
		if err != nil || st == nil {
			return
		}
		again, err := decodeState(appendState(nil, st))
		if err != nil {
			t.Fatalf("re-encoded state does not decode: %v", err)
		}
		if !reflect.DeepEqual(normalise(again), normalise(st)) {
			t.Fatalf("round trip changed the state")
		}
	})
}

// FuzzDirectoryBodies feeds every request decoder the same bytes.
func FuzzDirectoryBodies(f *testing.F) {
	f.Add(appendClaim(nil, claim{ClientID: "client", Node: "n2", Stamp: 77}))
	f.Add(appendAssert(nil, "n3", []string{"a", "b"}, []uint64{1, 2}))
	f.Add(appendHandOver(nil, "c", true))
	f.Add(appendStringList(nil, []string{"x"}))
	f.Add(appendRestore(nil, claim{ClientID: "c", Node: "n2", Stamp: 9}, claim{Node: "n1", Stamp: 3}))
	f.Add(appendClientID(nil, "c"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if cl, err := decodeClaim(b); err == nil {
			if again, err := decodeClaim(appendClaim(nil, cl)); err != nil || again != cl {
				t.Fatal("claim round trip")
			}
		}
		if node, ids, stamps, err := decodeAssert(b); err == nil {
			n2, ids2, stamps2, err := decodeAssert(appendAssert(nil, node, ids, stamps))
			if err != nil || n2 != node || !reflect.DeepEqual(ids2, ids) || !reflect.DeepEqual(stamps2, stamps) {
				t.Fatal("assert round trip")
			}
		}
		if mine, prev, err := decodeRestore(b); err == nil {
			m2, p2, err := decodeRestore(appendRestore(nil, mine, prev))
			if err != nil || m2 != mine || p2 != prev {
				t.Fatal("restore round trip")
			}
		}
		_, _, _ = decodeHandOver(b)
		_, _ = decodeStringList(b)
		_, _ = decodeClientID(b)
		_, _ = decodePrevious(b)
		_, _, _ = decodeRegistered(b)
	})
}

// TestRegisterCleanLosesToANewerClaim: a clean start's claim reaches the
// owner after its CONNACK, so a newer claim may be there first; the late one
// is refused (its node drops its copy), while an older entry is replaced.
func TestRegisterCleanLosesToANewerClaim(t *testing.T) {
	c := New(Config{NodeID: "n1"})
	c.register(claim{ClientID: "x", Node: "n2", Stamp: 10})
	if _, superseded := c.registerClean(claim{ClientID: "x", Node: "n3", Stamp: 5}); !superseded {
		t.Fatal("an older clean start replaced a newer claim")
	}
	prev, superseded := c.registerClean(claim{ClientID: "x", Node: "n3", Stamp: 11})
	if superseded || prev.Node != "n2" || prev.Stamp != 10 {
		t.Fatalf("a newer clean start: previous %+v, superseded %v", prev, superseded)
	}
	for _, tc := range []struct {
		prev       claim
		superseded bool
	}{{claim{}, false}, {claim{ClientID: "x", Node: "n2", Stamp: 10}, false}, {claim{}, true}} {
		p, s, err := decodeRegistered(appendRegistered(nil, tc.prev, tc.superseded))
		if err != nil || p != tc.prev || s != tc.superseded {
			t.Fatalf("registration answer %+v: got %+v %v %v", tc, p, s, err)
		}
	}
	if _, _, err := decodeRegistered([]byte{2}); err == nil {
		t.Fatal("a bad registration answer decoded")
	}
}
