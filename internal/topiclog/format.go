package topiclog

import (
	"encoding/binary"
	"errors"
	"hash/crc32"
	"time"
)

// The on-disk format (docs/design/topiclog.md has the full description).
//
// A segment file is a sequence of frames; the first is the segment header,
// every other one a record. A frame is
//
//	length uint32  little-endian, bytes of body
//	crc    uint32  CRC-32C (Castagnoli) of the 4 length bytes and the body
//	body   [length]byte
//
// A record body is
//
//	kind    byte    'R'
//	seq     uint64  position in the group's log
//	index   uint64  index within its topic
//	mark    uint64  the caller's mark
//	time    int64   Unix nanoseconds, from the caller
//	flags   byte    bit 0: retain; bit 1: last record of its batch; others zero
//	tlen    uint16  topic length (>= 1)
//	topic   [tlen]byte
//	payload the rest
//
// A header body is
//
//	kind    byte    'H'
//	magic   [4]byte "SXTL"
//	version byte    1
//	first   uint64  position of the segment's first record
//	ntopics uint32
//	ntopics times, sorted by topic: tlen uint16, topic, last index uint64
//
// The header's topic table holds every topic the log has seen with its last
// index before the segment's first record, so that deleting older segments
// never loses a topic's next index.

const (
	frameHeaderLen = 8
	recordFixedLen = 1 + 8 + 8 + 8 + 8 + 1 + 2 // body bytes before the topic
	headerFixedLen = 1 + 4 + 1 + 8 + 4
	kindRecord     = 'R'
	kindHeader     = 'H'
	formatVersion  = 1
	flagRetain     = 1 << 0
	flagBatchEnd   = 1 << 1 // the last record of its batch
	// maxBody bounds a frame's declared length: a longer one is corrupt.
	maxBody = MaxBatchBytes
)

var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	magic      = [4]byte{'S', 'X', 'T', 'L'}

	// The format stores times as int64 Unix nanoseconds.
	minTime = time.Unix(0, -1<<63)
	maxTime = time.Unix(0, 1<<63-1)
)

// Frame decoding failures. errTorn means the bytes end inside a frame (what
// a torn write leaves); errBadFrame a declared length out of range or a
// checksum mismatch.
var (
	errTorn     = errors.New("frame extends past the end")
	errBadFrame = errors.New("bad frame length or checksum")
	errBadBody  = errors.New("bad frame body")
)

// beginFrame reserves a frame header at the end of dst; finishFrame fills it
// once the body has been appended after it.
func beginFrame(dst []byte) ([]byte, int) {
	return append(dst, 0, 0, 0, 0, 0, 0, 0, 0), len(dst)
}

func finishFrame(dst []byte, start int) []byte {
	binary.LittleEndian.PutUint32(dst[start:], uint32(len(dst)-start-frameHeaderLen))
	crc := crc32.Update(0, castagnoli, dst[start:start+4])
	crc = crc32.Update(crc, castagnoli, dst[start+frameHeaderLen:])
	binary.LittleEndian.PutUint32(dst[start+4:], crc)
	return dst
}

// parseFrame reads the frame at the start of b and returns its body and the
// frame's total length.
func parseFrame(b []byte) (body []byte, n int, err error) {
	if len(b) < frameHeaderLen {
		return nil, 0, errTorn
	}
	length := binary.LittleEndian.Uint32(b)
	if length > maxBody {
		return nil, 0, errBadFrame
	}
	n = frameHeaderLen + int(length)
	if len(b) < n {
		return nil, 0, errTorn
	}
	crc := crc32.Update(0, castagnoli, b[:4])
	crc = crc32.Update(crc, castagnoli, b[frameHeaderLen:n])
	if crc != binary.LittleEndian.Uint32(b[4:]) {
		return nil, 0, errBadFrame
	}
	return b[frameHeaderLen:n], n, nil
}

// rec is a decoded record; topic and payload alias the decoded bytes.
type rec struct {
	seq, index, mark uint64
	time             int64
	retain           bool
	end              bool // last record of its batch
	topic            []byte
	payload          []byte
}

