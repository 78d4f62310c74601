package cluster

import (
	"context"
	"fmt"

	"github.com/sextantmq/sextant/internal/broker"
)

// assertBatch bounds the client ids re-registered in one request.
const assertBatch = 1024

// holding is a directory entry: who holds a session, since when.
type holding struct {
	node  string
	stamp uint64
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
// connection there). It fails, and the broker starts a fresh session, when
// the owner or the holder cannot be reached in time; the session stays
// registered here as a newer claim than any other, which the directory
// loop registers once the owner is reachable.
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
	var prev string
	if own == c.id {
		prev = c.register(claim{ClientID: clientID, Node: c.id, Stamp: stamp})
	} else {
		l := c.peers.Link(own)
		if l == nil {
			c.metrics.takeovers[takeoverFailed].Inc()
			return nil, fmt.Errorf("cluster: directory owner %s of %q: no link", own, clientID)
		}
		out, err := l.Call(ctx, methodRegister, appendClaim(nil, claim{ClientID: clientID, Node: c.id, Stamp: stamp}))
		if err != nil {
			c.metrics.takeovers[takeoverFailed].Inc()
			c.pokeDirectory()
			return nil, fmt.Errorf("cluster: registering %q with %s: %w", clientID, own, err)
		}
		prev = string(out)
	}
	c.dir.Lock()
	if ls, ok := c.dir.local[clientID]; ok && ls.stamp == stamp {
		c.dir.local[clientID] = localSession{owner: own, stamp: stamp}
	}
	c.dir.Unlock()
	if prev == "" || prev == c.id {
		c.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	if !c.alive(prev) {
		c.log.Info("cluster: session's previous node is not alive; starting afresh", "client", clientID, "node", prev)
		c.metrics.takeovers[takeoverLost].Inc()
		return nil, nil
	}
	l := c.peers.Link(prev)
	if l == nil {
		c.metrics.takeovers[takeoverFailed].Inc()
		return nil, fmt.Errorf("cluster: session %q is on %s: no link", clientID, prev)
	}
	out, err := l.Call(ctx, methodHandOver, appendHandOver(nil, clientID, cleanStart))
	if err != nil {
		c.metrics.takeovers[takeoverFailed].Inc()
		return nil, fmt.Errorf("cluster: hand-over of %q from %s: %w", clientID, prev, err)
	}
	st, err := decodeState(out)
	if err != nil {
		c.metrics.takeovers[takeoverFailed].Inc()
		return nil, fmt.Errorf("cluster: hand-over of %q from %s: %w", clientID, prev, err)
	}
	if st == nil {
		c.metrics.takeovers[takeoverNone].Inc()
		return nil, nil
	}
	c.metrics.takeovers[takeoverMoved].Inc()
	return st, nil
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
// returns the previous holder.
func (c *Cluster) register(cl claim) string {
	c.hlc.observe(cl.Stamp)
	c.dir.Lock()
	defer c.dir.Unlock()
	prev := c.dir.entries[cl.ClientID]
	c.dir.entries[cl.ClientID] = holding{node: cl.Node, stamp: cl.Stamp}
	return prev.node
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
