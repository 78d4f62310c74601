package replication

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/logging"
	"github.com/sextantmq/sextant/internal/netx"
)

// maxHandshakes bounds the inbound connections being classified at once;
// further ones are closed (and counted) until some finish.
const maxHandshakes = 64

// Engine runs this node's replicated groups: it owns their Raft instances,
// their storage under Config.DataDir, and the accept loop that routes
// inbound group connections to them. Open groups with OpenGroup.
type Engine struct {
	// immutable after New
	cfg     Config
	log     *slog.Logger
	metrics *metrics
	ctx     context.Context // ends at Close
	cancel  context.CancelFunc
	sem     chan struct{} // handshakes in progress
	// repeats limits repeated Raft records across all groups: a dead peer
	// that every group heartbeats costs one line, not one per group.
	repeats *logging.Repeats
	// wrapLog, when set (tests), wraps each group's log store: faults
	// injected there reach Raft as a replica's failed appends.
	wrapLog func(GroupID, raft.LogStore) raft.LogStore

	wg sync.WaitGroup // the accept loop, connection handlers, failure handlers

	mu struct {
		sync.Mutex
		closed bool
		groups map[GroupID]member // nil member: being opened
	}
}

// member is what the engine needs of an open group, whatever its state
// machine's result type.
type member interface {
	streams() *layer
	role() Role
	Close() error
}

// New starts an engine on cfg.Listener. It creates cfg.DataDir if needed;
// groups are opened afterwards with OpenGroup.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		if cfg.Listener != nil {
			_ = cfg.Listener.Close()
		}
		return nil, err
	}
	cfg = cfg.withDefaults()
	if err := os.MkdirAll(cfg.DataDir, 0o750); err != nil {
		_ = cfg.Listener.Close()
		return nil, fmt.Errorf("replication: data dir: %w", err)
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, sem: make(chan struct{}, maxHandshakes), repeats: logging.NewRepeats(nil, 0, 0)}
	e.mu.groups = map[GroupID]member{}
	e.metrics = newMetrics(cfg.Registerer, newRoleCollector(e.roles))
	e.ctx, e.cancel = context.WithCancel(context.Background())
	e.spawn(e.acceptLoop)
	return e, nil
}

// NodeID returns this node's id.
func (e *Engine) NodeID() string { return e.cfg.NodeID }

// Addr returns this node's cluster address.
func (e *Engine) Addr() string { return e.cfg.Addr }

// spawn runs fn on a goroutine that Close waits for; false once closed.
func (e *Engine) spawn(fn func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		return false
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		fn()
	}()
	return true
}

// Close closes every open group (as Group.Close does: without handing
// leadership over), stops accepting and waits for the engine's goroutines.
func (e *Engine) Close() error {
	e.mu.Lock()
	if e.mu.closed {
		e.mu.Unlock()
		return nil
	}
	e.mu.closed = true
	var open []member
	for _, g := range e.mu.groups {
		if g != nil {
			open = append(open, g)
		}
	}
	e.mu.Unlock()
	e.cancel()
	_ = e.cfg.Listener.Close()
	var errs []error
	for _, g := range open {
		errs = append(errs, g.Close())
	}
	e.wg.Wait()
	return errors.Join(errs...)
}

// reserve claims id for a group being opened.
func (e *Engine) reserve(id GroupID) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch _, ok := e.mu.groups[id]; {
	case e.mu.closed:
		return ErrClosed
	case ok:
		return fmt.Errorf("%w: %s", ErrExists, id)
	case len(e.mu.groups) >= e.cfg.MaxGroups:
		return fmt.Errorf("%w: %d groups open (max-groups)", ErrBudget, len(e.mu.groups))
	}
	e.mu.groups[id] = nil
	return nil
}

// publish makes an opened group reachable; false if the engine closed
// meanwhile (the caller closes the group).
func (e *Engine) publish(id GroupID, g member) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.mu.closed {
		delete(e.mu.groups, id)
		return false
	}
	e.mu.groups[id] = g
	return true
}