func appendRecord(dst []byte, r *rec) []byte {
	dst, start := beginFrame(dst)
	dst = append(dst, kindRecord)
	dst = binary.LittleEndian.AppendUint64(dst, r.seq)
	dst = binary.LittleEndian.AppendUint64(dst, r.index)
	dst = binary.LittleEndian.AppendUint64(dst, r.mark)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(r.time))
	var flags byte
	if r.retain {
		flags |= flagRetain
	}
	if r.end {
		flags |= flagBatchEnd
	}
	dst = append(dst, flags)
	dst = binary.LittleEndian.AppendUint16(dst, uint16(len(r.topic)))
	dst = append(dst, r.topic...)
	dst = append(dst, r.payload...)
	return finishFrame(dst, start)
}

// RecordLen is the size of a record in the log, as read limits count it.
func RecordLen(topic string, payload []byte) int { return recordLen(topic, payload) }

func recordLen(topic string, payload []byte) int {
	return frameHeaderLen + recordFixedLen + len(topic) + len(payload)
}

func parseRecord(body []byte) (rec, error) {
	if len(body) < recordFixedLen+1 || body[0] != kindRecord {
		return rec{}, errBadBody
	}
	r := rec{
		seq:   binary.LittleEndian.Uint64(body[1:]),
		index: binary.LittleEndian.Uint64(body[9:]),
		mark:  binary.LittleEndian.Uint64(body[17:]),
		time:  int64(binary.LittleEndian.Uint64(body[25:])),
	}
	flags := body[33]
	if flags&^(flagRetain|flagBatchEnd) != 0 {
		return rec{}, errBadBody
	}
	r.retain = flags&flagRetain != 0
	r.end = flags&flagBatchEnd != 0
	tlen := int(binary.LittleEndian.Uint16(body[34:]))
	if tlen == 0 || len(body) < recordFixedLen+tlen {
		return rec{}, errBadBody
	}
	r.topic = body[recordFixedLen : recordFixedLen+tlen]
	r.payload = body[recordFixedLen+tlen:]
	return r, nil
}

// topicLast is one entry of a segment header's topic table.
type topicLast struct {
	topic string
	last  uint64
}

type header struct {
	first  uint64
	topics []topicLast // sorted by topic, no duplicates
}

func appendHeader(dst []byte, h *header) []byte {
	dst, start := beginFrame(dst)
	dst = append(dst, kindHeader)
	dst = append(dst, magic[:]...)
	dst = append(dst, formatVersion)
	dst = binary.LittleEndian.AppendUint64(dst, h.first)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(h.topics)))
	for _, t := range h.topics {
		dst = binary.LittleEndian.AppendUint16(dst, uint16(len(t.topic)))
		dst = append(dst, t.topic...)
		dst = binary.LittleEndian.AppendUint64(dst, t.last)
	}
	return finishFrame(dst, start)
}

func parseHeader(body []byte) (header, error) {
	if len(body) < headerFixedLen || body[0] != kindHeader || [4]byte(body[1:5]) != magic || body[5] != formatVersion {
		return header{}, errBadBody
	}
	h := header{first: binary.LittleEndian.Uint64(body[6:])}
	n := binary.LittleEndian.Uint32(body[14:])
	b := body[headerFixedLen:]
	// Each entry takes at least 11 bytes: refuse a count the body cannot
	// hold before allocating for it.
	if uint64(n)*11 > uint64(len(b)) {
		return header{}, errBadBody
	}
	h.topics = make([]topicLast, 0, n)
	for i := uint32(0); i < n; i++ {
		if len(b) < 2 {
			return header{}, errBadBody
		}
		tlen := int(binary.LittleEndian.Uint16(b))
		if tlen == 0 || len(b) < 2+tlen+8 {
			return header{}, errBadBody
		}
		t := topicLast{topic: string(b[2 : 2+tlen]), last: binary.LittleEndian.Uint64(b[2+tlen:])}
		if len(h.topics) > 0 && h.topics[len(h.topics)-1].topic >= t.topic {
			return header{}, errBadBody // unsorted or duplicate
		}
		h.topics = append(h.topics, t)
		b = b[2+tlen+8:]
	}
	if len(b) != 0 {
		return header{}, errBadBody
	}
	return h, nil
}

// unixNanos converts a caller's time to the stored form.
func unixNanos(t time.Time) (int64, bool) {
	if t.Before(minTime) || t.After(maxTime) {
		return 0, false
	}
	return t.UnixNano(), true
}
