package cluster

import (
	"context"
	"fmt"

	"github.com/sextantmq/sextant/internal/broker"
)

// assertBatch bounds the client ids re-registered in one request.
const assertBatch = 1024

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
// the owner or the holder cannot be reached in time.
func (c *Cluster) Takeover(ctx context.Context, clientID string, cleanStart bool) (*broker.SessionState, error) {
	if c.closed.Load() {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DirectoryTimeout)
	defer cancel()
	own := c.ownerOf(clientID)
	var prev string
	if own == c.id {
		prev = c.register(clientID, c.id)
	} else {
		l := c.peers.Link(own)
		if l == nil {
			c.markLocal(clientID, "")
			c.metrics.takeovers[takeoverFailed].Inc()
			return nil, fmt.Errorf("cluster: directory owner %s of %q: no link", own, clientID)
		}
		out, err := l.Call(ctx, methodRegister, appendClientNode(nil, clientID, c.id))
		if err != nil {
			c.markLocal(clientID, "")
			c.metrics.takeovers[takeoverFailed].Inc()
			return nil, fmt.Errorf("cluster: registering %q with %s: %w", clientID, own, err)
		}
		prev = string(out)
	}
	c.markLocal(clientID, own)
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

// markLocal records that clientID lives here, registered with own ("":
// not registered yet).
func (c *Cluster) markLocal(clientID, own string) {
	c.dir.Lock()
	c.dir.local[clientID] = own
	c.dir.Unlock()
}

// SessionEnded implements broker.Cluster: the owner forgets the entry if it
// still names this node.
func (c *Cluster) SessionEnded(clientID string) {
	if c.closed.Load() {
		return
	}
	c.dir.Lock()
	delete(c.dir.local, clientID)
	c.dir.Unlock()
	own := c.ownerOf(clientID)
	if own == c.id {
		c.unregister(clientID, c.id)
		return
	}
	if l := c.peers.Link(own); l != nil {
		l.Notify(methodUnregister, appendClientNode(nil, clientID, c.id))
	}
}

// register records holder as the node holding clientID and returns the
// previous holder.
func (c *Cluster) register(clientID, holder string) string {
	c.dir.Lock()
	defer c.dir.Unlock()
	prev := c.dir.entries[clientID]
	c.dir.entries[clientID] = holder
	return prev
}

// assert re-registers sessions a holder already has: an id held by another
// alive node is left alone and returned (the holder's copy is stale).
func (c *Cluster) assert(holder string, ids []string) (superseded []string) {
	c.members.RLock()
	aliveSet := make(map[string]bool, len(c.members.alive))
	for _, n := range c.members.alive {
		aliveSet[n] = true
	}
	c.members.RUnlock()
	c.dir.Lock()
	defer c.dir.Unlock()
	for _, id := range ids {
		cur := c.dir.entries[id]
		if cur == "" || cur == holder || !aliveSet[cur] {
			c.dir.entries[id] = holder
			continue
		}
		superseded = append(superseded, id)
	}
	return superseded
}

// unregister forgets clientID if holder still holds it.
func (c *Cluster) unregister(clientID, holder string) {
	c.dir.Lock()
	if c.dir.entries[clientID] == holder {
		delete(c.dir.entries, clientID)
	}
	c.dir.Unlock()
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
	due := map[string][]string{}
	c.dir.Lock()
	for id := range c.dir.entries {
		if owner(id, alive) != c.id {
			delete(c.dir.entries, id)
		}
	}
	for id, registered := range c.dir.local {
		if own := owner(id, alive); own != registered {
			due[own] = append(due[own], id)
		}
	}
	c.dir.Unlock()
	for own, ids := range due {
		for len(ids) > 0 {
			n := min(len(ids), assertBatch)
			c.assertWith(own, ids[:n])
			ids = ids[n:]
		}
	}
}

// assertWith re-registers ids with their owner and discards the sessions
// that the owner says live elsewhere now.
func (c *Cluster) assertWith(own string, ids []string) {
	var superseded []string
	if own == c.id {
		superseded = c.assert(c.id, ids)
	} else {
		l := c.peers.Link(own)
		if l == nil || !l.Up() {
			return // retried on the next link-up or tick
		}
		ctx, cancel := context.WithTimeout(c.ctx, c.cfg.DirectoryTimeout)
		out, err := l.Call(ctx, methodAssert, appendAssert(nil, c.id, ids))
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
	c.dir.Lock()
	for _, id := range ids {
		if _, ok := c.dir.local[id]; ok && !stale[id] {
			c.dir.local[id] = own
		}
	}
	c.dir.Unlock()
	for _, id := range superseded {
		c.discard(id)
	}
}

// discard ends a local session whose client has since connected to
// another node: its connection here (if any) is closed, its state dropped,
// its will not published (the client is alive elsewhere).
func (c *Cluster) discard(clientID string) {
	c.log.Info("cluster: dropping a stale copy of a session held elsewhere", "client", clientID)
	c.metrics.staleSessions.Inc()
	if _, err := c.b.HandOver(clientID, false); err != nil {
		c.log.Warn("cluster: dropping a stale session", "client", clientID, "err", err)
	}
}
