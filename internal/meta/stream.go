package meta

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/netx"
)

// Connection kinds: the first byte of every connection to the group.
const (
	kindRaft    byte = 'R'
	kindForward byte = 'F'
)

// helloTimeout bounds how long an accepted connection may take to send its
// kind byte.
const helloTimeout = 10 * time.Second

// raftLayer is the raft.StreamLayer over the group's listener: Accept yields
// the connections the accept loop classified as Raft's, Dial sends the kind
// byte first. Its Streams track every connection, so that Close (called
// when Raft's transport closes) ends them and the goroutines reading them.
type raftLayer struct {
	*netx.Streams
	addr net.Addr
	dial netx.DialFunc
	tls  *tls.Config // nil: plain
}

var _ raft.StreamLayer = (*raftLayer)(nil)

func newRaftLayer(addr string, dial netx.DialFunc, tlsCfg *tls.Config) *raftLayer {
	return &raftLayer{Streams: netx.NewStreams("meta: raft stream layer"), addr: stringAddr(addr), dial: dial, tls: tlsCfg}
}

// Dial opens a Raft connection to address.
func (l *raftLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	select {
	case <-l.Done():
		return nil, l.ErrClosed()
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c, err := l.dial(ctx, string(address))
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write([]byte{kindRaft}); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("meta: raft dial %s: %w", address, err)
	}
	if c, err = netx.Secure(ctx, c, l.tls, false); err != nil {
		return nil, fmt.Errorf("meta: raft dial %s: %w", address, err)
	}
	_ = c.SetDeadline(time.Time{})
	return l.Track(c)
}

// Close stops Accept and closes every Raft connection.
func (l *raftLayer) Close() error {
	l.Streams.Close()
	return nil
}

// Addr is the group address of this node.
func (l *raftLayer) Addr() net.Addr { return l.addr }

type stringAddr string

func (a stringAddr) Network() string { return "meta" }
func (a stringAddr) String() string  { return string(a) }

// acceptLoop classifies inbound connections until the listener closes.
func (m *Meta) acceptLoop(ctx context.Context) {
	netx.Accept(ctx, m.cfg.Listener, nil, m.logger.With("listener", "meta"), func(c net.Conn) bool {
		if !m.group.Go(func(ctx context.Context) { m.classify(ctx, c) }) {
			_ = c.Close()
			return false
		}
		return true
	})
}

// classify reads the kind byte and routes the connection.
func (m *Meta) classify(ctx context.Context, c net.Conn) {
	_ = c.SetReadDeadline(time.Now().Add(helloTimeout))
	var kind [1]byte
	if _, err := io.ReadFull(c, kind[:]); err != nil {
		_ = c.Close()
		return
	}
	if kind[0] == kindRaft || kind[0] == kindForward {
		hctx, cancel := context.WithTimeout(ctx, helloTimeout)
		remote := c.RemoteAddr()
		var err error
		c, err = netx.Secure(hctx, c, m.cfg.TLS, true)
		cancel()
		if err != nil {
			m.logger.Warn("meta: refused a connection", "remote", remote, "err", err)
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	switch kind[0] {
	case kindRaft:
		if !m.layer.Offer(ctx, c) {
			_ = c.Close()
		}
	case kindForward:
		m.serveForward(ctx, c)
	default:
		m.logger.Warn("meta: unknown connection kind", "kind", kind[0], "remote", c.RemoteAddr())
		_ = c.Close()
	}
}
