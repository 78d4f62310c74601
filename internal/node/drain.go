package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/membership"
	"github.com/sextantmq/sextant/internal/meta"
	"github.com/sextantmq/sextant/internal/meta/fsm"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// drainPoll is how often a drain looks for sessions that have moved (the
// broker has no change notification for that), and closes connections that
// were mid-handshake when the listeners stopped.
const drainPoll = 50 * time.Millisecond

// metaStepTimeout bounds each step of leaving the metadata group.
const metaStepTimeout = 10 * time.Second

// drainState is a node's drain and stop state. Its zero value is a node
// that is not draining.
type drainState struct {
	mu struct {
		sync.Mutex
		draining bool
		stop     chan struct{} // closed when a drain has finished: the node should stop now
	}
}

// stopCh returns the channel closed when a drain has finished.
func (d *drainState) stopCh() chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.stop == nil {
		d.mu.stop = make(chan struct{})
	}
	return d.mu.stop
}

// begin marks the node draining; false if it already was.
func (d *drainState) begin() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.draining {
		return false
	}
	d.mu.draining = true
	return true
}

func (d *drainState) abort() {
	d.mu.Lock()
	d.mu.draining = false
	d.mu.Unlock()
}

// readyErr is the readiness of a node as far as draining goes.
func (d *drainState) readyErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.mu.draining {
		return errors.New("draining")
	}
	return nil
}

// Stopping returns a channel that is closed once a drain has finished: the
// process should call Shutdown and exit (the admin API's drain ends with
// the node stopping).
func (n *Node) Stopping() <-chan struct{} { return n.drain.stopCh() }

var _ adminapi.Drainer = (*Node)(nil)

// Drain prepares the node to stop without losing its clients' sessions:
//
//  1. /readyz answers 503 and the client listeners stop accepting;
//  2. every client is disconnected, MQTT 5 clients with Use Another Server
//     (0x9C; Server Moved, 0x9D, when the node leaves for good; Server
//     Shutting Down, 0x8B, when no other node is alive);
//  3. the node waits, up to the timeout, until the persistent sessions that
//     were connected have been taken over by the nodes their clients
//     reconnected to (the session directory asks this node for them, so it
//     must still be running); the others stay in its data directory;
//  4. it hands over the metadata group's leadership if it has it, or, with
//     Leave, removes itself from the node registry and the group;
//  5. it closes Stopping, and the caller shuts the node down (which leaves
//     the gossip membership and stops the rest).
//
// Each step is logged. A second Drain returns ErrDraining.
func (n *Node) Drain(ctx context.Context, req adminapi.DrainRequest) (adminapi.DrainReport, error) {
	start := n.clock.Now()
	rep := adminapi.DrainReport{NodeID: n.cfg.NodeID}
	handOver := n.cfg.DrainTimeout
	if req.Timeout != "" {
		d, err := time.ParseDuration(req.Timeout)
		if err != nil || d < 0 {
			return rep, fmt.Errorf("node: drain timeout %q: not a non-negative duration", req.Timeout)
		}
		handOver = d
	}
	if !n.drain.begin() {
		return rep, fmt.Errorf("node %s: %w", n.cfg.NodeID, adminapi.ErrDraining)
	}
	if req.Leave {
		if err := n.canLeave(ctx); err != nil {
			n.drain.abort()
			return rep, err
		}
	}
	others := n.otherAliveNodes()
	rep.OtherNodes = len(others)
	code := packet.UseAnotherServer
	switch {
	case len(others) == 0:
		code = packet.ServerShuttingDown
	case req.Leave:
		code = packet.ServerMoved
	}
	rep.Reason = code.String()
	n.log.Info("drain: not ready any more; closing the client listeners", "node", n.cfg.NodeID, "leave", req.Leave, "other_nodes", len(others))
	n.closeClientListeners()

	var persistent []string
	for _, c := range n.broker.Clients() {
		if c.Persistent {
			persistent = append(persistent, c.ID)
		}
	}
	rep.Persistent = len(persistent)
	reason := "node draining: connect to another node"
	if len(others) == 0 {
		reason = "server shutting down"
	}
	rep.Disconnected = n.broker.DisconnectAll(code, reason)
	n.log.Info("drain: disconnected the clients", "connections", rep.Disconnected, "persistent_sessions", len(persistent), "reason", rep.Reason)

	hoStart := n.clock.Now()
	if len(others) > 0 && len(persistent) > 0 && handOver > 0 {
		rep.Moved = n.awaitHandOver(ctx, persistent, handOver, code, reason)
	} else {
		rep.Moved = countMoved(persistent, n.broker.HoldsSession)
	}
	rep.HandOverSeconds = n.clock.Now().Sub(hoStart).Seconds()
	if len(persistent) > 0 {
		lvl := "info"
		if rep.Moved < len(persistent) {
			lvl = "warn"
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d of %d persistent sessions were not taken over; they stay in this node's data directory", len(persistent)-rep.Moved, len(persistent)))
		}
		n.logAt(lvl, "drain: persistent sessions handed over", "moved", rep.Moved, "of", len(persistent), "seconds", rep.HandOverSeconds)
	}

	rep.LeadershipMoved, rep.LeftGroup, rep.Warnings = n.drainMeta(ctx, req.Leave, rep.Warnings)
	rep.Seconds = n.clock.Now().Sub(start).Seconds()
	n.log.Info("drain: done; the node stops now", "seconds", rep.Seconds)
	close(n.drain.stopCh())
	return rep, nil
}

