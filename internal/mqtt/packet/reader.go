package packet

import (
	"errors"
	"io"
	"strconv"
	"sync"
)

// Buffer sizes of a Reader.
const (
	// smallBuffer is what an idle connection holds: enough for a burst of
	// small packets per read.
	smallBuffer = 512
	// shrinkAfter is the packet size above which the Reader returns to its
	// small buffer once the packet has been consumed.
	shrinkAfter = 64 << 10
	// minGrow is the smallest buffer a Reader grows to.
	minGrow = 4096
	// maxEmptyReads bounds consecutive (0, nil) reads before giving up.
	maxEmptyReads = 100
	// burstBuffer is the pooled buffer a busy connection reads into: when a
	// read fills the small buffer, more bytes are waiting, and reading them
	// in few large reads saves system calls.
	burstBuffer = 32 << 10
)

var burstPool = sync.Pool{New: func() any { b := make([]byte, burstBuffer); return &b }}

// Reader decodes a stream of packets from an io.Reader. It buffers on its
// own (do not wrap the source in a bufio.Reader): one buffer that starts at
// 512 bytes, takes in as many bytes as each read returns (so many small
// packets cost one read), grows to fit a larger packet as its bytes arrive,
// and returns to the small buffer after a packet over 64 KiB.
//
// The packet returned by Next, and every byte slice in it, may alias the
// Reader's buffer and its reusable PUBLISH and ack values: it is valid only
// until the next call to Next. Strings are copies and stay valid.
//
// A Reader belongs to one goroutine.
type Reader struct {
	src     io.Reader
	maxSize uint32
	version Version

	buf   []byte // buf[r:w] is read but not yet decoded
	small []byte // the initial buffer, returned to after a large packet
	r, w  int
	big   bool    // the last packet was over shrinkAfter
	burst *[]byte // the pooled buffer buf is, while the connection is busy
	short bool    // the last read returned less than a quarter of the buffer
	err   error   // sticky codec error, or io.EOF
	rerr  error   // error returned by src together with data, reported after it

	d decoder
}

// NewReader returns a Reader of src that rejects packets larger than maxSize
// bytes (counting the fixed header). maxSize 0 means the protocol's limit,
// MaxPacketSize.
func NewReader(src io.Reader, maxSize uint32) *Reader {
	small := make([]byte, smallBuffer)
	return &Reader{src: src, maxSize: maxSize, buf: small, small: small, d: decoder{reuse: true}}
}

// PeekType returns the type of the next buffered packet, if any byte of it
// is buffered (without decoding or validating anything).
func (r *Reader) PeekType() (Type, bool) {
	if r.w == r.r {
		return 0, false
	}
	return Type(r.buf[r.r] >> 4), true
}

// Space returns the free end of the buffer, for a caller that reads from
// the source itself and then calls Wrote. A server does this when Buffered
// is 0, to wait for a connection's next bytes in its own shallow stack
// frame: a goroutine parked deep inside Next keeps a larger stack for as
// long as the connection stays idle.
func (r *Reader) Space() []byte {
	if r.r > 0 {
		n := copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, n
	}
	return r.buf[r.w:]
}

// Wrote records that a read into Space's slice returned n and err. An error
// that came with data is reported by Next once that data is decoded.
func (r *Reader) Wrote(n int, err error) {
	if n < 0 || n > len(r.buf)-r.w {
		return
	}
	r.w += n
	if n > 0 {
		r.rerr = err
		r.afterRead(n, true)
	}
}

// SetVersion sets the protocol version the following packets are decoded
// with. Until it is set, or a CONNECT is decoded (which sets it to that
// CONNECT's level), only CONNECT is accepted.
func (r *Reader) SetVersion(v Version) { r.version = v }

// Version returns the protocol version in use, 0 before CONNECT.
func (r *Reader) Version() Version { return r.version }

// SetMaxSize changes the largest packet accepted (0: the protocol limit),
// for example after CONNECT negotiated a Maximum Packet Size.
func (r *Reader) SetMaxSize(n uint32) { r.maxSize = n }

// Buffered returns the number of bytes read from the source but not yet
// decoded.
func (r *Reader) Buffered() int { return r.w - r.r }

// Next reads and decodes the next packet. It returns io.EOF when the stream
// ends between packets and io.ErrUnexpectedEOF when it ends inside one. A
// packet larger than the maximum size is rejected from its fixed header,
// before its body is read, with an error wrapping ErrTooLarge.
//
// Codec errors (wrapping ErrMalformed, ErrProtocol, ErrTooLarge or
// ErrUnsupportedVersion) and end of stream are final: later calls return the
// same error. Other errors of the source (a read deadline, say) are returned
// as they are, and a later call resumes where this one stopped.
func (r *Reader) Next() (Packet, error) {
	if r.err != nil {
		return nil, r.err
	}
	p, err := r.next()
	if err != nil {
		var ce *Error
		if errors.As(err, &ce) || err == io.EOF || err == io.ErrUnexpectedEOF {
			r.err = err
		}
		return nil, err
	}
	return p, nil
}

