package cluster

import (
	"context"
	"slices"

	"github.com/sextantmq/sextant/internal/membership"
)

// watchMembers follows membership events until Close.
func (l *Layer) watchMembers(ctx context.Context) {
	events := l.cfg.Members.Events()
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-events:
			if !ok {
				return
			}
			l.onEvent(e)
		}
	}
}

func (l *Layer) onEvent(e membership.Event) {
	switch e.Type {
	case membership.EventResync:
		l.reconcile(l.cfg.Members.Members())
		return
	case membership.EventReap:
		l.members.Lock()
		delete(l.members.known, e.Member.ID)
		l.members.Unlock()
		l.dir.Forget(e.Member.ID)
		l.down(e.Member.ID)
		return
	}
	l.members.Lock()
	l.members.known[e.Member.ID] = e.Member
	l.members.Unlock()
	if e.Member.State == membership.StateAlive {
		l.up(e.Member)
	} else {
		l.down(e.Member.ID)
		if e.Type == membership.EventLeave {
			l.dir.Forget(e.Member.ID)
		}
	}
}

// reconcile brings links and the alive set in line with a full member list.
func (l *Layer) reconcile(ms []membership.Member) {
	seen := map[string]bool{}
	for _, m := range ms {
		seen[m.ID] = true
		l.members.Lock()
		l.members.known[m.ID] = m
		l.members.Unlock()
		if m.State == membership.StateAlive {
			l.up(m)
		} else {
			l.down(m.ID)
		}
	}
	l.members.Lock()
	var gone []string
	for id := range l.members.known {
		if !seen[id] {
			gone = append(gone, id)
			delete(l.members.known, id)
		}
	}
	l.members.Unlock()
	for _, id := range gone {
		l.down(id)
	}
	l.dir.Poke()
}

// up makes sure an alive member has a link and counts in the directory.
func (l *Layer) up(m membership.Member) {
	if m.ID != l.id && m.Labels.PeerAddr == "" {
		return // not a broker node (no peer address)
	}
	if m.ID != l.id {
		l.peers.Add(m.ID, m.Labels.PeerAddr)
	}
	l.setAlive(m.ID, true)
}

// down drops a member that failed or left: its interest (nothing more is
// forwarded to it), its link and its weight in the directory.
func (l *Layer) down(id string) {
	if id == l.id {
		return
	}
	l.setAlive(id, false)
	l.peers.Remove(id)
	l.routes.Drop(id)
	l.metrics.remoteFilters.Set(float64(l.routes.Len()))
}

func (l *Layer) setAlive(id string, alive bool) {
	l.members.Lock()
	i, found := slices.BinarySearch(l.members.alive, id)
	var next []string
	switch {
	case alive && !found:
		next = slices.Insert(slices.Clone(l.members.alive), i, id)
	case !alive && found:
		next = slices.Delete(slices.Clone(l.members.alive), i, i+1)
	}
	if next != nil {
		l.members.alive = next
	}
	l.members.Unlock()
	if next != nil {
		l.dir.SetAlive(next) // pokes the directory
	}
}

// Alive returns the members this node routes to and spreads the session
// directory over, itself included, sorted.
func (l *Layer) Alive() []string {
	l.members.Lock()
	defer l.members.Unlock()
	return slices.Clone(l.members.alive)
}
