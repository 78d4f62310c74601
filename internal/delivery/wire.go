package delivery

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/wire"
)

// MethodPoll is the peer-link request a node sends a group's replica (its
// home first) for the group's records: a long poll that the replica
// answers as soon as one of the groups asked for has records from the
// position asked, or when its wait ends. With no wait it is a plain read
// (replays and history).
const MethodPoll byte = 33

// ErrCorrupt reports a request or response that does not decode.
var ErrCorrupt = errors.New("delivery: corrupt encoding")

const wireVersion = 1

// Limits of a poll.
const (
	// maxPollGroups bounds the groups of one poll.
	maxPollGroups = 1 << 16
	// maxFilters bounds the filters of one group in a poll.
	maxFilters = 1 << 12
	// maxWait bounds how long a replica holds a poll.
	maxWait = time.Minute
)

// A poll request:
//
//	version=1 | poll uvarint | wait ms uvarint | max bytes uvarint | count uvarint
//	| count × (group str | from uvarint | since varint (Unix ns) | filters count | filters str…)
//
// poll numbers a node's polls to one replica: a newer one ends an older one
// still waiting (its caller gave up on it). from is the first position
// wanted; 0 asks the replica to start at the first record at or after
// since (0: at the end of the log).
type pollRequest struct {
	Poll     uint64
	Wait     time.Duration
	MaxBytes int
	Groups   []pollGroup
}

type pollGroup struct {
	Group string
	From  uint64
	Since int64 // Unix ns; with From 0
	// Filters select the records sent (a record whose topic matches none
	// is skipped); none: every record.
	Filters []string
}

func appendPollRequest(dst []byte, r pollRequest) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, r.Poll)
	dst = binary.AppendUvarint(dst, uint64(r.Wait/time.Millisecond))
	dst = binary.AppendUvarint(dst, uint64(max(r.MaxBytes, 0)))
	dst = binary.AppendUvarint(dst, uint64(len(r.Groups)))
	for _, g := range r.Groups {
		dst = wire.AppendString(dst, g.Group)
		dst = binary.AppendUvarint(dst, g.From)
		dst = binary.AppendVarint(dst, g.Since)
		dst = wire.AppendStrings(dst, g.Filters)
	}
	return dst
}

func decodePollRequest(b []byte) (pollRequest, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return pollRequest{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := pollRequest{Poll: d.Uvarint()}
	wait := d.Uvarint()
	if wait > uint64(maxWait/time.Millisecond) {
		d.Fail()
	}
	r.Wait = time.Duration(wait) * time.Millisecond
	mb := d.Uvarint()
	if mb > 1<<30 {
		d.Fail()
	}
	r.MaxBytes = int(mb)
	// A group takes at least 4 bytes: its id's length and a byte, from,
	// since and the filter count.
	n := d.Count(5)
	if n > maxPollGroups {
		d.Fail()
	}
	for i := 0; i < n && !d.Failed(); i++ {
		g := pollGroup{Group: d.Str(), From: d.Uvarint(), Since: d.Varint(), Filters: d.Strings()}
		if g.Group == "" || len(g.Filters) > maxFilters {
			d.Fail()
		}
		r.Groups = append(r.Groups, g)
	}
	if err := d.Finish(); err != nil {
		return pollRequest{}, fmt.Errorf("%w: poll: %w", ErrCorrupt, err)
	}
	return r, nil
}

// Group statuses in a poll response.
const (
	// statusOK: From is where the records start (the resolved position
	// when the request asked for 0); First > 0 when retention removed
	// positions from From on, and the records start at First; Next is
	// the position to ask for next.
	statusOK byte = 0
	// statusNoReplica: this node runs no replica of the group (any more).
	statusNoReplica byte = 1
)

// A poll response:
//
//	version=1 | count uvarint | count × (group str | status | from uvarint | first uvarint | next uvarint
//	| records count | records × (seq uvarint | index uvarint | flags | topic str | message bytes))
//
// flags: bit 0 retain, bits 1-2 QoS.
type pollResponse struct {
	Groups []groupRecords
}

type groupRecords struct {
	Group   string
	Status  byte
	From    uint64
	First   uint64
	Next    uint64
	Records []record
}

// record is one record as feeds see it.
type record struct {
	Seq     uint64
	Index   uint64
	Retain  bool
	QoS     byte
	Topic   string
	Message []byte // an encoded message.Message
}

// sizeHint bounds r's encoding closely, so it is built in one buffer.
func (r pollResponse) sizeHint() int {
	n := 1 + binary.MaxVarintLen64
	for _, g := range r.Groups {
		n += len(g.Group) + 5*binary.MaxVarintLen64 + 1
		for i := range g.Records {
			n += 4*binary.MaxVarintLen64 + 1 + len(g.Records[i].Topic) + len(g.Records[i].Message)
		}
	}
	return n
}

func appendPollResponse(dst []byte, r pollResponse) []byte {
	dst = append(dst, wireVersion)
	dst = binary.AppendUvarint(dst, uint64(len(r.Groups)))
	for _, g := range r.Groups {
		dst = wire.AppendString(dst, g.Group)
		dst = append(dst, g.Status)
		dst = binary.AppendUvarint(dst, g.From)
		dst = binary.AppendUvarint(dst, g.First)
		dst = binary.AppendUvarint(dst, g.Next)
		dst = appendRecords(dst, g.Records)
	}
	return dst
}

func appendRecords(dst []byte, recs []record) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(recs)))
	for _, rec := range recs {
		dst = binary.AppendUvarint(dst, rec.Seq)
		dst = binary.AppendUvarint(dst, rec.Index)
		flags := rec.QoS << 1
		if rec.Retain {
			flags |= 1
		}
		dst = append(dst, flags)
		dst = wire.AppendString(dst, rec.Topic)
		dst = wire.AppendBytes(dst, rec.Message)
	}
	return dst
}

