package sequenced

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/sextantmq/sextant/internal/sequencer"
	"github.com/sextantmq/sextant/internal/wire"
)

// MethodPublish is the peer-link request an access node sends a group's
// home: a batch of publishes to sequence (request), their places in the
// log or why not (response). Methods 32 and up belong to services outside
// the cluster layer (cluster.Layer.Handle).
const MethodPublish byte = 32

// ErrCorrupt reports a request or response that does not decode.
var ErrCorrupt = errors.New("sequenced: corrupt encoding")

// wireVersion is the first byte of every request and response.
const wireVersion = 1

// A request is one batch of a stream of publishes from one access node to
// one group:
//
//	version=1 | group str | epoch uvarint | stream uvarint | n uvarint | cmd bytes
//
// cmd is a sequencer publish command (sequencer.EncodeCommand), which the
// home submits as it is. A stream is numbered from n = 1; the home
// submits a stream's batches in n order, so the access node may send the
// next batch before the previous one is answered (pipelining) without
// losing its publishers' order. A new stream (a larger stream number: the
// access node's hybrid-logical clock when it started it) replaces the old
// one, whose batches still waiting are refused.
type request struct {
	Group  string
	Epoch  uint64 // the group's epoch as the access node knows it
	Stream uint64
	N      uint64
	Cmd    []byte
}

func appendRequest(dst []byte, r request) []byte {
	dst = append(dst, wireVersion)
	dst = wire.AppendString(dst, r.Group)
	dst = binary.AppendUvarint(dst, r.Epoch)
	dst = binary.AppendUvarint(dst, r.Stream)
	dst = binary.AppendUvarint(dst, r.N)
	return wire.AppendBytes(dst, r.Cmd)
}

func decodeRequest(b []byte) (request, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return request{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := request{Group: d.Str(), Epoch: d.Uvarint(), Stream: d.Uvarint(), N: d.Uvarint(), Cmd: d.Bytes()}
	if err := d.Finish(); err != nil {
		return request{}, fmt.Errorf("%w: request: %w", ErrCorrupt, err)
	}
	if r.Group == "" || r.N == 0 || len(r.Cmd) == 0 {
		return request{}, fmt.Errorf("%w: request without group, batch number or command", ErrCorrupt)
	}
	return r, nil
}

// Status says how the home answered a batch.
type Status byte

// Statuses.
const (
	// StatusOK: sequenced; the response lists each publish's place.
	StatusOK Status = iota
	// StatusNotLeader: this node does not lead the group; Leader names
	// the leader it knows of (empty: none known yet).
	StatusNotLeader
	// StatusNoReplica: this node runs no replica of the group.
	StatusNoReplica
	// StatusStale: the batch belongs to a stream that a newer one
	// replaced, or waited too long for its predecessor; nothing of it was
	// submitted.
	StatusStale
	// StatusUnknown: submitted, but whether it committed is unknown
	// (leadership lost, the replica closed). A retry with the same keys is
	// answered from the dedup table if it did.
	StatusUnknown
	// StatusRefused: the group's state machine refused the batch
	// (deterministically: retrying it fails again); Reason says why.
	StatusRefused
	// StatusMoving: the group is being moved away from this home
	// (internal/migration); nothing was submitted. Leader names the node
	// it moves to. The access node holds the group's publishes until the
	// record's epoch changes (Router: the hold).
	StatusMoving
)

var statusNames = [...]string{"ok", "not_leader", "no_replica", "stale", "unknown", "refused", "moving"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("status(%d)", byte(s))
}

// A response:
//
//	version=1 | status | ok: count uvarint | count × (index uvarint | seq uvarint | duplicate byte)
//	                   | not leader, moving: leader str | refused: reason str | others: nothing
type response struct {
	Status    Status
	Published []sequencer.Published // StatusOK
	Leader    string                // StatusNotLeader, StatusMoving
	Reason    string                // StatusRefused
}

func appendResponse(dst []byte, r response) []byte {
	dst = append(dst, wireVersion, byte(r.Status))
	switch r.Status {
	case StatusOK:
		dst = binary.AppendUvarint(dst, uint64(len(r.Published)))
		for _, p := range r.Published {
			dst = binary.AppendUvarint(dst, p.Index)
			dst = binary.AppendUvarint(dst, p.Seq)
			var dup byte
			if p.Duplicate {
				dup = 1
			}
			dst = append(dst, dup)
		}
	case StatusNotLeader, StatusMoving:
		dst = wire.AppendString(dst, r.Leader)
	case StatusRefused:
		dst = wire.AppendString(dst, r.Reason)
	}
	return dst
}

func decodeResponse(b []byte) (response, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return response{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := response{Status: Status(d.Byte())}
	switch r.Status {
	case StatusOK:
		// Each publish takes at least 3 bytes.
		n := d.Count(3)
		if n > 0 {
			r.Published = make([]sequencer.Published, n)
		}
		for i := 0; i < n && !d.Failed(); i++ {
			p := &r.Published[i]
			p.Index, p.Seq = d.Uvarint(), d.Uvarint()
			switch d.Byte() {
			case 0:
			case 1:
				p.Duplicate = true
			default:
				d.Fail()
			}
		}
	case StatusNotLeader, StatusMoving:
		r.Leader = d.Str()
	case StatusRefused:
		r.Reason = d.Str()
	case StatusNoReplica, StatusStale, StatusUnknown:
	default:
		if !d.Failed() {
			return response{}, fmt.Errorf("%w: status %d", ErrCorrupt, r.Status)
		}
	}
	if err := d.Finish(); err != nil {
		return response{}, fmt.Errorf("%w: response: %w", ErrCorrupt, err)
	}
	return r, nil
}
