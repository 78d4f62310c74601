package fsm

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzDecodeCommand: the decoder never panics, accepts only commands that
// re-encode to an equivalent command, and Apply of anything it accepts
// yields a state whose snapshot restores exactly.
func FuzzDecodeCommand(f *testing.F) {
	for _, c := range []Command{
		RegisterNode(node("n1", TierCore)),
		RemoveNode("n1"),
		PutPoliciesIf([]Rule{{Match: "swarm/+/#", Mode: Sequenced, Replicas: 3, Group: "s/{1}", Retention: &Retention{Messages: 9}}}, 0),
		CreateGroup(Group{ID: "s/1", Rule: "swarm/+/#", Home: "n1", Voters: []string{"n1"}, Learners: []string{"n2"},
			Retention: Retention{Messages: 9, Duration: Duration(time.Hour)}, Created: t0}),
		SetGroupHome(HomeChange{Group: "s/1", Home: "n1", Epoch: 2, Reason: ReasonMigration, At: t0}),
		SetGroupHome(HomeChange{Group: "s/1", Home: "n2", Epoch: 3, Reason: ReasonManual, At: t0, Handover: []string{"n2"}}),
		SetGroupMembers(MembersChange{Group: "s/1", Epoch: 1, Voters: []string{"n1", "n2"}}),
		DeleteGroup("s/1"),
		SetGroupDesired(DesiredChange{Group: "s/1", Epoch: 1, Home: "n2", Voters: []string{"n2"}, Reason: ReasonViolation, At: t0}),
		CancelGroupDesired(DesiredCancel{Group: "s/1", Index: 4}),
	} {
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
		if err != nil {
			t.Fatalf("re-encoded command %s does not decode: %v", enc, err)
		}
		if enc2, _ := EncodeCommand(c2); !bytes.Equal(enc, enc2) {
			t.Fatalf("encoding not stable: %s vs %s", enc, enc2)
		}
		s := applyAll(t, RegisterNode(node("n1", TierCore)), RegisterNode(node("n2", TierCore)),
			CreateGroup(Group{ID: "s/1", Rule: "#", Home: "n1", Voters: []string{"n1"}, Created: t0}))
		s, _ = s.Apply(4, c)
		snap := s.Snapshot()
		r, err := Restore(snap)
		if err != nil {
			t.Fatalf("snapshot %s does not restore: %v", snap, err)
		}
		if !bytes.Equal(r.Snapshot(), snap) {
			t.Fatalf("restore not exact")
		}
	})
}

// FuzzRestore: the snapshot decoder never panics, and what it accepts
// snapshots to bytes that restore to the same bytes.
func FuzzRestore(f *testing.F) {
	f.Add([]byte(`{"v":1,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]}}`))
	f.Add([]byte(`{"v":2,"applied":0,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[` + groupJSON + `]}`))
	f.Add([]byte(`{"v":2,"applied":5,"nodes":[],"policies":{"version":0,"rules":[]},"groups":[` +
		strings.TrimSuffix(groupJSON, `}`) + `,"desired":{"home":"b","voters":["b"],"reason":"manual","at":"2025-01-01T00:01:00Z","epoch":1,"index":5}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Restore(b)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("restore error %v is not ErrInvalid", err)
			}
			return
		}
		snap := s.Snapshot()
		r, err := Restore(snap)
		if err != nil {
			t.Fatalf("own snapshot %s rejected: %v", snap, err)
		}
		if !bytes.Equal(r.Snapshot(), snap) {
			t.Fatalf("snapshot not stable")
		}
	})
}