// decodeRecords reads a count and that many records.
func decodeRecords(d *wire.Decoder) []record {
	nr := d.Count(6)
	if nr == 0 {
		return nil
	}
	recs := make([]record, 0, nr)
	for j := 0; j < nr && !d.Failed(); j++ {
		rec := record{Seq: d.Uvarint(), Index: d.Uvarint()}
		flags := d.Byte()
		if flags&^7 != 0 || flags>>1 > 2 {
			d.Fail()
		}
		rec.Retain, rec.QoS = flags&1 != 0, flags>>1
		rec.Topic, rec.Message = d.Str(), d.BytesCopy()
		if rec.Topic == "" || rec.Seq == 0 || rec.Index == 0 {
			d.Fail()
		}
		recs = append(recs, rec)
	}
	return recs
}

func decodePollResponse(b []byte) (pollResponse, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return pollResponse{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	var r pollResponse
	n := d.Count(7)
	for i := 0; i < n && !d.Failed(); i++ {
		g := groupRecords{Group: d.Str(), Status: d.Byte(), From: d.Uvarint(), First: d.Uvarint(), Next: d.Uvarint()}
		if g.Group == "" || g.Status > statusNoReplica {
			d.Fail()
		}
		g.Records = decodeRecords(&d)
		r.Groups = append(r.Groups, g)
	}
	if err := d.Finish(); err != nil {
		return pollResponse{}, fmt.Errorf("%w: poll response: %w", ErrCorrupt, err)
	}
	return r, nil
}

// MethodSeek is the peer-link request that resolves where a replay of a
// group's history starts for a subscription's filter and sx-from, and
// fetches the latest retained messages of the topics it matches.
const MethodSeek byte = 34

// Seek kinds (session.FromKind's values, on the wire).
const (
	seekNone     byte = 0 // no replay: retained messages only
	seekEarliest byte = 1
	seekLatest   byte = 2
	seekIndex    byte = 3
)

// A seek request:
//
//	version=1 | group str | filter str | kind | index uvarint | retained byte
type seekRequest struct {
	Group    string
	Filter   string
	Kind     byte
	Index    uint64
	Retained bool
}

// A seek response:
//
//	version=1 | status | start uvarint | lost uvarint | floor uvarint | floors count | floors × (topic str | index uvarint)
//	| retained count | retained × record (as in a poll response)
//
// Start is the position the replay starts at; Lost counts records asked
// for that retention removed (the replay starts at the first one held). A
// record with an index below its topic's floor (Floors, else Floor) is not
// replayed for the filter: sx-from=latest gives each topic its latest
// record's index, an index gives every topic that index. Retained are the
// latest retained records of the matching topics.
type seekResponse struct {
	Status byte
	Start  uint64
	// Lost counts the records asked for that retention removed (an index
	// before the topic's first).
	Lost     uint64
	Floor    uint64 // for every topic not in Floors
	Floors   []topicFloor
	Retained []record
}

type topicFloor struct {
	Topic string
	Index uint64
}

func appendSeekRequest(dst []byte, r seekRequest) []byte {
	dst = append(dst, wireVersion)
	dst = wire.AppendString(dst, r.Group)
	dst = wire.AppendString(dst, r.Filter)
	dst = append(dst, r.Kind)
	dst = binary.AppendUvarint(dst, r.Index)
	var ret byte
	if r.Retained {
		ret = 1
	}
	return append(dst, ret)
}

func decodeSeekRequest(b []byte) (seekRequest, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return seekRequest{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := seekRequest{Group: d.Str(), Filter: d.Str(), Kind: d.Byte(), Index: d.Uvarint()}
	switch d.Byte() {
	case 0:
	case 1:
		r.Retained = true
	default:
		d.Fail()
	}
	if err := d.Finish(); err != nil {
		return seekRequest{}, fmt.Errorf("%w: seek: %w", ErrCorrupt, err)
	}
	if r.Group == "" || r.Filter == "" || r.Kind > seekIndex || (r.Kind == seekIndex) != (r.Index > 0) {
		return seekRequest{}, fmt.Errorf("%w: seek without group or filter, or with a bad kind or index", ErrCorrupt)
	}
	return r, nil
}

func appendSeekResponse(dst []byte, r seekResponse) []byte {
	dst = append(dst, wireVersion, r.Status)
	dst = binary.AppendUvarint(dst, r.Start)
	dst = binary.AppendUvarint(dst, r.Lost)
	dst = binary.AppendUvarint(dst, r.Floor)
	dst = binary.AppendUvarint(dst, uint64(len(r.Floors)))
	for _, f := range r.Floors {
		dst = wire.AppendString(dst, f.Topic)
		dst = binary.AppendUvarint(dst, f.Index)
	}
	return appendRecords(dst, r.Retained)
}

func decodeSeekResponse(b []byte) (seekResponse, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return seekResponse{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := seekResponse{Status: d.Byte(), Start: d.Uvarint(), Lost: d.Uvarint(), Floor: d.Uvarint()}
	if r.Status > statusNoReplica {
		d.Fail()
	}
	n := d.Count(3)
	for i := 0; i < n && !d.Failed(); i++ {
		f := topicFloor{Topic: d.Str(), Index: d.Uvarint()}
		if f.Topic == "" {
			d.Fail()
		}
		r.Floors = append(r.Floors, f)
	}
	r.Retained = decodeRecords(&d)
	if err := d.Finish(); err != nil {
		return seekResponse{}, fmt.Errorf("%w: seek response: %w", ErrCorrupt, err)
	}
	return r, nil
}

// MethodRange is the peer-link request for a topic's history by index: its
// bounds and records from an index (the admin API's reads).
const MethodRange byte = 35

// A range request:
//
//	version=1 | group str | topic str | from uvarint | limit uvarint
//
// and its answer:
//
//	version=1 | status | known byte | first uvarint | last uvarint | records (as in a poll response)
//
// known is 0 when the group's log never held the topic; first > last when
// retention removed all of its records. Records are the topic's, from
// max(from, first), at most limit (0: bounds only).
type rangeRequest struct {
	Group string
	Topic string
	From  uint64
	Limit int
}

type rangeResponse struct {
	Status  byte
	Known   bool
	First   uint64
	Last    uint64
	Records []record
}

// maxRangeLimit bounds the records of one range answer.
const maxRangeLimit = 10_000

func appendRangeRequest(dst []byte, r rangeRequest) []byte {
	dst = append(dst, wireVersion)
	dst = wire.AppendString(dst, r.Group)
	dst = wire.AppendString(dst, r.Topic)
	dst = binary.AppendUvarint(dst, r.From)
	return binary.AppendUvarint(dst, uint64(max(r.Limit, 0)))
}

func decodeRangeRequest(b []byte) (rangeRequest, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return rangeRequest{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := rangeRequest{Group: d.Str(), Topic: d.Str(), From: d.Uvarint()}
	limit := d.Uvarint()
	if limit > maxRangeLimit {
		d.Fail()
	}
	r.Limit = int(limit)
	if err := d.Finish(); err != nil {
		return rangeRequest{}, fmt.Errorf("%w: range: %w", ErrCorrupt, err)
	}
	if r.Group == "" || r.Topic == "" {
		return rangeRequest{}, fmt.Errorf("%w: range without group or topic", ErrCorrupt)
	}
	return r, nil
}

func appendRangeResponse(dst []byte, r rangeResponse) []byte {
	var known byte
	if r.Known {
		known = 1
	}
	dst = append(dst, wireVersion, r.Status, known)
	dst = binary.AppendUvarint(dst, r.First)
	dst = binary.AppendUvarint(dst, r.Last)
	return appendRecords(dst, r.Records)
}

func decodeRangeResponse(b []byte) (rangeResponse, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != wireVersion && !d.Failed() {
		return rangeResponse{}, fmt.Errorf("%w: version %d", ErrCorrupt, v)
	}
	r := rangeResponse{Status: d.Byte()}
	switch d.Byte() {
	case 0:
	case 1:
		r.Known = true
	default:
		d.Fail()
	}
	if r.Status > statusNoReplica {
		d.Fail()
	}
	r.First, r.Last = d.Uvarint(), d.Uvarint()
	r.Records = decodeRecords(&d)
	if err := d.Finish(); err != nil {
		return rangeResponse{}, fmt.Errorf("%w: range response: %w", ErrCorrupt, err)
	}
	return r, nil
}
