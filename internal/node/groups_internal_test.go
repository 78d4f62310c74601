package node

import (
	"encoding/json"
	"testing"

	"github.com/sextantmq/sextant/internal/adminapi"
)

// FuzzDecodeGroupStats feeds arbitrary bodies to the group-stats decoders:
// an error or a value, never a panic; an answer accepted has as many
// entries as asked, and a request accepted encodes back to an equal one.
func FuzzDecodeGroupStats(f *testing.F) {
	f.Add([]byte(`{"groups":["seq/a","swarm/1"]}`), 2)
	f.Add([]byte(`{"stats":[{"node":"n1","role":"leader","leader":"n1","term":3,"records":10,"bytes":999,"topics":1},{"node":""}]}`), 2)
	f.Add([]byte(`{"stats":null}`), 0)
	f.Add([]byte(`{"groups":[1]}`), 1)
	f.Fuzz(func(t *testing.T, b []byte, want int) {
		if req, err := decodeGroupStatsRequest(b); err == nil {
			again, err := decodeGroupStatsRequest(must(json.Marshal(req)))
			if err != nil || len(again.Groups) != len(req.Groups) {
				t.Fatalf("request %q: round trip %v %v", b, again, err)
			}
		}
		if resp, err := decodeGroupStatsResponse(b, want); err == nil && len(resp.Stats) != want {
			t.Fatalf("answer %q: %d entries for %d asked", b, len(resp.Stats), want)
		}
	})
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

// TestGroupStatsAnswerCountChecked: an answer with another number of
// entries than asked is refused (it would misattribute figures).
func TestGroupStatsAnswerCountChecked(t *testing.T) {
	b := must(json.Marshal(groupStatsResponse{Stats: []adminapi.GroupStats{{Node: "n1"}}}))
	if _, err := decodeGroupStatsResponse(b, 2); err == nil {
		t.Fatal("1 entry for 2 asked accepted")
	}
	if r, err := decodeGroupStatsResponse(b, 1); err != nil || r.Stats[0].Node != "n1" {
		t.Fatalf("%+v %v", r, err)
	}
}

// FuzzDecodeLinearRead feeds arbitrary bodies to the linearizable-read
// decoders: an error or a value, never a panic; a request accepted has a
// limit the API allows, an answer accepted a known status.
func FuzzDecodeLinearRead(f *testing.F) {
	f.Add([]byte(`{"group":"g","topic":"g/a","from":3,"limit":10}`))
	f.Add([]byte(`{"status":"ok","known":true,"first":1,"last":2,"records":[{"index":1,"seq":1,"qos":1,"payload":"x","time":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"status":"not_leader","leader":"n2"}`))
	f.Add([]byte(`{"limit":-1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		if req, err := decodeLinearReadRequest(b); err == nil && (req.Limit < 0 || req.Limit > adminapi.MaxLogLimit) {
			t.Fatalf("request %q accepted with limit %d", b, req.Limit)
		}
		if resp, err := decodeLinearReadResponse(b); err == nil {
			switch resp.Status {
			case linearOK, linearNoReplica, linearNotLeader, linearFailed:
			default:
				t.Fatalf("answer %q accepted with status %q", b, resp.Status)
			}
		}
	})
}
