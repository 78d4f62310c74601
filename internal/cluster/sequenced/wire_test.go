package sequenced

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/sextantmq/sextant/internal/sequencer"
)

func wireRequests() []request {
	return []request{
		{Group: "g", Epoch: 1, Stream: 1, N: 1, Cmd: []byte{1, 'P', 1, 0, 1, 'a', 0}},
		{Group: "swarm/7", Epoch: 1 << 40, Stream: 123456789 << 16, N: 1 << 33, Cmd: bytes.Repeat([]byte{7}, 300)},
	}
}

func wireResponses() []response {
	return []response{
		{Status: StatusOK, Published: []sequencer.Published{{Index: 1, Seq: 1}, {Index: 7, Seq: 1 << 40, Duplicate: true}}},
		{Status: StatusOK},
		{Status: StatusNotLeader, Leader: "n2"},
		{Status: StatusNotLeader},
		{Status: StatusMoving, Leader: "n3"},
		{Status: StatusNoReplica},
		{Status: StatusStale},
		{Status: StatusUnknown},
		{Status: StatusRefused, Reason: "sequencer: invalid command"},
	}
}

// TestWireRoundTrip: requests and responses decode to what was encoded,
// and truncated ones are refused.
func TestWireRoundTrip(t *testing.T) {
	for _, r := range wireRequests() {
		b := appendRequest(nil, r)
		got, err := decodeRequest(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
			t.Fatalf("request %+v decodes as %+v, %v", r, got, err)
		}
		for i := range len(b) {
			if _, err := decodeRequest(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("request truncated to %d bytes: %v", i, err)
			}
		}
	}
	for _, r := range wireResponses() {
		b := appendResponse(nil, r)
		got, err := decodeResponse(b)
		if err != nil || fmt.Sprint(got) != fmt.Sprint(r) {
			t.Fatalf("response %+v decodes as %+v, %v", r, got, err)
		}
		for i := range len(b) {
			if _, err := decodeResponse(b[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("response truncated to %d bytes: %v", i, err)
			}
		}
	}
	if _, err := decodeRequest(appendRequest(nil, request{Group: "g", Stream: 1, N: 0, Cmd: []byte{1}})); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("batch number 0 accepted: %v", err)
	}
}

// FuzzDecodeRequest: the decoder never panics, refuses with ErrCorrupt,
// and what it accepts encodes back to the same bytes.
func FuzzDecodeRequest(f *testing.F) {
	for _, r := range wireRequests() {
		f.Add(appendRequest(nil, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeRequest(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if enc := appendRequest(nil, r); !bytes.Equal(enc, b) {
			r2, err := decodeRequest(enc)
			if err != nil || fmt.Sprint(r2) != fmt.Sprint(r) {
				t.Fatalf("re-encoded request decodes as %+v, %v; want %+v", r2, err, r)
			}
		}
	})
}

// FuzzDecodeResponse: as FuzzDecodeRequest, for responses.
func FuzzDecodeResponse(f *testing.F) {
	for _, r := range wireResponses() {
		f.Add(appendResponse(nil, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := decodeResponse(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		r2, err := decodeResponse(appendResponse(nil, r))
		if err != nil || fmt.Sprint(r2) != fmt.Sprint(r) {
			t.Fatalf("re-encoded response decodes as %+v, %v; want %+v", r2, err, r)
		}
	})
}
