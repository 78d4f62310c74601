package monitor

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/wire"
)

// ErrCorrupt is returned for a report that does not decode or breaks a
// bound.
var ErrCorrupt = errors.New("monitor: corrupt report")

// Version is the report encoding's version (its first byte).
const Version = 1

// Bounds of a report, checked by the encoder and the decoder.
const (
	MaxReportBytes  = 8 << 20
	MaxReportTopics = 100_000
	MaxNodeIDBytes  = 128
	MaxTopicBytes   = 65535
	MaxDims         = 64
	// MaxWindow bounds the window a report's rates cover.
	MaxWindow = 24 * time.Hour
	// MaxUtilisation bounds a utilisation fraction (1 is saturated; a
	// process may briefly use more CPU than it was given).
	MaxUtilisation = 1000
)

// Report is what a node sends the placement manager every interval.
type Report struct {
	// Node is the reporting node's id.
	Node string
	// Incarnation identifies the reporting process (a restarted node is
	// another incarnation) and Seq numbers its reports from 1: the
	// receiver keeps a node's newest report, one with a higher Seq of the
	// same incarnation or any of another incarnation.
	Incarnation, Seq uint64
	// Window is the time the rates were measured over.
	Window time.Duration
	// Coord is the node's network coordinate; nil when it has none (a node
	// running alone).
	Coord *coordinate.Coordinate
	Load  Load
	// Topics are the sequenced topics with producers or consumers here,
	// sorted by topic, each once.
	Topics []TopicReport
}

// Load is a node's measured load over a report's window.
type Load struct {
	// CPU, Memory and Network are utilisations: 1 is the node's whole
	// capacity (Capacity). Network is 0 when its capacity is not known.
	CPU, Memory, Network float64
	// MsgIn and MsgOut are the messages per second the node received and
	// sent, all traffic (clients and peer links, every topic mode).
	MsgIn, MsgOut float64
}

// TopicReport is one topic's producers and consumers at the reporting
// access node.
type TopicReport struct {
	Topic                string
	Producers, Consumers Side
}

// Side folds a topic's producers (or consumers) at one access node.
type Side struct {
	// Count is how many clients.
	Count int
	// MaxRTT is the largest access round trip among them.
	MaxRTT time.Duration
	// Rate is in messages per second: what the producers published here,
	// or the records the node received for its consumers (once per record,
	// whatever the number of consumers).
	Rate float64
}

// Fixed-point scales of the encoding: rates in thousandths of a message per
// second, utilisations in millionths, coordinates and durations in
// nanoseconds (a coordinate's Error, a ratio, in billionths).
const (
	rateScale  = 1e3
	utilScale  = 1e6
	coordScale = 1e9
	maxFixed   = 1 << 62
)

// Validate checks r against the bounds the decoder enforces.
func (r *Report) Validate() error {
	switch {
	case r.Node == "" || len(r.Node) > MaxNodeIDBytes:
		return fmt.Errorf("%w: node id of %d bytes", ErrCorrupt, len(r.Node))
	case r.Seq == 0:
		return fmt.Errorf("%w: seq 0", ErrCorrupt)
	case r.Window <= 0 || r.Window > MaxWindow:
		return fmt.Errorf("%w: window %v", ErrCorrupt, r.Window)
	case len(r.Topics) > MaxReportTopics:
		return fmt.Errorf("%w: %d topics, at most %d", ErrCorrupt, len(r.Topics), MaxReportTopics)
	}
	if c := r.Coord; c != nil {
		if len(c.Vec) == 0 || len(c.Vec) > MaxDims || !c.IsValid() {
			return fmt.Errorf("%w: coordinate", ErrCorrupt)
		}
	}
	l := r.Load
	for _, u := range []float64{l.CPU, l.Memory, l.Network} {
		if !(u >= 0 && u <= MaxUtilisation) {
			return fmt.Errorf("%w: utilisation %v", ErrCorrupt, u)
		}
	}
	if !finiteRate(l.MsgIn) || !finiteRate(l.MsgOut) {
		return fmt.Errorf("%w: message rate", ErrCorrupt)
	}
	for i := range r.Topics {
		t := &r.Topics[i]
		if t.Topic == "" || len(t.Topic) > MaxTopicBytes || !utf8.ValidString(t.Topic) {
			return fmt.Errorf("%w: topic %d: name", ErrCorrupt, i)
		}
		if i > 0 && strings.Compare(r.Topics[i-1].Topic, t.Topic) >= 0 {
			return fmt.Errorf("%w: topic %q out of order or repeated", ErrCorrupt, t.Topic)
		}
		for _, s := range [2]*Side{&t.Producers, &t.Consumers} {
			if s.Count < 0 || s.Count > math.MaxUint32 || s.MaxRTT < 0 || !finiteRate(s.Rate) {
				return fmt.Errorf("%w: topic %q: side %+v", ErrCorrupt, t.Topic, *s)
			}
		}
	}
	return nil
}

func finiteRate(v float64) bool { return v >= 0 && v*rateScale < maxFixed }

