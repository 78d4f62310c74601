package placement

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

// ErrCorrupt is returned when a monitoring report cannot be decoded.
var ErrCorrupt = errors.New("placement: corrupt report")

// Report kinds (first byte).
const (
	kindSummary byte = 1
	kindClients byte = 2
)

// maxDims bounds the dimensionality a decoder accepts.
const maxDims = 64

// AppendSummary appends the binary monitoring report of one topic with its
// summary, as a home sends it each period. Numbers are fixed-width, so its
// length depends only on the topic name, the lengths of the node IDs it
// names and the coordinate dimensionality, never on the number of clients.
func AppendSummary(b []byte, topic string, s Summary) []byte {
	b = append(b, kindSummary)
	b = appendString(b, topic)
	b = appendSide(b, &s.Producers)
	b = appendSide(b, &s.Consumers)
	b = binary.LittleEndian.AppendUint64(b, uint64(max(s.Worst, 0)))
	b = appendString(b, string(s.Publisher))
	b = appendFloat(b, s.Rates.In)
	return appendFloat(b, s.Rates.Out)
}

// appendSide writes a Side. The node ID is the only variable-length field;
// it is empty or one node's ID, whatever the number of clients.
func appendSide(b []byte, s *Side) []byte {
	b = appendCoord(b, s.Centroid)
	b = binary.LittleEndian.AppendUint64(b, uint64(max(s.Deviation, 0)))
	b = appendCoord(b, s.Center)
	b = binary.LittleEndian.AppendUint64(b, uint64(max(s.Radius, 0)))
	b = appendString(b, string(s.Node))
	b = binary.LittleEndian.AppendUint64(b, uint64(max(s.Access, 0)))
	return binary.LittleEndian.AppendUint32(b, uint32(min(max(s.Count, 0), math.MaxUint32)))
}

func (d *decoder) side() Side {
	var s Side
	s.Centroid = d.coord()
	s.Deviation = d.fixedDuration()
	s.Center = d.coord()
	s.Radius = d.fixedDuration()
	s.Node = NodeID(d.string())
	s.Access = d.fixedDuration()
	s.Count = d.fixedCount()
	return s
}

// DecodeSummary decodes a report written by AppendSummary. It rejects
// truncated input, trailing bytes, invalid coordinates and negative values.
func DecodeSummary(b []byte) (string, Summary, error) {
	d := decoder{b: b}
	var s Summary
	if d.byte() != kindSummary {
		return "", Summary{}, fmt.Errorf("%w: not a summary report", ErrCorrupt)
	}
	topic := d.string()
	s.Producers = d.side()
	s.Consumers = d.side()
	s.Worst = d.fixedDuration()
	s.Publisher = NodeID(d.string())
	s.Rates.In = d.rate()
	s.Rates.Out = d.rate()
	if err := d.finish(); err != nil {
		return "", Summary{}, err
	}
	return topic, s, nil
}

// AppendClients appends the all-pairs alternative to AppendSummary: instead
// of centroids and deviation it carries every client's coordinate, so its
// length grows with the number of clients. Only the clients' coordinates are
// sent.
func AppendClients(b []byte, topic string, worst time.Duration, rates Rates, c Clients) []byte {
	b = append(b, kindClients)
	b = appendString(b, topic)
	b = binary.AppendUvarint(b, uint64(max(worst, 0)))
	b = appendFloat(b, rates.In)
	b = appendFloat(b, rates.Out)
	for _, list := range [][]Client{c.Producers, c.Consumers} {
		b = binary.AppendUvarint(b, uint64(len(list)))
		for i := range list {
			b = appendCoord(b, list[i].Coord)
		}
	}
	return b
}

// DecodeClients decodes a report written by AppendClients; the clients carry
// only their coordinates.
func DecodeClients(b []byte) (topic string, worst time.Duration, rates Rates, c Clients, err error) {
	d := decoder{b: b}
	if d.byte() != kindClients {
		return "", 0, Rates{}, Clients{}, fmt.Errorf("%w: not a clients report", ErrCorrupt)
	}
	topic = d.string()
	worst = d.duration()
	rates.In, rates.Out = d.rate(), d.rate()
	for _, list := range []*[]Client{&c.Producers, &c.Consumers} {
		n := d.count()
		for i := 0; i < n && d.err == nil; i++ {
			coord := d.coord()
			if coord == nil && d.err == nil {
				d.fail("client without coordinate")
			}
			*list = append(*list, Client{Coord: coord})
		}
	}
	if err := d.finish(); err != nil {
		return "", 0, Rates{}, Clients{}, err
	}
	return topic, worst, rates, c, nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func appendFloat(b []byte, v float64) []byte {
	return binary.LittleEndian.AppendUint64(b, math.Float64bits(v))
}

// appendCoord writes 0 for nil, else 1, the dimensionality, the vector, and
// the error, adjustment and height.
func appendCoord(b []byte, c *coordinate.Coordinate) []byte {
	if c == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(c.Vec)))
	for _, v := range c.Vec {
		b = appendFloat(b, v)
	}
	b = appendFloat(b, c.Error)
	b = appendFloat(b, c.Adjustment)
	return appendFloat(b, c.Height)
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(why string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrCorrupt, why)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("bad varint")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail("truncated string")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) float() float64 {
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := math.Float64frombits(binary.LittleEndian.Uint64(d.b))
	d.b = d.b[8:]
	if math.IsNaN(v) || math.IsInf(v, 0) {
		d.fail("non-finite number")
		return 0
	}
	return v
}

func (d *decoder) rate() float64 {
	v := d.float()
	if v < 0 {
		d.fail("negative rate")
	}
	return v
}

func (d *decoder) duration() time.Duration {
	v := d.uvarint()
	if v > math.MaxInt64 {
		d.fail("duration out of range")
		return 0
	}
	return time.Duration(v)
}

func (d *decoder) fixedDuration() time.Duration {
	if len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint64(d.b)
	d.b = d.b[8:]
	if v > math.MaxInt64 {
		d.fail("duration out of range")
		return 0
	}
	return time.Duration(v)
}

func (d *decoder) fixedCount() int {
	if len(d.b) < 4 {
		d.fail("truncated")
		return 0
	}
	v := binary.LittleEndian.Uint32(d.b)
	d.b = d.b[4:]
	return int(v)
}

func (d *decoder) count() int {
	v := d.uvarint()
	if v > uint64(len(d.b)) { // every counted item takes at least one byte
		d.fail("count out of range")
		return 0
	}
	return int(v)
}

func (d *decoder) coord() *coordinate.Coordinate {
	switch d.byte() {
	case 0:
		return nil
	case 1:
	default:
		d.fail("bad coordinate flag")
		return nil
	}
	dims := d.uvarint()
	if dims == 0 || dims > maxDims || dims*8+24 > uint64(len(d.b)) {
		d.fail("bad dimensionality")
		return nil
	}
	c := &coordinate.Coordinate{Vec: make([]float64, dims)}
	for i := range c.Vec {
		c.Vec[i] = d.float()
	}
	c.Error, c.Adjustment, c.Height = d.float(), d.float(), d.float()
	if d.err != nil {
		return nil
	}
	return c
}

func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d trailing bytes", ErrCorrupt, len(d.b))
	}
	return nil
}
