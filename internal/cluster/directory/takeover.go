package directory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/peer"
)

// Owner returns the node that keeps clientID's directory entry when nodes
// are the alive members: the winner of rendezvous hashing.
func Owner(clientID string, nodes []string) string { return owner(clientID, nodes) }

// ownerOf returns the directory owner of clientID among the alive members.
func (d *Service) ownerOf(clientID string) string {
	return owner(clientID, d.aliveNodes())
}

// Takeover implements broker.Directory. It registers this node as the
// session's holder with the directory owner, and if another alive node held
// the session, asks it to hand the session over (closing the client's
// connection there). A clean start does both in the background
// (takeoverClean): nothing moves, so its CONNACK does not wait. Resuming
// fails, and the broker starts a fresh session, when the owner cannot be
// reached in time (the claim stays here, newer than any other, and the
// directory loop registers it once the owner is reachable); when the holder
// exported the session but its answer did not arrive, the error wraps
// broker.ErrSessionMoving and the CONNECT is refused instead.
func (d *Service) Takeover(ctx context.Context, clientID string, cleanStart bool) (*broker.SessionState, error) {
	if d.group.Stopped() {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	stamp := d.stamp()
	own := d.ownerOf(clientID)
	d.mu.Lock()
	d.mu.local[clientID] = localSession{stamp: stamp}
	d.mu.Unlock()
	mine := claim{ClientID: clientID, Node: d.id, Stamp: stamp}
	if cleanStart {
		// Nothing moves: the CONNECT need not wait for the directory.
		d.group.Go(func(ctx context.Context) { d.takeoverClean(ctx, own, mine) })
		return nil, nil
	}
	var prev claim
	if own == d.id {
		prev = d.register(mine)
	} else {
		out, err := d.peers.Call(ctx, own, methodRegister, appendClaim(nil, mine))
		if err == nil {
			prev, err = decodePrevious(out)
		}
		if err != nil {
			d.metrics.takeovers[takeoverFailed].Inc()
			d.Poke()
			return nil, fmt.Errorf("cluster: registering %q with %s: %w", clientID, own, err)
		}
	}
	d.mu.Lock()
	if ls, ok := d.mu.local[clientID]; ok && ls.stamp == stamp {
		d.mu.local[clientID] = localSession{owner: own, stamp: stamp}
	}
	d.mu.Unlock()
	if prev.Node == "" || prev.Node == d.id {
		d.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	if !d.alive(prev.Node) {
		d.log.Info("cluster: session's previous node is not alive; starting afresh", "client", clientID, "node", prev.Node)
		d.metrics.takeovers[takeoverLost].Inc()
		return nil, nil
	}
	out, err := d.askHandOver(ctx, prev.Node, clientID, false)
	var st *broker.SessionState
	if err == nil {
		st, err = decodeState(out)
	}
	if err != nil {
		d.metrics.takeovers[takeoverFailed].Inc()
		err = fmt.Errorf("cluster: hand-over of %q from %s: %w", clientID, prev.Node, err)
		if !errors.Is(err, peer.ErrLinkDown) && !errors.Is(err, context.DeadlineExceeded) {
			// The holder answered and cannot send the session (a retry
			// would fail the same way), or this node is stopping.
			return nil, err
		}
		d.abandon(own, mine, prev)
		return nil, fmt.Errorf("%w: %w", broker.ErrSessionMoving, err)
	}
	if st == nil {
		d.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	// The old node ends its copy once the session and its subscriptions
	// are in place here (the broker calls Release then): what reaches the
	// copy until then is relayed here (package cluster, relay.go).
	holder := prev.Node
	st.Release = func() { d.peers.Notify(holder, methodRelease, appendClientID(nil, clientID)) }
	d.metrics.takeovers[takeoverMoved].Inc()
	return st, nil
}

// takeoverClean registers a clean start's claim in the background: the
// client already has its CONNACK. A session of the client on another node
// is then discarded there (its connection closed, its will published), a
// round trip after the new connection began rather than before it. If a
// newer claim reached the owner first, this node's session is the stale
// one, and the directory loop drops it; if the owner cannot be reached, the
// loop registers the claim later.
func (d *Service) takeoverClean(ctx context.Context, own string, mine claim) {
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	var prev claim
	var superseded bool
	if own == d.id {
		prev, superseded = d.registerClean(mine)
	} else {
		out, err := d.peers.Call(ctx, own, methodRegisterClean, appendClaim(nil, mine))
		if err == nil {
			prev, superseded, err = decodeRegistered(out)
		}
		if err != nil {
			d.log.Debug("cluster: registering a clean start failed; the directory loop retries", "client", mine.ClientID, "err", err)
			d.metrics.takeovers[takeoverFailed].Inc()
			d.Poke()
			return
		}
	}
	d.mu.Lock()
	if ls, ok := d.mu.local[mine.ClientID]; ok && ls.stamp == mine.Stamp && !superseded {
		d.mu.local[mine.ClientID] = localSession{owner: own, stamp: mine.Stamp}
	}
	d.mu.Unlock()
	switch {
	case superseded:
		d.Poke() // re-registering loses to the newer claim, which drops this copy
		return
	case prev.Node == "" || prev.Node == d.id:
		d.metrics.takeovers[takeoverNone].Inc()
		return
	case !d.alive(prev.Node):
		d.metrics.takeovers[takeoverLost].Inc()
		return
	}
	if _, err := d.askHandOver(ctx, prev.Node, mine.ClientID, true); err != nil {
		d.log.Info("cluster: discarding a clean start's old session failed", "client", mine.ClientID, "node", prev.Node, "err", err)
		d.metrics.takeovers[takeoverFailed].Inc()
		return
	}
	d.metrics.takeovers[takeoverNone].Inc()
}

// handOverRetry is the pause before asking a holder again after the link
// dropped the answer.
const handOverRetry = 100 * time.Millisecond

// askHandOver asks holder for clientID's session. An answer lost with its
// connection is asked for again (the holder keeps what it exported until
// released) until ctx ends or the holder is no longer alive.
func (d *Service) askHandOver(ctx context.Context, holder, clientID string, cleanStart bool) ([]byte, error) {
	req := appendHandOver(nil, clientID, cleanStart)
	for {
		out, err := d.peers.Call(ctx, holder, methodHandOver, req)
		if err == nil || !errors.Is(err, peer.ErrLinkDown) || !d.alive(holder) {
			return out, err
		}
		d.log.Info("cluster: hand-over answer lost with its link; asking again", "client", clientID, "node", holder)
		t := d.clock.NewTimer(handOverRetry)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("%w (after the link dropped an answer)", ctx.Err())
		}
	}
}

// abandon undoes this node's claim after a hand-over that did not arrive:
// the claim it replaced stands again, so the client's retry (here or on
// any node) asks the holder again, which still has the session.
func (d *Service) abandon(own string, mine, prev claim) {
	d.mu.Lock()
	if ls, ok := d.mu.local[mine.ClientID]; ok && ls.stamp == mine.Stamp {
		delete(d.mu.local, mine.ClientID)
	}
	d.mu.Unlock()
	if own == d.id {
		d.restore(mine, prev)
	} else {
		d.peers.Notify(own, methodRestore, appendRestore(nil, mine, prev))
	}
}

// handingHold is how long an exported session waits for its release before
// its holder asks the new node what became of it.
func (d *Service) handingHold() time.Duration { return 2 * d.cfg.Timeout }

// settleHandings handles exports never released: either the release was
// lost (the new node has the session: the copy here is stale) or the new
// node abandoned the hand-over (the copy here is the session). The holder
// asks the new node whether it holds the session (methodSettle); until it
// can, it keeps its copy. A kept copy is registered again with a fresh
// claim, since the abandoned claim may still be the directory's entry if
// its restore was lost.
func (d *Service) settleHandings(ctx context.Context) {
	now := d.clock.Now()
	type due struct {
		id string
		h  handing
	}
	var work []due
	d.mu.Lock()
	for id, h := range d.mu.handing {
		if now.Sub(h.at) >= d.handingHold() {
			work = append(work, due{id, h})
		}
	}
	d.mu.Unlock()
	for _, w := range work {
		abandoned, err := d.askSettle(ctx, w.h.to, w.id)
		if err != nil {
			d.log.Debug("cluster: cannot settle a hand-over yet", "client", w.id, "node", w.h.to, "err", err)
			continue
		}
		d.mu.Lock()
		if cur, ok := d.mu.handing[w.id]; !ok || cur.at != w.h.at || cur.to != w.h.to {
			d.mu.Unlock()
			continue // asked for again, or released, meanwhile
		}
		delete(d.mu.handing, w.id)
		d.metrics.moving.Set(float64(len(d.mu.handing)))
		if abandoned {
			if _, ok := d.mu.local[w.id]; ok {
				d.mu.local[w.id] = localSession{stamp: d.stamp()} // registered by resync
			}
		}
		d.mu.Unlock()
		if abandoned {
			d.log.Info("cluster: a hand-over was abandoned; keeping the session here", "client", w.id, "node", w.h.to)
		} else {
			d.log.Info("cluster: a hand-over's release was lost; dropping the copy here", "client", w.id, "node", w.h.to)
			d.metrics.staleSessions.Inc()
			d.sessions.ReleaseSession(w.h.st)
		}
	}
}

// askSettle asks node whether the hand-over of clientID to it is
// abandoned: whether node does not hold the session. A node that is no
// longer alive cannot have the session in use: the copy here is kept.
func (d *Service) askSettle(ctx context.Context, node, clientID string) (abandoned bool, err error) {
	if !d.alive(node) {
		return true, nil
	}
	if !d.peers.Up(node) {
		return false, fmt.Errorf("no link to %s", node)
	}
	ctx, cancel := context.WithTimeout(ctx, d.cfg.Timeout)
	defer cancel()
	out, err := d.peers.Call(ctx, node, methodSettle, appendClientID(nil, clientID))
	if err != nil {
		return false, err
	}
	if len(out) != 1 || out[0] > 1 {
		return false, fmt.Errorf("%w: settle answer", ErrCorrupt)
	}
	return out[0] == 1, nil
}

// SessionEnded implements broker.Directory: the owner forgets the entry if it
// still names this node.
func (d *Service) SessionEnded(clientID string) {
	if d.group.Stopped() {
		return
	}
	d.mu.Lock()
	ls, ok := d.mu.local[clientID]
	delete(d.mu.local, clientID)
	d.mu.Unlock()
	if !ok {
		return
	}
	cl := claim{ClientID: clientID, Node: d.id, Stamp: ls.stamp}
	own := d.ownerOf(clientID)
	if own == d.id {
		d.unregister(cl)
		return
	}
	d.peers.Notify(own, methodUnregister, appendClaim(nil, cl))
}
