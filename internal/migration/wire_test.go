package migration

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
)

func wireRequests() []request {
	at := time.Unix(1700000000, 123).UTC()
	return []request{
		{Kind: reqChunk, Group: "swarm/1", ID: 7, Offset: 0, Last: false, Data: []byte("SXTLSNAP...")},
		{Kind: reqChunk, Group: "g", ID: 7, Offset: 1 << 20, Last: true, Data: []byte{}},
		{Kind: reqTail, Group: "g", ID: 7, Last: true, Records: []topiclog.Record{
			{Seq: 10, Topic: "a/b", Index: 3, Time: at, Mark: 99, Retain: true, Payload: []byte("x")},
			{Seq: 11, Topic: "a/c", Index: 1, Time: at.Add(time.Millisecond), Mark: 99, Payload: []byte{}},
		}},
		{Kind: reqTail, Group: "g", ID: 8, Last: false},
		{Kind: reqSwitch, Group: "g", ID: 7, Last: true, Records: []topiclog.Record{
			{Seq: 12, Topic: "a/b", Index: 4, Time: at, Mark: 100, Payload: []byte("y")},
		}, End: 13, Epoch: 5, Record: []byte(`{"id":"g","home":"b","voters":["b"],"epoch":5,"handover_from":"a"}`)},
		{Kind: reqAbort, Group: "g", ID: 7},
		{Kind: reqStatus, Group: "g"},
		{Kind: reqAwait, Group: "g"},
	}
}

func wireResponses() []response {
	return []response{
		{OK: true, Next: 12},
		{OK: true, Open: true, Leader: true, Applied: 1 << 40, Next: 5},
		{OK: true, Open: true, Leader: true, Next: 13, Served: true, ServedAfter: 3 * time.Millisecond},
		{OK: true, Served: true},
		{Reason: "this node runs a replica of group g already"},
	}
}

func TestWireRoundTrip(t *testing.T) {
	for _, r := range wireRequests() {
		got, err := decodeRequest(appendRequest(nil, r))
		if err != nil || fmt.Sprint(got) != fmt.Sprint(normalize(r)) {
			t.Errorf("request %+v: decoded %+v, %v", r, got, err)
		}
	}
	for _, r := range wireResponses() {
		got, err := decodeResponse(appendResponse(nil, r))
		if err != nil || got != r {
			t.Errorf("response %+v: decoded %+v, %v", r, got, err)
		}
	}
	for _, b := range [][]byte{nil, {2}, {1, 9, 1, 'g', 0}, {1, reqChunk, 0, 0}, append(appendRequest(nil, request{Kind: reqAbort, Group: "g"}), 0)} {
		if _, err := decodeRequest(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("request % x: %v, want ErrCorrupt", b, err)
		}
	}
}

// normalize gives r the form a decoded request has (empty data, no
// records: nil).
func normalize(r request) request {
	if len(r.Data) == 0 {
		r.Data = nil
	}
	if len(r.Record) == 0 {
		r.Record = nil
	}
	return r
}

// TestWriteFuzzSeeds keeps testdata/fuzz's seed files equal to the
// encodings above (run with -update to rewrite them).
func TestWriteFuzzSeeds(t *testing.T) {
	write := func(fuzz string, i int, b []byte) {
		dir := filepath.Join("testdata", "fuzz", fuzz)
		name := filepath.Join(dir, fmt.Sprintf("seed-%d", i))
		content := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if *update {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
			return
		}
		if got, err := os.ReadFile(name); err != nil || string(got) != content {
			t.Errorf("%s is stale (run with -update): %v", name, err)
		}
	}
	for i, r := range wireRequests() {
		write("FuzzDecodeRequest", i, appendRequest(nil, r))
	}
	for i, r := range wireResponses() {
		write("FuzzDecodeResponse", i, appendResponse(nil, r))
	}
}

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
		enc := appendRequest(nil, r)
		r2, err := decodeRequest(enc)
		if err != nil || fmt.Sprint(r2) != fmt.Sprint(r) || !bytes.Equal(appendRequest(nil, r2), enc) {
			t.Fatalf("re-encoded request decodes as %+v, %v; want %+v", r2, err, r)
		}
	})
}

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
		if r2, err := decodeResponse(appendResponse(nil, r)); err != nil || r2 != r {
			t.Fatalf("re-encoded response decodes as %+v, %v; want %+v", r2, err, r)
		}
	})
}
