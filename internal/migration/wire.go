package migration

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/sextantmq/sextant/internal/topiclog"
	"github.com/sextantmq/sextant/internal/wire"
)

// MethodMigrate is the peer-link request a migrating group's home sends
// the target: a part of a handover, or a question about the target's
// replica. (Service methods start at 32; 32 to 35 are the publish path's
// and the feeds'. 40 leaves room for theirs.)
const MethodMigrate byte = 40

// ErrCorrupt reports a request or response that does not decode.
var ErrCorrupt = errors.New("migration: corrupt encoding")

// wireVersion 3: the switch request carries the committed record (the old
// home proposed it before the fence) instead of the reason of a switch the
// target proposed (version 2).
const wireVersion = 3

// Request kinds.
const (
	reqChunk  byte = 1 // a part of the snapshot
	reqTail   byte = 2 // the records since the snapshot; installs the log
	reqAbort  byte = 3 // drop what was handed
	reqStatus byte = 4 // the target's replica of the group
	reqAwait  byte = 5 // the same, answered once it serves the group (or after awaitMax)
	// reqSwitch is the tail's last request, sent once the switch (the
	// record naming the target home at Epoch, handed over from the old
	// home) has committed and the old home is fenced: the target installs
	// the log, marks it installed for Epoch, and answers once it serves
	// the group.
	reqSwitch byte = 6
)

// Bounds of a request.
const (
	// tailBytes bounds the records of one tail request; a longer tail is
	// sent in several (the last one installs).
	tailBytes = 8 << 20
)

// chunkBytes is the snapshot's part per request (the peer link's frames
// are bounded at 64 MiB); a variable for tests.
var chunkBytes = 1 << 20

// A request:
//
//	version=3 | kind | group str | id uvarint
//	chunk:  offset uvarint | last byte | data bytes
//	tail:   last byte | count uvarint | count × record
//	switch: last byte (1) | count uvarint | count × record | end uvarint | epoch uvarint | record bytes (JSON fsm.Group)
//	record: seq uvarint | topic str | index uvarint | time varint (unix ns) | mark uvarint | retain byte | payload bytes
//	abort, status, await: nothing
//
// id names the migration (the decision's index): a chunk or a tail of
// another id than the one staged is refused.
type request struct {
	Kind    byte
	Group   string
	ID      uint64
	Offset  uint64
	Last    bool
	Data    []byte
	Records []topiclog.Record
	// End, Epoch and Record: reqSwitch's. End is the position the
	// handed-over log must end at (the old home's, fenced); Epoch the
	// committed switch's; Record the committed record (JSON), which the
	// target serves on before its metadata copy learns it.
	End    uint64
	Epoch  uint64
	Record []byte
}

func appendRequest(dst []byte, r request) []byte {
	dst = append(dst, wireVersion, r.Kind)
	dst = wire.AppendString(dst, r.Group)
	dst = binary.AppendUvarint(dst, r.ID)
	switch r.Kind {
	case reqChunk:
		dst = binary.AppendUvarint(dst, r.Offset)
		dst = append(dst, b2u(r.Last))
		dst = wire.AppendBytes(dst, r.Data)
	case reqTail, reqSwitch:
		dst = append(dst, b2u(r.Last))
		dst = binary.AppendUvarint(dst, uint64(len(r.Records)))
		for _, rc := range r.Records {
			dst = binary.AppendUvarint(dst, rc.Seq)
			dst = wire.AppendString(dst, rc.Topic)
			dst = binary.AppendUvarint(dst, rc.Index)
			dst = binary.AppendVarint(dst, rc.Time.UnixNano())
			dst = binary.AppendUvarint(dst, rc.Mark)
			dst = append(dst, b2u(rc.Retain))
			dst = wire.AppendBytes(dst, rc.Payload)
		}
		if r.Kind == reqSwitch {
			dst = binary.AppendUvarint(dst, r.End)
			dst = binary.AppendUvarint(dst, r.Epoch)
			dst = wire.AppendBytes(dst, r.Record)
		}
	}
	return dst
}

func b2u(b bool) byte {
	if b {
		return 1
	}
	return 0
}

func decodeBool(d *wire.Decoder) bool {
	switch d.Byte() {
	case 0:
		return false
	case 1:
		return true
	}
	d.Fail()
	return false
}

func decodeRequest(b []byte) (request, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return request{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := request{Kind: d.Byte(), Group: d.Str(), ID: d.Uvarint()}
	switch r.Kind {
	case reqChunk:
		r.Offset, r.Last, r.Data = d.Uvarint(), decodeBool(&d), d.BytesCopy()
	case reqTail, reqSwitch:
		r.Last = decodeBool(&d)
		// Each record takes at least 7 bytes.
		n := d.Count(7)
		for i := 0; i < n && !d.Failed(); i++ {
			rc := topiclog.Record{Seq: d.Uvarint(), Topic: d.Str(), Index: d.Uvarint()}
			rc.Time = time.Unix(0, d.Varint()).UTC()
			rc.Mark, rc.Retain, rc.Payload = d.Uvarint(), decodeBool(&d), d.BytesCopy()
			r.Records = append(r.Records, rc)
		}
		if r.Kind == reqSwitch {
			r.End, r.Epoch, r.Record = d.Uvarint(), d.Uvarint(), d.BytesCopy()
		}
	case reqAbort, reqStatus, reqAwait:
	default:
		if !d.Failed() {
			return request{}, fmt.Errorf("%w: request kind %d", ErrCorrupt, r.Kind)
		}
	}
	if err := d.Finish(); err != nil {
		return request{}, fmt.Errorf("%w: request: %w", ErrCorrupt, err)
	}
	if r.Group == "" {
		return request{}, fmt.Errorf("%w: request without a group", ErrCorrupt)
	}
	return r, nil
}

// A response:
//
//	version | ok byte | ok: next uvarint | open byte | leader byte | applied uvarint | served uvarint ; else: reason str
//
// next is the position after the target's staged or installed log; served
// (a switch's answer) is 1 + the nanoseconds from the request's arrival to
// the target serving the group, 0 when it did not serve yet.
type response struct {
	OK      bool
	Reason  string
	Next    uint64
	Open    bool // status: the target runs a replica of the group
	Leader  bool // status: ... which leads it
	Applied uint64
	// Served: a switch's answer: the target serves the group, ServedAfter
	// after the request arrived (its clock).
	Served      bool
	ServedAfter time.Duration
}

func appendResponse(dst []byte, r response) []byte {
	dst = append(dst, wireVersion, b2u(r.OK))
	if !r.OK {
		return wire.AppendString(dst, r.Reason)
	}
	dst = binary.AppendUvarint(dst, r.Next)
	dst = append(dst, b2u(r.Open), b2u(r.Leader))
	dst = binary.AppendUvarint(dst, r.Applied)
	var served uint64
	if r.Served {
		served = 1 + uint64(max(r.ServedAfter, 0))
	}
	return binary.AppendUvarint(dst, served)
}

func decodeResponse(b []byte) (response, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return response{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := response{OK: decodeBool(&d)}
	if r.OK {
		r.Next, r.Open, r.Leader, r.Applied = d.Uvarint(), decodeBool(&d), decodeBool(&d), d.Uvarint()
		if s := d.Uvarint(); s > 0 && s <= math.MaxInt64 {
			r.Served, r.ServedAfter = true, time.Duration(s-1)
		} else if s > 0 {
			d.Fail()
		}
	} else {
		r.Reason = d.Str()
	}
	if err := d.Finish(); err != nil {
		return response{}, fmt.Errorf("%w: response: %w", ErrCorrupt, err)
	}
	return r, nil
}