// awaitHandOver waits until none of ids is held here any more, or timeout
// or ctx ends, closing connections that slipped in meanwhile; it returns how
// many moved.
func (n *Node) awaitHandOver(ctx context.Context, ids []string, timeout time.Duration, code packet.ReasonCode, reason string) int {
	deadline := n.clock.NewTimer(timeout)
	defer deadline.Stop()
	for {
		moved := countMoved(ids, n.broker.HoldsSession)
		if moved == len(ids) {
			return moved
		}
		tick := n.clock.NewTimer(drainPoll)
		select {
		case <-tick.C():
		case <-deadline.C():
			tick.Stop()
			return countMoved(ids, n.broker.HoldsSession)
		case <-ctx.Done():
			tick.Stop()
			return countMoved(ids, n.broker.HoldsSession)
		}
		// A connection accepted just before the listeners closed may have
		// finished its CONNECT since: send it away too.
		n.broker.DisconnectAll(code, reason)
	}
}

func countMoved(ids []string, held func(string) bool) int {
	moved := 0
	for _, id := range ids {
		if !held(id) {
			moved++
		}
	}
	return moved
}

// drainMeta hands over this node's part of the metadata group: leadership
// if it leads; with leave, its registry entry and its membership too.
func (n *Node) drainMeta(ctx context.Context, leave bool, warnings []string) (moved, left bool, _ []string) {
	cp := n.cluster
	if cp == nil || cp.meta == nil || cp.membership == nil {
		return false, false, warnings // alone: nobody to hand anything to
	}
	step := func(what string, f func(context.Context) error) bool {
		sctx, cancel := context.WithTimeout(ctx, metaStepTimeout)
		defer cancel()
		if err := f(sctx); err != nil {
			n.log.Warn("drain: "+what+" failed", "err", err)
			warnings = append(warnings, what+": "+err.Error())
			return false
		}
		return true
	}
	if !leave {
		step("handing over the metadata leadership", func(c context.Context) error {
			var err error
			moved, err = cp.meta.TransferLeadership(c)
			return err
		})
		if moved {
			n.log.Info("drain: handed the metadata group's leadership over")
		}
		return moved, false, warnings
	}
	step("removing the node from the registry", func(c context.Context) error {
		_, err := cp.meta.Propose(c, fsm.RemoveNode(n.cfg.NodeID))
		if errors.Is(err, fsm.ErrNotFound) {
			return nil
		}
		return err
	})
	wasLeader := cp.meta.IsLeader()
	left = step("leaving the metadata group", cp.meta.Leave)
	moved = left && wasLeader
	if left {
		n.log.Info("drain: left the metadata group")
	}
	return moved, left, warnings
}

