package membership

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/run"
)

// Transport carries memberlist's gossip over a datagram endpoint and a stream
// listener bound to the same "ip:port", and a dial function. Serf's own
// transport uses real sockets; this one lets tests put gossip on memnet.
type Transport struct {
	// immutable after NewTransport
	pc       net.PacketConn
	ln       net.Listener
	dial     netx.DialFunc
	ip       net.IP
	port     int
	logger   *slog.Logger
	packetCh chan *memberlist.Packet
	streamCh chan net.Conn
	group    *run.Group // the datagram reader and the accept loop

	once sync.Once
}

var _ memberlist.NodeAwareTransport = (*Transport)(nil)

// NewTransport starts reading pc and accepting on ln. Both must be bound to
// the same IP address and port, which is what the node advertises unless
// Config.AdvertiseAddr overrides it. The transport owns pc and ln: Shutdown
// (called by memberlist) closes them.
func NewTransport(pc net.PacketConn, ln net.Listener, dial netx.DialFunc, logger *slog.Logger) (*Transport, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ip, port, err := splitIPPort(pc.LocalAddr().String())
	if err != nil {
		return nil, fmt.Errorf("membership: transport address: %w", err)
	}
	if ln.Addr().String() != pc.LocalAddr().String() {
		return nil, fmt.Errorf("membership: transport: stream address %s differs from packet address %s", ln.Addr(), pc.LocalAddr())
	}
	t := &Transport{
		pc: pc, ln: ln, dial: dial,
		ip: net.ParseIP(ip), port: port,
		logger:   logger,
		packetCh: make(chan *memberlist.Packet),
		streamCh: make(chan net.Conn),
		group:    run.NewGroup(context.Background()),
	}
	if ip4 := t.ip.To4(); ip4 != nil {
		t.ip = ip4
	}
	t.group.Go(t.readPackets)
	t.group.Go(t.accept)
	return t, nil
}

// FinalAdvertiseAddr returns the configured address, or the bound one.
func (t *Transport) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	if ip == "" {
		return t.ip, t.port, nil
	}
	adv := net.ParseIP(ip)
	if adv == nil {
		return nil, 0, fmt.Errorf("membership: advertise address %q is not an IP", ip)
	}
	if ip4 := adv.To4(); ip4 != nil {
		adv = ip4
	}
	return adv, port, nil
}

// WriteTo sends one gossip datagram.
func (t *Transport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress sends one gossip datagram and returns when it left.
func (t *Transport) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	ap, err := netip.ParseAddrPort(a.Addr)
	if err != nil {
		return time.Time{}, fmt.Errorf("membership: gossip address %q: %w", a.Addr, err)
	}
	_, err = t.pc.WriteTo(b, net.UDPAddrFromAddrPort(ap))
	return time.Now(), err
}

// PacketCh delivers received datagrams, stamped when they were read.
func (t *Transport) PacketCh() <-chan *memberlist.Packet { return t.packetCh }

// DialTimeout opens a stream to addr.
func (t *Transport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout opens a stream to a.Addr within timeout.
func (t *Transport) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return t.dial(ctx, a.Addr)
}

// StreamCh delivers accepted streams.
func (t *Transport) StreamCh() <-chan net.Conn { return t.streamCh }

// Shutdown closes the endpoint and listener and waits for the loops.
func (t *Transport) Shutdown() error {
	t.once.Do(func() {
		t.group.Stop()
		_ = t.pc.Close()
		_ = t.ln.Close()
	})
	t.group.Wait()
	return nil
}

func (t *Transport) readPackets(ctx context.Context) {
	buf := make([]byte, 65536)
	for {
		n, from, err := t.pc.ReadFrom(buf)
		now := time.Now()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			t.logger.Error("membership: read gossip datagram", "err", err)
			continue
		}
		if n == 0 {
			continue
		}
		p := &memberlist.Packet{Buf: append([]byte(nil), buf[:n]...), From: from, Timestamp: now}
		select {
		case t.packetCh <- p:
		case <-ctx.Done():
			return
		}
	}
}

func (t *Transport) accept(ctx context.Context) {
	netx.Accept(ctx, t.ln, nil, t.logger.With("listener", "gossip"), func(conn net.Conn) bool {
		select {
		case t.streamCh <- conn:
			return true
		case <-ctx.Done():
			_ = conn.Close()
			return false
		}
	})
}
