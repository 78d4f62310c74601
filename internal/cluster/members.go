package cluster

import (
	"context"
	"slices"

	"github.com/sextantmq/sextant/internal/membership"
)

// watchMembers follows membership events until Close.
func (c *Cluster) watchMembers(ctx context.Context) {
	events := c.cfg.Members.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			c.onEvent(e)
		}
	}
}

func (c *Cluster) onEvent(e membership.Event) {
	switch e.Type {
	case membership.EventResync:
		c.reconcile(c.cfg.Members.Members())
		return
	case membership.EventReap:
		c.members.Lock()
		delete(c.members.known, e.Member.ID)
		c.members.Unlock()
		c.forgetHolder(e.Member.ID)
		c.down(e.Member.ID)
		return
	}
	c.members.Lock()
	c.members.known[e.Member.ID] = e.Member
	c.members.Unlock()
	if e.Member.State == membership.StateAlive {
		c.up(e.Member)
	} else {
		c.down(e.Member.ID)
		if e.Type == membership.EventLeave {
			c.forgetHolder(e.Member.ID)
		}
	}
}

// reconcile brings links and the alive set in line with a full member list.
func (c *Cluster) reconcile(ms []membership.Member) {
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.ID] = true
		c.members.Lock()
		c.members.known[m.ID] = m
		c.members.Unlock()
		if m.State == membership.StateAlive {
			c.up(m)
		} else {
			c.down(m.ID)
		}
	}
	c.members.Lock()
	var gone []string
	for id := range c.members.known {
		if !seen[id] {
			gone = append(gone, id)
			delete(c.members.known, id)
		}
	}
	c.members.Unlock()
	for _, id := range gone {
		c.down(id)
	}
	c.pokeDirectory()
}

// up makes sure an alive member has a link and counts in the directory.
func (c *Cluster) up(m membership.Member) {
	if m.ID != c.id && m.Labels.PeerAddr == "" {
		return // not a broker node (no peer address)
	}
	if m.ID != c.id {
		c.peers.Add(m.ID, m.Labels.PeerAddr)
	}
	c.setAlive(m.ID, true)
}

// down drops a member that failed or left: its interest (nothing more is
// forwarded to it), its link and its weight in the directory.
func (c *Cluster) down(id string) {
	if id == c.id {
		return
	}
	c.setAlive(id, false)
	c.peers.Remove(id)
	c.dropInterest(id)
}

func (c *Cluster) setAlive(id string, alive bool) {
	c.members.Lock()
	i, found := slices.BinarySearch(c.members.alive, id)
	changed := false
	switch {
	case alive && !found:
		next := slices.Clone(c.members.alive)
		c.members.alive = slices.Insert(next, i, id)
		changed = true
	case !alive && found:
		next := slices.Clone(c.members.alive)
		c.members.alive = slices.Delete(next, i, i+1)
		changed = true
	}
	c.members.Unlock()
	if changed {
		c.pokeDirectory()
	}
}

// forgetHolder drops directory entries naming a node that is gone for good.
func (c *Cluster) forgetHolder(node string) {
	c.dir.Lock()
	for id, h := range c.dir.entries {
		if h.node == node {
			delete(c.dir.entries, id)
		}
	}
	c.dir.Unlock()
}

// Alive returns the members this node routes to and spreads the session
// directory over, itself included, sorted.
func (c *Cluster) Alive() []string {
	c.members.RLock()
	defer c.members.RUnlock()
	return slices.Clone(c.members.alive)
}
