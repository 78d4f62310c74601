package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/broker"
	"github.com/sextantmq/sextant/internal/peer"
)

// assertBatch bounds the client ids re-registered in one request.
const assertBatch = 1024

// holding is a directory entry: who holds a session, since when.
type holding struct {
	node  string
	stamp uint64
}

// handing is a session exported to another node (to) and kept here, offline,
// until that node confirms it has it (methodRelease). If the answer was
// lost, the new node asks again and gets a fresh snapshot; if it never
// confirms, settleHandings asks it after handingHold which copy stands.
type handing struct {
	to string
	st *broker.SessionState
	at time.Time
}

// localSession is a session held here: the owner it is registered with
// ("" while not registered) and its claim stamp.
type localSession struct {
	owner string
	stamp uint64
}

// DirectoryOwner returns the node that keeps clientID's directory entry
// when nodes are the alive members: the winner of rendezvous hashing.
func DirectoryOwner(clientID string, nodes []string) string { return owner(clientID, nodes) }

// ownerOf returns the directory owner of clientID among the alive members.
func (c *Cluster) ownerOf(clientID string) string {
	c.members.RLock()
	defer c.members.RUnlock()
	return owner(clientID, c.members.alive)
}

// Takeover implements broker.Cluster. It registers this node as the
// session's holder with the directory owner, and if another alive node held
// the session, asks it to hand the session over (closing the client's
// connection there). A clean start does both in the background
// (takeoverClean): nothing moves, so its CONNACK does not wait. Resuming
// fails, and the broker starts a fresh session, when the owner cannot be
// reached in time (the claim stays here, newer than any other, and the
// directory loop registers it once the owner is reachable); when the holder
// exported the session but its answer did not arrive, the error wraps
// broker.ErrSessionMoving and the CONNECT is refused instead.
func (c *Cluster) Takeover(ctx context.Context, clientID string, cleanStart bool) (*broker.SessionState, error) {
	if c.closed.Load() {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DirectoryTimeout)
	defer cancel()
	stamp := c.hlc.now()
	own := c.ownerOf(clientID)
	c.dir.Lock()
	c.dir.local[clientID] = localSession{stamp: stamp}
	c.dir.Unlock()
	mine := claim{ClientID: clientID, Node: c.id, Stamp: stamp}
	if cleanStart {
		// Nothing moves: the CONNECT need not wait for the directory.
		c.spawn(func() { c.takeoverClean(own, mine) })
		return nil, nil
	}
	var prev claim
	if own == c.id {
		prev = c.register(mine)
	} else {
		l := c.peers.Link(own)
		if l == nil {
			c.metrics.takeovers[takeoverFailed].Inc()
			return nil, fmt.Errorf("cluster: directory owner %s of %q: no link", own, clientID)
		}
		out, err := l.Call(ctx, methodRegister, appendClaim(nil, mine))
		if err == nil {
			prev, err = decodePrevious(out)
		}
		if err != nil {
			c.metrics.takeovers[takeoverFailed].Inc()
			c.pokeDirectory()
			return nil, fmt.Errorf("cluster: registering %q with %s: %w", clientID, own, err)
		}
	}
	c.dir.Lock()
	if ls, ok := c.dir.local[clientID]; ok && ls.stamp == stamp {
		c.dir.local[clientID] = localSession{owner: own, stamp: stamp}
	}
	c.dir.Unlock()
	if prev.Node == "" || prev.Node == c.id {
		c.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	if !c.alive(prev.Node) {
		c.log.Info("cluster: session's previous node is not alive; starting afresh", "client", clientID, "node", prev.Node)
		c.metrics.takeovers[takeoverLost].Inc()
		return nil, nil
	}
	out, err := c.askHandOver(ctx, prev.Node, clientID, false)
	var st *broker.SessionState
	if err == nil {
		st, err = decodeState(out)
	}
	if err != nil {
		c.metrics.takeovers[takeoverFailed].Inc()
		err = fmt.Errorf("cluster: hand-over of %q from %s: %w", clientID, prev.Node, err)
		if !errors.Is(err, peer.ErrLinkDown) && !errors.Is(err, context.DeadlineExceeded) {
			// The holder answered and cannot send the session (a retry
			// would fail the same way), or this node is stopping.
			return nil, err
		}
		c.abandon(own, mine, prev)
		return nil, fmt.Errorf("%w: %w", broker.ErrSessionMoving, err)
	}
	if st == nil {
		c.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	// The old node ends its copy once the session and its subscriptions
	// are in place here (the broker calls Release then): what reaches the
	// copy until then is relayed here (relay.go).
	holder := prev.Node
	st.Release = func() {
		if l := c.peers.Link(holder); l != nil {
			l.Notify(methodRelease, appendClientID(nil, clientID))
		}
	}
	c.metrics.takeovers[takeoverMoved].Inc()
	return st, nil
}

// takeoverClean registers a clean start's claim in the background: the
// client already has its CONNACK. A session of the client on another node
// is then discarded there (its connection closed, its will published), a
// round trip after the new connection began rather than before it. If a
// newer claim reached the owner first, this node's session is the stale
// one, and the directory loop drops it; if the owner cannot be reached, the
// loop registers the claim later.
func (c *Cluster) takeoverClean(own string, mine claim) {
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DirectoryTimeout)
	defer cancel()
	var prev claim
	var superseded bool
	if own == c.id {
		prev, superseded = c.registerClean(mine)
	} else {
		var err error
		if l := c.peers.Link(own); l == nil {
			err = fmt.Errorf("no link to %s", own)
		} else {
			var out []byte
			if out, err = l.Call(ctx, methodRegisterClean, appendClaim(nil, mine)); err == nil {
				prev, superseded, err = decodeRegistered(out)
			}
		}
		if err != nil {
			c.log.Debug("cluster: registering a clean start failed; the directory loop retries", "client", mine.ClientID, "err", err)
			c.metrics.takeovers[takeoverFailed].Inc()
			c.pokeDirectory()
			return
		}
	}
	c.dir.Lock()
	if ls, ok := c.dir.local[mine.ClientID]; ok && ls.stamp == mine.Stamp && !superseded {
		c.dir.local[mine.ClientID] = localSession{owner: own, stamp: mine.Stamp}
	}
	c.dir.Unlock()
	switch {
	case superseded:
		c.pokeDirectory() // re-registering loses to the newer claim, which drops this copy
		return
	case prev.Node == "" || prev.Node == c.id:
		c.metrics.takeovers[takeoverNone].Inc()
		return
	case !c.alive(prev.Node):
		c.metrics.takeovers[takeoverLost].Inc()
		return
	}
	if _, err := c.askHandOver(ctx, prev.Node, mine.ClientID, true); err != nil {
		c.log.Info("cluster: discarding a clean start's old session failed", "client", mine.ClientID, "node", prev.Node, "err", err)
		c.metrics.takeovers[takeoverFailed].Inc()
		return
	}
	c.metrics.takeovers[takeoverNone].Inc()
}

// handOverRetry is the pause before asking a holder again after the link
// dropped the answer.
const handOverRetry = 100 * time.Millisecond

// askHandOver asks holder for clientID's session. An answer lost with its
// connection is asked for again (the holder keeps what it exported until
// released) until ctx ends or the holder is no longer alive.
func (c *Cluster) askHandOver(ctx context.Context, holder, clientID string, cleanStart bool) ([]byte, error) {
	req := appendHandOver(nil, clientID, cleanStart)
	for {
		l := c.peers.Link(holder)
		if l == nil {
			return nil, fmt.Errorf("no link to %s", holder)
		}
		out, err := l.Call(ctx, methodHandOver, req)
		if err == nil || !errors.Is(err, peer.ErrLinkDown) || !c.alive(holder) {
			return out, err
		}
		c.log.Info("cluster: hand-over answer lost with its link; asking again", "client", clientID, "node", holder)
		t := c.clock.NewTimer(handOverRetry)
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
func (c *Cluster) abandon(own string, mine, prev claim) {
	c.dir.Lock()
	if ls, ok := c.dir.local[mine.ClientID]; ok && ls.stamp == mine.Stamp {
		delete(c.dir.local, mine.ClientID)
	}
	c.dir.Unlock()
	if own == c.id {
		c.restore(mine, prev)
	} else if l := c.peers.Link(own); l != nil {
		l.Notify(methodRestore, appendRestore(nil, mine, prev))
	}
}

// restore puts prev back as the directory entry if mine is still current.
func (c *Cluster) restore(mine, prev claim) {
	c.dir.Lock()
	defer c.dir.Unlock()
	if cur := c.dir.entries[mine.ClientID]; cur.node != mine.Node || cur.stamp != mine.Stamp {
		return
	}
	if prev.Node == "" {
		delete(c.dir.entries, mine.ClientID)
		return
	}
	c.dir.entries[mine.ClientID] = holding{node: prev.Node, stamp: prev.Stamp}
}

// export answers a hand-over request from node: the session's snapshot,
// kept here until node releases it.
func (c *Cluster) export(node, clientID string) ([]byte, error) {
	st, err := c.b.ExportSession(clientID)
	if err != nil {
		return nil, fmt.Errorf("cluster: hand-over of %q: %w", clientID, err)
	}
	if st == nil {
		return nil, nil
	}
	st.MovedTo = node
	c.dir.Lock()
	c.dir.handing[clientID] = handing{to: node, st: st, at: c.clock.Now()}
	c.metrics.moving.Set(float64(len(c.dir.handing)))
	c.dir.Unlock()
	return appendState(nil, st), nil
}

// release ends a session exported to node, which now has it.
func (c *Cluster) release(node, clientID string) {
	c.dir.Lock()
	h, ok := c.dir.handing[clientID]
	if ok && h.to == node {
		delete(c.dir.handing, clientID)
		c.metrics.moving.Set(float64(len(c.dir.handing)))
	}
	c.dir.Unlock()
	if !ok || h.to != node {
		return
	}
	c.b.ReleaseSession(h.st)
	c.metrics.handOversOut.Inc()
}

// handingHold is how long an exported session waits for its release before
// its holder asks the new node what became of it.
func (c *Cluster) handingHold() time.Duration { return 2 * c.cfg.DirectoryTimeout }

// settleHandings handles exports never released: either the release was
// lost (the new node has the session: the copy here is stale) or the new
// node abandoned the hand-over (the copy here is the session). The holder
// asks the new node whether it holds the session (methodSettle); until it
// can, it keeps its copy. A kept copy is registered again with a fresh
// claim, since the abandoned claim may still be the directory's entry if
// its restore was lost.
func (c *Cluster) settleHandings() {
	now := c.clock.Now()
	type due struct {
		id string
		h  handing
	}
	var work []due
	c.dir.Lock()
	for id, h := range c.dir.handing {
		if now.Sub(h.at) >= c.handingHold() {
			work = append(work, due{id, h})
		}
	}
	c.dir.Unlock()
	for _, w := range work {
		abandoned, err := c.askSettle(w.h.to, w.id)
		if err != nil {
			c.log.Debug("cluster: cannot settle a hand-over yet", "client", w.id, "node", w.h.to, "err", err)
			continue
		}
		c.dir.Lock()
		if cur, ok := c.dir.handing[w.id]; !ok || cur.at != w.h.at || cur.to != w.h.to {
			c.dir.Unlock()
			continue // asked for again, or released, meanwhile
		}
		delete(c.dir.handing, w.id)
		c.metrics.moving.Set(float64(len(c.dir.handing)))
		if abandoned {
			if _, ok := c.dir.local[w.id]; ok {
				c.dir.local[w.id] = localSession{stamp: c.hlc.now()} // registered by resyncDirectory
			}
		}
		c.dir.Unlock()
		if abandoned {
			c.log.Info("cluster: a hand-over was abandoned; keeping the session here", "client", w.id, "node", w.h.to)
		} else {
			c.log.Info("cluster: a hand-over's release was lost; dropping the copy here", "client", w.id, "node", w.h.to)
			c.metrics.staleSessions.Inc()
			c.b.ReleaseSession(w.h.st)
		}
	}
}

// askSettle asks node whether the hand-over of clientID to it is
// abandoned: whether node does not hold the session. A node that is no
// longer alive cannot have the session in use: the copy here is kept.
func (c *Cluster) askSettle(node, clientID string) (abandoned bool, err error) {
	if !c.alive(node) {
		return true, nil
	}
	l := c.peers.Link(node)
	if l == nil || !l.Up() {
		return false, fmt.Errorf("no link to %s", node)
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DirectoryTimeout)
	defer cancel()
	out, err := l.Call(ctx, methodSettle, appendClientID(nil, clientID))
	if err != nil {
		return false, err
	}
	if len(out) != 1 || out[0] > 1 {
		return false, fmt.Errorf("%w: settle answer", ErrCorrupt)
	}
	return out[0] == 1, nil
}

// settled answers a holder's methodSettle: 0 if the session is held here
// (the hand-over arrived and only its release was lost), 1 if not (it was
// abandoned, or has ended here since): the holder keeps its copy.
func (c *Cluster) settled(clientID string) []byte {
	if c.b.HoldsSession(clientID) {
		return []byte{0}
	}
	return []byte{1}
}

// SessionEnded implements broker.Cluster: the owner forgets the entry if it
// still names this node.
func (c *Cluster) SessionEnded(clientID string) {
	if c.closed.Load() {
		return
	}
	c.dir.Lock()
	ls, ok := c.dir.local[clientID]
	delete(c.dir.local, clientID)
	c.dir.Unlock()
	if !ok {
		return
	}
	cl := claim{ClientID: clientID, Node: c.id, Stamp: ls.stamp}
	own := c.ownerOf(clientID)
	if own == c.id {
		c.unregister(cl)
		return
	}
	if l := c.peers.Link(own); l != nil {
		l.Notify(methodUnregister, appendClaim(nil, cl))
	}
}

// register records a CONNECT's claim (it beats every earlier one) and
// returns the claim it replaced (Node "" if none).
func (c *Cluster) register(cl claim) claim {
	c.hlc.observe(cl.Stamp)
	c.dir.Lock()
	defer c.dir.Unlock()
	prev := c.dir.entries[cl.ClientID]
	c.dir.entries[cl.ClientID] = holding{node: cl.Node, stamp: cl.Stamp}
	return claim{ClientID: cl.ClientID, Node: prev.node, Stamp: prev.stamp}
}

// registerClean records a clean start's claim, registered after its
// CONNECT was answered, unless a newer claim got there first (superseded).
func (c *Cluster) registerClean(cl claim) (prev claim, superseded bool) {
	c.hlc.observe(cl.Stamp)
	c.dir.Lock()
	defer c.dir.Unlock()
	cur, ok := c.dir.entries[cl.ClientID]
	if ok && cur.stamp > cl.Stamp {
		return claim{}, true
	}
	c.dir.entries[cl.ClientID] = holding{node: cl.Node, stamp: cl.Stamp}
	return claim{ClientID: cl.ClientID, Node: cur.node, Stamp: cur.stamp}, false
}

// assert re-registers sessions a holder already has. A claim loses to a
// newer one of another alive node (it is returned as superseded); a claim
// that beats the entry's alive holder replaces it, and that holder is told
// to drop its stale copy.
func (c *Cluster) assert(holder string, ids []string, stamps []uint64) (superseded []string) {
	c.members.RLock()
	aliveSet := make(map[string]bool, len(c.members.alive))
	for _, n := range c.members.alive {
		aliveSet[n] = true
	}
	c.members.RUnlock()
	var drops []claim
	c.dir.Lock()
	for i, id := range ids {
		c.hlc.observe(stamps[i])
		cur, ok := c.dir.entries[id]
		switch {
		case !ok || cur.node == holder || !aliveSet[cur.node]:
		case stamps[i] > cur.stamp:
			drops = append(drops, claim{ClientID: id, Node: cur.node, Stamp: cur.stamp})
		default:
			superseded = append(superseded, id)
			continue
		}
		c.dir.entries[id] = holding{node: holder, stamp: stamps[i]}
	}
	c.dir.Unlock()
	for _, d := range drops {
		if d.Node == c.id {
			c.drop(d)
		} else if l := c.peers.Link(d.Node); l != nil {
			l.Notify(methodDrop, appendClaim(nil, d))
		}
	}
	return superseded
}

// unregister forgets a session if the entry is still that claim.
func (c *Cluster) unregister(cl claim) {
	c.dir.Lock()
	if cur := c.dir.entries[cl.ClientID]; cur.node == cl.Node && cur.stamp == cl.Stamp {
		delete(c.dir.entries, cl.ClientID)
	}
	c.dir.Unlock()
}

// drop discards the local session named by a superseded claim, unless it
// was claimed again since.
func (c *Cluster) drop(cl claim) {
	c.dir.Lock()
	ls, ok := c.dir.local[cl.ClientID]
	c.dir.Unlock()
	if ok && ls.stamp == cl.Stamp {
		c.discard(cl.ClientID)
	}
}

func (c *Cluster) pokeDirectory() {
	select {
	case c.dirWake <- struct{}{}:
	default:
	}
}

// directoryLoop keeps the directory consistent with membership: after a
// change (or a new link, or every ResyncInterval) it drops entries this node
// no longer owns and re-registers this node's sessions with owners that
// changed or could not be reached before. It also sweeps tombstones.
func (c *Cluster) directoryLoop() {
	defer c.wg.Done()
	t := c.clock.NewTimer(c.cfg.ResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.dirWake:
		case <-t.C():
			t.Reset(c.cfg.ResyncInterval)
			c.sweepTombstones()
			c.settleHandings()
		}
		c.resyncDirectory()
	}
}

func (c *Cluster) resyncDirectory() {
	c.members.RLock()
	alive := c.members.alive
	c.members.RUnlock()
	type due struct {
		ids    []string
		stamps []uint64
	}
	work := map[string]*due{}
	c.dir.Lock()
	for id := range c.dir.entries {
		if owner(id, alive) != c.id {
			delete(c.dir.entries, id)
		}
	}
	for id, ls := range c.dir.local {
		if own := owner(id, alive); own != ls.owner {
			d := work[own]
			if d == nil {
				d = &due{}
				work[own] = d
			}
			d.ids = append(d.ids, id)
			d.stamps = append(d.stamps, ls.stamp)
		}
	}
	c.dir.Unlock()
	for own, d := range work {
		for len(d.ids) > 0 {
			n := min(len(d.ids), assertBatch)
			c.assertWith(own, d.ids[:n], d.stamps[:n])
			d.ids, d.stamps = d.ids[n:], d.stamps[n:]
		}
	}
}

// assertWith re-registers ids with their owner and discards the sessions
// that the owner says live elsewhere now.
func (c *Cluster) assertWith(own string, ids []string, stamps []uint64) {
	var superseded []string
	if own == c.id {
		superseded = c.assert(c.id, ids, stamps)
	} else {
		l := c.peers.Link(own)
		if l == nil || !l.Up() {
			return // retried on the next link-up or tick
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DirectoryTimeout)
		out, err := l.Call(ctx, methodAssert, appendAssert(nil, c.id, ids, stamps))
		cancel()
		if err != nil {
			c.log.Debug("cluster: re-registering sessions failed", "owner", own, "err", err)
			return
		}
		if superseded, err = decodeStringList(out); err != nil {
			c.log.Warn("cluster: bad answer to a re-registration", "owner", own, "err", err)
			return
		}
	}
	stale := make(map[string]bool, len(superseded))
	for _, id := range superseded {
		stale[id] = true
	}
	var drop []string
	c.dir.Lock()
	for i, id := range ids {
		ls, ok := c.dir.local[id]
		if !ok || ls.stamp != stamps[i] {
			continue // ended or claimed again meanwhile
		}
		if stale[id] {
			drop = append(drop, id)
			continue
		}
		c.dir.local[id] = localSession{owner: own, stamp: ls.stamp}
	}
	c.dir.Unlock()
	for _, id := range drop {
		c.discard(id)
	}
}

// discard ends a local session whose client has since connected to
// another node: its connection here (if any) is closed, its state dropped,
// and no will is published (the client is alive elsewhere).
func (c *Cluster) discard(clientID string) {
	c.log.Info("cluster: dropping a stale copy of a session held elsewhere", "client", clientID)
	c.metrics.staleSessions.Inc()
	if _, err := c.b.HandOver(clientID, false); err != nil {
		c.log.Warn("cluster: dropping a stale session", "client", clientID, "err", err)
	}
}
