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

func wireSeeks() []seekRequest {
	return []seekRequest{
		{Group: "g", Filter: "a/#", Kind: seekEarliest},
		{Group: "g", Filter: "a/b", Kind: seekIndex, Index: 17, Retained: true},
		{Group: "swarm/7", Filter: "+/x", Kind: seekLatest},
		{Group: "g", Filter: "t", Kind: seekNone, Retained: true},
	}
}

func wireSeekAnswers() []seekResponse {
	return []seekResponse{
		{Start: 5, Lost: 3, Floor: 17, Floors: []topicFloor{{Topic: "a/b", Index: 9}}, Retained: []record{{Seq: 4, Index: 2, Retain: true, QoS: 1, Topic: "a/b", Message: []byte("r")}}},
		{Status: statusNoReplica},
		{Start: 1},
	}
}

func wireRanges() []rangeRequest {
	return []rangeRequest{{Group: "g", Topic: "a/b", From: 3, Limit: 100}, {Group: "g", Topic: "t"}}
}

func wireRangeAnswers() []rangeResponse {
	return []rangeResponse{
		{Known: true, First: 3, Last: 4, Records: []record{{Seq: 9, Index: 3, Topic: "a/b", Message: []byte("x")}}},
		{Known: true, First: 8, Last: 7},
		{},
		{Status: statusNoReplica},
	}
}

// TestSeekAndRangeWireRoundTrip: seeks, ranges and their answers decode
// to what was encoded; truncations are refused.
func TestSeekAndRangeWireRoundTrip(t *testing.T) {
	check := func(what string, v any, b []byte, dec func([]byte) (any, error)) {
		t.Helper()
		got, err := dec(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(v) {
			t.Fatalf("%s %+v decodes as %+v, %v", what, v, got, err)
		}
		for i := range len(b) {
			if _, err := dec(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("%s truncated to %d bytes: %v", what, i, err)
			}
		}
	}
	for _, r := range wireSeeks() {
		check("seek", r, appendSeekRequest(nil, r), func(b []byte) (any, error) { return decodeSeekRequest(b) })
	}
	for _, r := range wireSeekAnswers() {
		check("seek answer", r, appendSeekResponse(nil, r), func(b []byte) (any, error) { return decodeSeekResponse(b) })
	}
	for _, r := range wireRanges() {
		check("range", r, appendRangeRequest(nil, r), func(b []byte) (any, error) { return decodeRangeRequest(b) })
	}
	for _, r := range wireRangeAnswers() {
		check("range answer", r, appendRangeResponse(nil, r), func(b []byte) (any, error) { return decodeRangeResponse(b) })
	}
}

// fuzzRoundTrip: the decoder never panics, refuses with ErrCorrupt, and
// what it accepts survives a re-encoding.
func fuzzRoundTrip[T any](f *testing.F, seeds [][]byte, dec func([]byte) (T, error), enc func(T) []byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, err := dec(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		v2, err := dec(enc(v))
		if err != nil || fmt.Sprint(v2) != fmt.Sprint(v) {
			t.Fatalf("re-encoded value decodes as %+v, %v; want %+v", v2, err, v)
		}
	})
}

func FuzzDecodeSeek(f *testing.F) {
	var seeds [][]byte
	for _, r := range wireSeeks() {
		seeds = append(seeds, appendSeekRequest(nil, r))
	}
	fuzzRoundTrip(f, seeds, decodeSeekRequest, func(r seekRequest) []byte { return appendSeekRequest(nil, r) })
}

func FuzzDecodeSeekResponse(f *testing.F) {
	var seeds [][]byte
	for _, r := range wireSeekAnswers() {
		seeds = append(seeds, appendSeekResponse(nil, r))
	}
	fuzzRoundTrip(f, seeds, decodeSeekResponse, func(r seekResponse) []byte { return appendSeekResponse(nil, r) })
}

func FuzzDecodeRange(f *testing.F) {
	var seeds [][]byte
	for _, r := range wireRanges() {
		seeds = append(seeds, appendRangeRequest(nil, r))
	}
	fuzzRoundTrip(f, seeds, decodeRangeRequest, func(r rangeRequest) []byte { return appendRangeRequest(nil, r) })
}

func FuzzDecodeRangeResponse(f *testing.F) {
	var seeds [][]byte
	for _, r := range wireRangeAnswers() {
		seeds = append(seeds, appendRangeResponse(nil, r))
	}
	fuzzRoundTrip(f, seeds, decodeRangeResponse, func(r rangeResponse) []byte { return appendRangeResponse(nil, r) })
}
