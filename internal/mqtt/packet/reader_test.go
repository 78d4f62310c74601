package packet

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"testing"
	"testing/iotest"
)

func mustAppend(t testing.TB, p Packet, v Version) []byte {
	t.Helper()
	b, err := p.Append(nil, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// countingReader serves data in chunks of at most chunk bytes and counts
// the reads; after the data it returns err (io.EOF if nil).
type countingReader struct {
	data  []byte
	chunk int
	reads int
	err   error
}

func (c *countingReader) Read(p []byte) (int, error) {
	c.reads++
	if len(c.data) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		return 0, io.EOF
	}
	n := min(len(p), len(c.data), c.chunk)
	copy(p, c.data[:n])
	c.data = c.data[n:]
	return n, nil
}

func stream(t testing.TB, v Version, ps ...Packet) []byte {
	var b []byte
	for _, p := range ps {
		b = append(b, mustAppend(t, p, v)...)
	}
	return b
}

func TestReaderStream(t *testing.T) {
	connect := &Connect{ProtocolName: "MQTT", Version: V5, ClientID: "c", KeepAlive: 5}
	ps := []Packet{connect}
	for i := 1; i <= 200; i++ {
		ps = append(ps, &Publish{QoS: 1, PacketID: uint16(i), Topic: "a/b", Payload: bytes.Repeat([]byte{byte(i)}, i*7)})
		ps = append(ps, &Ack{Kind: PUBACK, PacketID: uint16(i)})
	}
	ps = append(ps, &Disconnect{})
	data := stream(t, V5, ps...)
	sources := map[string]func() io.Reader{
		"whole":    func() io.Reader { return bytes.NewReader(data) },
		"one byte": func() io.Reader { return iotest.OneByteReader(bytes.NewReader(data)) },
		"half":     func() io.Reader { return iotest.HalfReader(bytes.NewReader(data)) },
		"data+EOF": func() io.Reader { return iotest.DataErrReader(bytes.NewReader(data)) },
	}
	for name, src := range sources {
		t.Run(name, func(t *testing.T) {
			r := NewReader(src(), 0)
			for i, want := range ps {
				got, err := r.Next()
				if err != nil {
					t.Fatalf("packet %d: %v", i, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("packet %d: %v, want %v", i, got, want)
				}
			}
			if r.Version() != V5 {
				t.Fatalf("version after CONNECT: %v", r.Version())
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("at end: %v", err)
			}
			if _, err := r.Next(); err != io.EOF {
				t.Fatalf("after end: %v", err)
			}
		})
	}
}

func TestReaderManyPacketsPerRead(t *testing.T) {
	data := stream(t, V311, &Pingreq{}, &Pingreq{}, &Pingreq{}, &Pingreq{}, &Pingreq{}, &Pingreq{}, &Pingreq{}, &Pingreq{})
	src := &countingReader{data: data, chunk: 1 << 20}
	r := NewReader(src, 0)
	r.SetVersion(V311)
	for range 8 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if src.reads != 1 {
		t.Fatalf("%d reads for 8 small packets, want 1", src.reads)
	}
}

func TestReaderTooLargeBeforeBody(t *testing.T) {
	p := &Publish{Topic: "t", Payload: make([]byte, 1000)}
	data := mustAppend(t, p, V311)
	// The source holds only the fixed header: the Reader must decide
	// without asking for the body.
	src := &countingReader{data: data[:3], chunk: 3, err: errors.New("body was read")}
	r := NewReader(src, 1000)
	r.SetVersion(V311)
	_, err := r.Next()
	if !errors.Is(err, ErrTooLarge) || CodeOf(err) != PacketTooLarge {
		t.Fatalf("Next: %v, want ErrTooLarge", err)
	}
	if len(r.buf) > smallBuffer {
		t.Fatalf("buffer grew to %d for a rejected packet", len(r.buf))
	}
	if _, err2 := r.Next(); err2 != err {
		t.Fatalf("error not sticky: %v", err2)
	}
	// The limit counts the whole packet: 1006 bytes pass at 1006.
	r = NewReader(bytes.NewReader(data), uint32(len(data)))
	r.SetVersion(V311)
	if _, err := r.Next(); err != nil {
		t.Fatalf("packet of exactly the maximum size: %v", err)
	}
	r = NewReader(bytes.NewReader(data), uint32(len(data)-1))
	r.SetVersion(V311)
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("one byte over: %v", err)
	}
	// SetMaxSize applies to the next packet.
	r = NewReader(bytes.NewReader(append(bytes.Clone(data), data...)), 0)
	r.SetVersion(V311)
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	r.SetMaxSize(100)
	if _, err := r.Next(); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("after SetMaxSize: %v", err)
	}
}

func TestReaderEOF(t *testing.T) {
	data := mustAppend(t, &Publish{Topic: "a/b", Payload: []byte("payload")}, V311)
	for cut := 1; cut < len(data); cut++ {
		r := NewReader(bytes.NewReader(data[:cut]), 0)
		r.SetVersion(V311)
		if _, err := r.Next(); err != io.ErrUnexpectedEOF {
			t.Fatalf("cut at %d: %v, want io.ErrUnexpectedEOF", cut, err)
		}
	}
	r := NewReader(bytes.NewReader(nil), 0)
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("empty stream: %v", err)
	}
}

