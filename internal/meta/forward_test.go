package meta

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"testing"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

func TestFrameRoundTrip(t *testing.T) {
	var buf bytes.Buffer
	res := fsm.Result{Index: 7, Error: &fsm.Error{Code: fsm.CodeConflict, Field: "expect_version", Reason: "at 3"}}
	if err := writeFrame(&buf, response{Result: &res, Leader: "10.0.0.1:7950"}); err != nil {
		t.Fatal(err)
	}
	var got response
	if err := readFrame(&buf, &got); err != nil {
		t.Fatal(err)
	}
	if got.Leader != "10.0.0.1:7950" || got.Result == nil || !errors.Is(got.Result.Err(), fsm.ErrConflict) {
		t.Fatalf("got %+v", got)
	}
	// A frame announcing more than it carries, or more than the limit.
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], 100)
	if err := readFrame(bytes.NewReader(append(hdr[:], "{}"...)), &got); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short frame: %v", err)
	}
	binary.BigEndian.PutUint32(hdr[:], maxFrame+1)
	if err := readFrame(bytes.NewReader(hdr[:]), &got); err == nil {
		t.Error("oversized frame accepted")
	}
}

// FuzzReadFrame: the forwarded-request decoder never panics and never
// accepts more than maxFrame bytes.
func FuzzReadFrame(f *testing.F) {
	var buf bytes.Buffer
	_ = writeFrame(&buf, request{Op: opPropose, Cmd: []byte(`{"v":1,"op":"remove_node","node_id":"a"}`), TimeoutMS: 5000})
	f.Add(buf.Bytes())
	f.Fuzz(func(t *testing.T, b []byte) {
		var req request
		r := bytes.NewReader(b)
		if err := readFrame(r, &req); err != nil {
			return
		}
		if consumed := len(b) - r.Len(); consumed > maxFrame+4 {
			t.Fatalf("accepted a %d-byte frame", consumed)
		}
		var resp response
		_ = readFrame(bytes.NewReader(b), &resp)
	})
}