// canLeave refuses a drain with Leave on the metadata group's last voter
// (or on a node running alone), before anything is disconnected.
func (n *Node) canLeave(ctx context.Context) error {
	cp := n.cluster
	if cp == nil || cp.meta == nil || cp.membership == nil {
		return fmt.Errorf("node %s runs alone: %w", n.cfg.NodeID, adminapi.ErrCannotLeave)
	}
	sctx, cancel := context.WithTimeout(ctx, metaStepTimeout)
	defer cancel()
	voters, err := cp.meta.Voters(sctx)
	if err != nil {
		return fmt.Errorf("node: reading the metadata group: %w", err)
	}
	if len(voters) == 1 && voters[0].ID == n.cfg.NodeID {
		return fmt.Errorf("node %s: %w: %w (add another core node first)", n.cfg.NodeID, adminapi.ErrCannotLeave, meta.ErrLastVoter)
	}
	return nil
}

// otherAliveNodes lists the other members gossip sees alive.
func (n *Node) otherAliveNodes() []string {
	cp := n.cluster
	if cp == nil || cp.membership == nil {
		return nil
	}
	var out []string
	for _, m := range cp.membership.Members() {
		if m.ID != n.cfg.NodeID && m.State == membership.StateAlive {
			out = append(out, m.ID)
		}
	}
	return out
}

// closeClientListeners stops accepting MQTT connections; established ones
// stay (Shutdown closes the listeners again, which is harmless).
func (n *Node) closeClientListeners() {
	n.mu.Lock()
	var ls []interface{ Close() error }
	for _, kind := range clientListenerKinds {
		if l := n.mu.listeners[kind]; l != nil {
			ls = append(ls, l)
		}
	}
	n.mu.Unlock()
	for _, l := range ls {
		if err := l.Close(); err != nil {
			n.log.Warn("drain: closing a client listener", "err", err)
		}
	}
}

func (n *Node) logAt(level, msg string, args ...any) {
	if level == "warn" {
		n.log.Warn(msg, args...)
		return
	}
	n.log.Info(msg, args...)
}

var _ adminapi.Remover = (*Node)(nil)

// RemoveNode removes another node from the cluster for good, for a node
// that cannot drain itself (its machine is gone): from the metadata group
// (if it was a member), from the node registry, and from gossip (its
// failed entry is pruned, so nobody calls it back). A node gossip still
// sees alive is refused unless force: drain it with leave instead.
func (n *Node) RemoveNode(ctx context.Context, id string, force bool) error {
	cp := n.cluster
	switch {
	case cp == nil || cp.meta == nil || cp.membership == nil:
		return fmt.Errorf("node %s runs alone: %w", n.cfg.NodeID, adminapi.ErrCannotLeave)
	case id == n.cfg.NodeID:
		return fmt.Errorf("node %s cannot remove itself (drain it with leave): %w", id, adminapi.ErrCannotLeave)
	case !force && slices.Contains(n.otherAliveNodes(), id):
		return fmt.Errorf("node %s: %w; drain it with leave, or force", id, adminapi.ErrNodeAlive)
	}
	servers, err := cp.meta.Servers(ctx)
	if err != nil {
		return fmt.Errorf("node: reading the metadata group: %w", err)
	}
	if slices.ContainsFunc(servers, func(s meta.Server) bool { return s.ID == id }) {
		if err := cp.meta.RemoveServer(ctx, id); err != nil {
			return fmt.Errorf("node: removing %s from the metadata group: %w", id, err)
		}
	}
	if _, err := cp.meta.Propose(ctx, fsm.RemoveNode(id)); err != nil && !errors.Is(err, fsm.ErrNotFound) {
		return fmt.Errorf("node: removing %s from the registry: %w", id, err)
	}
	if err := cp.membership.RemoveFailed(id); err != nil {
		n.log.Warn("pruning a removed node from gossip failed", "node", id, "err", err)
	}
	n.log.Info("removed a node from the cluster", "node", id, "forced", force)
	return nil
}