func TestReaderBeforeConnect(t *testing.T) {
	// A PUBLISH first is refused from its first byte, before its body.
	src := &countingReader{data: []byte{0x30}, chunk: 1, err: errors.New("read too far")}
	r := NewReader(src, 0)
	if _, err := r.Next(); !errors.Is(err, ErrProtocol) {
		t.Fatalf("PUBLISH before CONNECT: %v", err)
	}
	// A 3.1.1 CONNECT sets the version: a 3.1.1 PUBACK then decodes, and
	// a v5-only form does not.
	data := stream(t, V311, &Connect{ClientID: "c"}, &Ack{Kind: PUBACK, PacketID: 1})
	data = append(data, 0x40, 0x03, 0x00, 0x01, 0x10)
	r = NewReader(bytes.NewReader(data), 0)
	for range 2 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
	}
	if r.Version() != V311 {
		t.Fatalf("version %v", r.Version())
	}
	if _, err := r.Next(); !errors.Is(err, ErrMalformed) {
		t.Fatalf("v5 PUBACK on a 3.1.1 stream: %v", err)
	}
}

// TestReaderTransientError checks that a source error that is not end of
// stream (a deadline, say) can be retried without losing data.
func TestReaderTransientError(t *testing.T) {
	data := mustAppend(t, &Publish{Topic: "a", Payload: []byte("xyz")}, V311)
	errDeadline := errors.New("deadline")
	src := &flakyReader{data: data, failAt: 3, err: errDeadline}
	r := NewReader(src, 0)
	r.SetVersion(V311)
	if _, err := r.Next(); err != errDeadline {
		t.Fatalf("first Next: %v", err)
	}
	p, err := r.Next()
	if err != nil || p.(*Publish).Topic != "a" {
		t.Fatalf("retry: %v, %v", p, err)
	}
}

type flakyReader struct {
	data   []byte
	failAt int
	err    error
	off    int
}

func (f *flakyReader) Read(p []byte) (int, error) {
	if f.off == f.failAt && f.err != nil {
		err := f.err
		f.err = nil
		return 0, err
	}
	end := len(f.data)
	if f.off < f.failAt && f.err != nil {
		end = f.failAt
	}
	if f.off >= end {
		return 0, io.EOF
	}
	n := copy(p, f.data[f.off:end])
	f.off += n
	return n, nil
}

func TestReaderBufferSizes(t *testing.T) {
	small := mustAppend(t, &Publish{Topic: "t", Payload: make([]byte, 10)}, V311)
	mid := mustAppend(t, &Publish{Topic: "t", Payload: make([]byte, 10_000)}, V311)
	big := mustAppend(t, &Publish{Topic: "t", Payload: make([]byte, 100_000)}, V311)
	var data []byte
	for _, b := range [][]byte{small, mid, small, big, small, small} {
		data = append(data, b...)
	}
	r := NewReader(&countingReader{data: data, chunk: 300}, 0)
	r.SetVersion(V311)
	if len(r.buf) > 512 {
		t.Fatalf("initial buffer %d", len(r.buf))
	}
	sizes := []int{}
	for range 6 {
		if _, err := r.Next(); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(r.buf))
	}
	// small: 512; mid: grown (≤ 64 KiB kept); small: kept; big: grown to
	// the packet; small: back to 512.
	if sizes[0] != smallBuffer || sizes[1] <= smallBuffer || sizes[2] != sizes[1] ||
		sizes[3] < len(big) || sizes[4] != smallBuffer || sizes[5] != smallBuffer {
		t.Fatalf("buffer sizes %v", sizes)
	}
}

// TestReaderGrowsWithArrivingBytes checks that a peer announcing a large
// packet and sending little does not make the Reader allocate the
// announced size.
func TestReaderGrowsWithArrivingBytes(t *testing.T) {
	hdr := []byte{0x30, 0xff, 0xff, 0x3f} // PUBLISH, remaining length 1048575
	data := append(hdr, make([]byte, 3000)...)
	r := NewReader(bytes.NewReader(data), 0)
	r.SetVersion(V311)
	if _, err := r.Next(); err != io.ErrUnexpectedEOF {
		t.Fatalf("Next: %v", err)
	}
	if len(r.buf) > minGrow {
		t.Fatalf("buffer of %d bytes for 3004 bytes received", len(r.buf))
	}
}

func TestReaderAllocs(t *testing.T) {
	p := mustAppend(t, &Publish{Topic: "sensors/1/temp", Payload: make([]byte, 64)}, V311)
	q := mustAppend(t, &Publish{Topic: "sensors/2/temp", Payload: make([]byte, 64)}, V311)
	const n = 1000
	var same, alternating []byte
	for i := range n {
		same = append(same, p...)
		if i%2 == 0 {
			alternating = append(alternating, p...)
		} else {
			alternating = append(alternating, q...)
		}
	}
	for _, c := range []struct {
		name string
		data []byte
		max  float64
	}{{"same topic", same, 0}, {"changing topic", alternating, 1}} {
		src := bytes.NewReader(c.data)
		r := NewReader(src, 0)
		r.SetVersion(V311)
		allocs := testing.AllocsPerRun(n-1, func() {
			if _, err := r.Next(); err != nil {
				t.Fatal(err)
			}
		})
		if allocs > c.max {
			t.Errorf("%s: %v allocations per QoS 0 PUBLISH, want ≤ %v", c.name, allocs, c.max)
		}
	}
}

// TestReaderReusesValues documents the validity rule: the PUBLISH value
// and its payload are recycled by the next call to Next.
func TestReaderReusesValues(t *testing.T) {
	data := stream(t, V311, &Publish{Topic: "a", Payload: []byte("one")}, &Publish{Topic: "b", Payload: []byte("two")})
	r := NewReader(bytes.NewReader(data), 0)
	r.SetVersion(V311)
	p1, _ := r.Next()
	first := p1.(*Publish)
	topic := first.Topic
	p2, _ := r.Next()
	if p1 != p2 {
		t.Fatalf("PUBLISH value not reused")
	}
	if topic != "a" {
		t.Fatalf("topic string changed: %q", topic)
	}
}