// release frees id (the group closed, or failed to open).
func (e *Engine) release(id GroupID, g member) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if cur, ok := e.mu.groups[id]; ok && cur == g {
		delete(e.mu.groups, id)
	}
}

func (e *Engine) lookup(id GroupID) member {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.mu.groups[id]
}

func (e *Engine) roles() map[Role]int {
	e.mu.Lock()
	open := make([]member, 0, len(e.mu.groups))
	for _, g := range e.mu.groups {
		if g != nil {
			open = append(open, g)
		}
	}
	e.mu.Unlock()
	out := map[Role]int{}
	for _, g := range open {
		out[g.role()]++
	}
	return out
}

// GroupDir is the directory holding group id's storage (its Raft log and
// snapshots); Delete removes it whole, so a state machine may keep its own
// files in it too.
func (e *Engine) GroupDir(id GroupID) string { return filepath.Join(e.cfg.DataDir, id.DirName()) }

// Delete removes a group's storage: what a node does after it was removed
// from the group (a migration moved the replica elsewhere). The group is
// closed first if it is open here.
func (e *Engine) Delete(id GroupID) error {
	if err := id.Validate(); err != nil {
		return err
	}
	if g := e.lookup(id); g != nil {
		if err := g.Close(); err != nil && !errors.Is(err, ErrClosed) {
			return err
		}
	}
	if err := e.reserve(id); err != nil {
		return err
	}
	defer e.release(id, nil)
	if err := os.RemoveAll(e.GroupDir(id)); err != nil {
		return fmt.Errorf("replication: delete group %s: %w", id, err)
	}
	return nil
}

// acceptLoop routes inbound connections until the listener closes.
func (e *Engine) acceptLoop() {
	backoff := 5 * time.Millisecond
	for {
		c, err := e.cfg.Listener.Accept()
		if err != nil {
			if e.ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			e.log.Warn("replication: accept", "err", err)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-e.ctx.Done():
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		select {
		case e.sem <- struct{}{}:
		default:
			e.metrics.refused[refuseBusy].Inc()
			_ = c.Close()
			continue
		}
		if !e.spawn(func() {
			defer func() { <-e.sem }()
			e.route(c)
		}) {
			_ = c.Close()
			return
		}
	}
}

// route reads a connection's kind byte, TLS and hello, answers the hello
// and hands the connection to its group.
func (e *Engine) route(c net.Conn) {
	ctx, cancel := context.WithTimeout(e.ctx, helloTimeout)
	defer cancel()
	remote := c.RemoteAddr()
	refuse := func(reason string, status byte, err error) {
		e.metrics.refused[reason].Inc()
		e.log.Debug("replication: refused a connection", "remote", remote, "reason", reason, "err", err)
		if status != statusNone {
			_, _ = c.Write([]byte{status})
		}
		_ = c.Close()
	}
	dl, _ := ctx.Deadline()
	_ = c.SetDeadline(dl)
	var kind [1]byte
	if _, err := io.ReadFull(c, kind[:]); err != nil || kind[0] != Kind {
		refuse(refuseKind, statusNone, err)
		return
	}
	c, err := netx.Secure(ctx, c, e.cfg.TLS, true)
	if err != nil {
		e.metrics.refused[refuseTLS].Inc()
		e.log.Warn("replication: refused a connection", "remote", remote, "err", err)
		return
	}
	h, err := readHello(c)
	switch {
	case err != nil:
		refuse(refuseHeader, statusBadHello, err)
		return
	case h.to != e.cfg.NodeID:
		refuse(refuseWrongNode, statusWrongNode, fmt.Errorf("hello for node %q from %q", h.to, h.from))
		return
	}
	g := e.lookup(h.group)
	if g == nil {
		refuse(refuseUnknown, statusUnknownGroup, fmt.Errorf("group %q from %q", h.group, h.from))
		return
	}
	if _, err := c.Write([]byte{statusOK}); err != nil {
		_ = c.Close()
		return
	}
	_ = c.SetDeadline(time.Time{})
	if !g.streams().Offer(e.ctx, c) {
		_ = c.Close()
	}
}