// AppendReport appends r's encoding to b after checking it (Validate).
// Rates and coordinates are fixed-point (see the scales above), so a
// decoded report equals the original to within those units.
func AppendReport(b []byte, r *Report) ([]byte, error) {
	if err := r.Validate(); err != nil {
		return b, err
	}
	start := len(b)
	b = append(b, Version)
	b = wire.AppendString(b, r.Node)
	b = binary.AppendUvarint(b, r.Incarnation)
	b = binary.AppendUvarint(b, r.Seq)
	b = binary.AppendUvarint(b, uint64(r.Window))
	b = appendCoord(b, r.Coord)
	for _, u := range []float64{r.Load.CPU, r.Load.Memory, r.Load.Network} {
		b = binary.AppendUvarint(b, fixed(u, utilScale))
	}
	b = binary.AppendUvarint(b, fixed(r.Load.MsgIn, rateScale))
	b = binary.AppendUvarint(b, fixed(r.Load.MsgOut, rateScale))
	b = binary.AppendUvarint(b, uint64(len(r.Topics)))
	for i := range r.Topics {
		t := &r.Topics[i]
		b = wire.AppendString(b, t.Topic)
		b = appendSide(b, &t.Producers)
		b = appendSide(b, &t.Consumers)
	}
	if len(b)-start > MaxReportBytes {
		return b[:start], fmt.Errorf("%w: %d bytes, at most %d", ErrCorrupt, len(b)-start, MaxReportBytes)
	}
	return b, nil
}

func appendSide(b []byte, s *Side) []byte {
	b = binary.AppendUvarint(b, uint64(s.Count))
	b = binary.AppendUvarint(b, uint64(s.MaxRTT))
	return binary.AppendUvarint(b, fixed(s.Rate, rateScale))
}

// appendCoord writes 0 for nil, else 1, the dimensionality, the vector,
// the error, the adjustment and the height.
func appendCoord(b []byte, c *coordinate.Coordinate) []byte {
	if c == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(c.Vec)))
	for _, v := range c.Vec {
		b = binary.AppendVarint(b, signedFixed(v))
	}
	b = binary.AppendVarint(b, signedFixed(c.Error))
	b = binary.AppendVarint(b, signedFixed(c.Adjustment))
	return binary.AppendVarint(b, signedFixed(c.Height))
}

func fixed(v, scale float64) uint64 {
	if !(v > 0) {
		return 0
	}
	return uint64(min(math.Round(v*scale), maxFixed))
}

func signedFixed(v float64) int64 {
	x := math.Round(v * coordScale)
	return int64(max(min(x, maxFixed), -maxFixed))
}

// DecodeReport decodes and checks a report. Errors wrap ErrCorrupt.
func DecodeReport(b []byte) (Report, error) {
	if len(b) > MaxReportBytes {
		return Report{}, fmt.Errorf("%w: %d bytes, at most %d", ErrCorrupt, len(b), MaxReportBytes)
	}
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != Version && !d.Failed() {
		return Report{}, fmt.Errorf("%w: version %d, want %d", ErrCorrupt, v, Version)
	}
	var r Report
	r.Node = d.Str()
	r.Incarnation, r.Seq = d.Uvarint(), d.Uvarint()
	r.Window = time.Duration(bounded(&d, uint64(MaxWindow)))
	r.Coord = decodeCoord(&d)
	r.Load.CPU = float64(bounded(&d, MaxUtilisation*utilScale)) / utilScale
	r.Load.Memory = float64(bounded(&d, MaxUtilisation*utilScale)) / utilScale
	r.Load.Network = float64(bounded(&d, MaxUtilisation*utilScale)) / utilScale
	r.Load.MsgIn = float64(bounded(&d, maxFixed-1)) / rateScale
	r.Load.MsgOut = float64(bounded(&d, maxFixed-1)) / rateScale
	// A topic takes at least 7 bytes: its name's length and one byte, and
	// three one-byte numbers per side.
	n := d.Count(7)
	if n > MaxReportTopics {
		d.Fail()
	}
	if n > 0 && !d.Failed() {
		r.Topics = make([]TopicReport, n)
	}
	for i := 0; i < n && !d.Failed(); i++ {
		t := &r.Topics[i]
		t.Topic = d.Str()
		t.Producers, t.Consumers = decodeSide(&d), decodeSide(&d)
	}
	if err := d.Finish(); err != nil {
		return Report{}, fmt.Errorf("%w: %w", ErrCorrupt, err)
	}
	if err := r.Validate(); err != nil {
		return Report{}, err
	}
	return r, nil
}

// bounded reads a uvarint no larger than limit.
func bounded(d *wire.Decoder, limit uint64) uint64 {
	v := d.Uvarint()
	if v > limit {
		d.Fail()
		return 0
	}
	return v
}

func decodeSide(d *wire.Decoder) Side {
	return Side{
		Count:  int(bounded(d, math.MaxUint32)),
		MaxRTT: time.Duration(bounded(d, maxFixed)),
		Rate:   float64(bounded(d, maxFixed-1)) / rateScale,
	}
}

func decodeCoord(d *wire.Decoder) *coordinate.Coordinate {
	switch d.Byte() {
	case 0:
		return nil
	case 1:
	default:
		d.Fail()
		return nil
	}
	dims := bounded(d, MaxDims)
	if dims == 0 || d.Failed() {
		d.Fail()
		return nil
	}
	c := &coordinate.Coordinate{Vec: make([]float64, dims)}
	for i := range c.Vec {
		c.Vec[i] = coordValue(d)
	}
	c.Error, c.Adjustment, c.Height = coordValue(d), coordValue(d), coordValue(d)
	return c
}

func coordValue(d *wire.Decoder) float64 {
	v := d.Varint()
	if v > maxFixed || v < -maxFixed {
		d.Fail()
		return 0
	}
	return float64(v) / coordScale
}
