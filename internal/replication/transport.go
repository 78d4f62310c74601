package replication

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/netx"
)

// Kind is the first byte of every group connection on a node's cluster
// address; the node's first-byte multiplexer routes connections starting
// with it to the Engine's listener.
const Kind byte = 'D'

// A group connection, after Kind (in the clear, for the multiplexer) and
// the TLS handshake when the cluster uses TLS, carries a hello:
//
//	version (1 byte, helloVersion)
//	from node id, to node id, group id: each a length byte and the bytes
//
// The accepting engine answers with one status byte, then the stream is
// Raft's. The dialler does not wait for the status: Raft writes its first
// request at once and reads the status just before the response (see
// ackConn), so a new connection costs no extra round trip. The hello is
// sent inside TLS because group ids derive from topic names.
const helloVersion = 1

// Status bytes answering a hello.
const (
	statusOK byte = iota
	statusUnknownGroup
	statusWrongNode
	statusBadHello

	statusNone byte = 0xff // not sent: the connection is closed without an answer
)

func statusText(s byte) string {
	switch s {
	case statusUnknownGroup:
		return "the node does not run the group"
	case statusWrongNode:
		return "the address belongs to another node"
	case statusBadHello:
		return "the node could not parse the hello"
	}
	return fmt.Sprintf("status %d", s)
}

// helloTimeout bounds how long an accepted connection may take to send
// its kind byte, finish TLS and send its hello.
const helloTimeout = 10 * time.Second

// hello opens a group connection.
type hello struct {
	from, to string
	group    GroupID
}

func (h hello) append(b []byte) []byte {
	b = append(b, helloVersion)
	for _, s := range []string{h.from, h.to, string(h.group)} {
		b = append(b, byte(len(s)))
		b = append(b, s...)
	}
	return b
}

var errBadHello = errors.New("replication: bad hello")

// readHello reads a hello from r, consuming exactly its bytes.
func readHello(r io.Reader) (hello, error) {
	var b [1 + maxIDLen]byte
	if _, err := io.ReadFull(r, b[:1]); err != nil {
		return hello{}, fmt.Errorf("%w: %w", errBadHello, err)
	}
	if b[0] != helloVersion {
		return hello{}, fmt.Errorf("%w: version %d, want %d", errBadHello, b[0], helloVersion)
	}
	var fields [3]string
	for i := range fields {
		if _, err := io.ReadFull(r, b[:1]); err != nil {
			return hello{}, fmt.Errorf("%w: %w", errBadHello, err)
		}
		n := int(b[0])
		if n == 0 {
			return hello{}, fmt.Errorf("%w: empty field %d", errBadHello, i)
		}
		if _, err := io.ReadFull(r, b[:n]); err != nil {
			return hello{}, fmt.Errorf("%w: %w", errBadHello, err)
		}
		fields[i] = string(b[:n])
	}
	h := hello{from: fields[0], to: fields[1], group: GroupID(fields[2])}
	if err := h.group.Validate(); err != nil {
		return hello{}, fmt.Errorf("%w: %w", errBadHello, err)
	}
	return h, nil
}

// Raft addresses are "nodeID@addr": the node id travels in the hello, so a
// connection that reaches another node at a reused address is refused
// instead of delivering votes to the wrong replica.
func raftAddress(id, addr string) raft.ServerAddress { return raft.ServerAddress(id + "@" + addr) }

func splitAddress(a raft.ServerAddress) (id, addr string) {
	s := string(a)
	i := strings.LastIndexByte(s, '@')
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+1:]
}

// layer is one group's raft.StreamLayer. Accept yields the connections the
// engine's accept loop routed to the group; Dial opens connections to other
// replicas. Its Streams track every connection, so that Close (called when
// the group's transport closes) ends them and the goroutines reading them.
type layer struct {
	*netx.Streams
	// immutable
	local  string // this node's id
	addr   raftAddr
	group  GroupID
	dial   DialFunc
	tls    *tls.Config
	ctx    context.Context // ends at Close: aborts dials in progress
	cancel context.CancelFunc
}

var _ raft.StreamLayer = (*layer)(nil)

func newLayer(local, addr string, group GroupID, dial DialFunc, tlsCfg *tls.Config) *layer {
	l := &layer{
		Streams: netx.NewStreams("replication: group " + string(group)),
		local:   local, addr: raftAddr(raftAddress(local, addr)), group: group,
		dial: dial, tls: tlsCfg,
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// Dial opens a group connection to address ("nodeID@addr").
func (l *layer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.Done():
		return nil, l.ErrClosed()
	default:
	}
	to, addr := splitAddress(address)
	ctx, cancel := context.WithTimeout(l.ctx, timeout)
	defer cancel()
	c, err := l.dial(ctx, addr)
	if err != nil {
		return nil, fmt.Errorf("replication: group %s: dial %s: %w", l.group, address, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write([]byte{Kind}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("replication: group %s: dial %s: %w", l.group, address, err)
	}
	if c, err = netx.Secure(ctx, c, l.tls, false); err != nil {
		return nil, fmt.Errorf("replication: group %s: dial %s: %w", l.group, address, err)
	}
	if _, err := c.Write(hello{from: l.local, to: to, group: l.group}.append(nil)); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("replication: group %s: dial %s: %w", l.group, address, err)
	}
	_ = c.SetDeadline(time.Time{})
	return l.Track(&ackConn{Conn: c, group: l.group, remote: string(address)})
}

// Close stops Accept, aborts dials in progress and closes every connection
// of the group.
func (l *layer) Close() error {
	l.cancel()
	l.Streams.Close()
	return nil
}

// Addr is this replica's Raft address.
func (l *layer) Addr() net.Addr { return l.addr }

type raftAddr string

func (a raftAddr) Network() string { return "replication" }
func (a raftAddr) String() string  { return string(a) }

// ackConn is a dialled connection whose first byte to read is the
// accepting engine's status for the hello.
type ackConn struct {
	net.Conn
	group  GroupID
	remote string

	mu    sync.Mutex
	acked bool
}

func (c *ackConn) Read(b []byte) (int, error) {
	c.mu.Lock()
	if !c.acked {
		var s [1]byte
		if _, err := io.ReadFull(c.Conn, s[:]); err != nil {
			c.mu.Unlock()
			return 0, err
		}
		if s[0] != statusOK {
			c.mu.Unlock()
			return 0, fmt.Errorf("%w: group %s at %s: %s", ErrRefused, c.group, c.remote, statusText(s[0]))
		}
		c.acked = true
	}
	c.mu.Unlock()
	return c.Conn.Read(b)
}
