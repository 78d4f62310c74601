package delivery

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"
)

func wirePolls() []pollRequest {
	return []pollRequest{
		{Poll: 1, Wait: 5 * time.Second, MaxBytes: 1 << 20, Groups: []pollGroup{{Group: "g", From: 7, Filters: []string{"a/#", "b/+"}}}},
		{Poll: 1 << 40, Groups: []pollGroup{{Group: "swarm/7", Since: time.Unix(1700000000, 5).UnixNano()}, {Group: "h", From: 1}}},
		{Poll: 2},
	}
}

func wireAnswers() []pollResponse {
	return []pollResponse{
		{Groups: []groupRecords{{Group: "g", From: 3, Next: 5, Records: []record{
			{Seq: 3, Index: 1, Topic: "a/b", Message: []byte("m1")},
			{Seq: 4, Index: 9, Retain: true, QoS: 2, Topic: "a/c", Message: bytes.Repeat([]byte{1}, 200)},
		}}}},
		{Groups: []groupRecords{{Group: "g", From: 1, First: 10, Next: 10}, {Group: "x", Status: statusNoReplica}}},
		{},
	}
}

// TestPollWireRoundTrip: polls and their answers decode to what was
// encoded; truncations are refused.
func TestPollWireRoundTrip(t *testing.T) {
	for _, r := range wirePolls() {
		b := appendPollRequest(nil, r)
		got, err := decodePollRequest(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
			t.Fatalf("poll %+v decodes as %+v, %v", r, got, err)
		}
		for i := range len(b) {
			if _, err := decodePollRequest(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("poll truncated to %d bytes: %v", i, err)
			}
		}
	}
	for _, r := range wireAnswers() {
		b := appendPollResponse(nil, r)
		got, err := decodePollResponse(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
			t.Fatalf("answer %+v decodes as %+v, %v", r, got, err)
		}
		for i := range len(b) {
			if _, err := decodePollResponse(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("answer truncated to %d bytes: %v", i, err)
			}
		}
	}
}

// FuzzDecodePoll: the decoder never panics, refuses with ErrCorrupt, and
// what it accepts survives a round trip.
func FuzzDecodePoll(f *testing.F) {
	for _, r := range wirePolls() {
		f.Add(appendPollRequest(nil, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodePollRequest(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		r2, err := decodePollRequest(appendPollRequest(nil, r))
		if err != nil || fmt.Sprint(r2) != fmt.Sprint(r) {
			t.Fatalf("re-encoded poll decodes as %+v, %v; want %+v", r2, err, r)
		}
	})
}

// FuzzDecodePollResponse: as FuzzDecodePoll, for answers.
func FuzzDecodePollResponse(f *testing.F) {
	for _, r := range wireAnswers() {
		f.Add(appendPollResponse(nil, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodePollResponse(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		r2, err := decodePollResponse(appendPollResponse(nil, r))
		if err != nil || fmt.Sprint(r2) != fmt.Sprint(r) {
			t.Fatalf("re-encoded answer decodes as %+v, %v; want %+v", r2, err, r)
		}
	})
}