func (r *Reader) next() (Packet, error) {
	if r.burst != nil && r.r == r.w && r.short {
		// Quiet again: give the burst buffer back.
		burstPool.Put(r.burst)
		r.burst, r.buf, r.r, r.w = nil, r.small, 0, 0
	}
	if r.big {
		// The previous packet is dead: go back to the small buffer if what
		// is left fits.
		if n := r.w - r.r; n <= len(r.small) {
			copy(r.small, r.buf[r.r:r.w])
			r.buf, r.r, r.w, r.big = r.small, 0, n, false
		}
	}
	var h header
	for {
		avail := r.buf[r.r:r.w]
		if len(avail) > 0 && r.version == 0 && Type(avail[0]>>4) != CONNECT {
			return nil, protocolErr(Type(avail[0]>>4).String() + " before CONNECT")
		}
		var err error
		if h, err = parseHeader(avail); err == nil {
			break
		}
		if err != io.ErrUnexpectedEOF {
			return nil, err
		}
		if err := r.fill(true); err != nil {
			return nil, err
		}
	}
	total := h.n + h.rl
	if limit := r.limit(); uint64(total) > limit {
		return nil, &Error{Code: PacketTooLarge, Msg: h.typ.String() + ": packet of " + strconv.Itoa(total) +
			" bytes exceeds the maximum of " + strconv.FormatUint(limit, 10), kind: ErrTooLarge}
	}
	for r.w-r.r < total {
		if r.w-r.r == len(r.buf) {
			r.grow(total)
		}
		// A large announced packet grows the buffer only as its bytes
		// arrive (grow); the burst buffer is for streams of small ones.
		if err := r.fill(total <= burstBuffer); err != nil {
			return nil, err
		}
	}
	body := r.buf[r.r+h.n : r.r+total : r.r+total]
	r.r += total
	r.big = total > shrinkAfter
	p, err := r.d.decode(h, body, r.version)
	if err != nil {
		return nil, err
	}
	if c, ok := p.(*Connect); ok && r.version == 0 {
		r.version = c.Version
	}
	return p, nil
}

func (r *Reader) limit() uint64 {
	if r.maxSize == 0 || r.maxSize > MaxPacketSize {
		return MaxPacketSize
	}
	return uint64(r.maxSize)
}

// grow replaces a full buffer by a larger one for a packet of total bytes.
// The buffer at most doubles per step, so its size follows the bytes that
// actually arrive rather than the length a peer announces.
func (r *Reader) grow(total int) {
	size := min(max(2*len(r.buf), minGrow), total)
	nb := make([]byte, size)
	n := copy(nb, r.buf[r.r:r.w])
	if r.burst != nil {
		burstPool.Put(r.burst)
		r.burst = nil
	}
	r.buf, r.r, r.w = nb, 0, n
}

// fill reads once from the source into the free end of the buffer, first
// moving unread bytes to the front. A read that fills a small buffer moves
// the Reader to a pooled burst buffer when allowBurst is set.
func (r *Reader) fill(allowBurst bool) error {
	if r.r > 0 {
		n := copy(r.buf, r.buf[r.r:r.w])
		r.r, r.w = 0, n
	}
	if r.rerr != nil {
		err := r.rerr
		r.rerr = nil
		return r.eof(err)
	}
	for range maxEmptyReads {
		n, err := r.src.Read(r.buf[r.w:])
		if n < 0 || n > len(r.buf)-r.w {
			return errors.New("packet: source returned an invalid count")
		}
		r.w += n
		if n > 0 {
			r.rerr = err
			r.afterRead(n, allowBurst)
			return nil
		}
		if err != nil {
			return r.eof(err)
		}
	}
	return io.ErrNoProgress
}

// afterRead notes a read of n bytes: a read that filled the small buffer
// moves the Reader to a pooled burst buffer (when allowed).
func (r *Reader) afterRead(n int, allowBurst bool) {
	r.short = n < len(r.buf)/4
	if allowBurst && r.w == len(r.buf) && len(r.buf) < burstBuffer && !r.big && r.smallNext() {
		bp := burstPool.Get().(*[]byte)
		m := copy(*bp, r.buf[r.r:r.w])
		r.buf, r.r, r.w, r.burst, r.short = *bp, 0, m, bp, false
	}
}

// smallNext reports whether the next buffered packet announces a size that
// fits the burst buffer: a peer announcing one huge packet gets a buffer that
// grows only as its bytes arrive.
func (r *Reader) smallNext() bool {
	h, err := parseHeader(r.buf[r.r:r.w])
	return err == nil && h.n+h.rl <= burstBuffer
}

// eof turns io.EOF inside a packet into io.ErrUnexpectedEOF.
func (r *Reader) eof(err error) error {
	if err == io.EOF && r.w > r.r {
		return io.ErrUnexpectedEOF
	}
	return err
}
