package peer

import (
	"context"
	"slices"
	"time"

	"github.com/sextantmq/sextant/internal/run"
)

// Paths. A peer's outbox goes on the direct link while it is usable: it is
// connected, something arrived from the peer within StallTimeout (or the
// reader is busy handing a frame over), and the peer's last reach
// announcement on this connection, if any, says it hears this node. When
// it is not, the outbox goes through one transit node: a peer whose direct
// link is usable and that announced it can send to the destination,
// chosen by the lowest estimated round trip through it (Config.Estimate);
// the transit node passes the frames on over its own direct link and never
// further. Every change of path, and every new connection of the path,
// sends the unacknowledged messages again (they may have been lost with the
// old path; duplicates are skipped by the receiver); on a transit path they
// are also sent again after ResendAfter without progress, since a transit
// node drops what it cannot pass on. As soon as the direct link is usable
// again, the outbox goes back to it.
const (
	pathNone    int32 = iota // no path: the peer cannot be reached
	pathDirect               // the direct link
	pathTransit              // through a transit node
)

// unknownRTT stands for a round trip no estimate is known for: such a
// transit node is chosen only if no estimated one is usable.
const unknownRTT = time.Hour

// routeInterval is how often paths and the reach announcement are
// re-evaluated besides link events (stall detection and resend timers).
func (o Options) routeInterval() time.Duration {
	return min(250*time.Millisecond, o.StallTimeout/4)
}

// routeLoop re-evaluates paths periodically until the manager closes.
func (m *Manager) routeLoop(ctx context.Context) {
	d := m.opts.routeInterval()
	run.Every(ctx, m.clock, d, d, func(context.Context) { m.reroute() })
}

// linkList returns every link, in a stable order (by node id).
func (m *Manager) linkList() []*Link {
	if p := m.list.Load(); p != nil {
		return *p
	}
	return nil
}

// heard reports whether the peer was heard from recently (on a connected
// link: the caller checks).
func (l *Link) heard(now int64, stall time.Duration) bool {
	return l.busy.Load() || time.Duration(now-l.lastRecv.Load()) < stall
}

// linkView is one link's state as reroute sees it.
type linkView struct {
	l      *Link
	conn   uint64
	direct bool            // usable: heard, and the peer hears this node
	heard  bool            // heard from recently
	sends  map[string]bool // nodes the peer can send to (nil: unknown)
}

// reroute re-evaluates this node's reach announcement and every outbox's
// path, and applies the resend timer of transit paths. Reroutes are
// serialised; each takes every link's lock in turn, never two at once.
func (m *Manager) reroute() {
	m.routeMu.Lock()
	defer m.routeMu.Unlock()
	self := m.cfg.NodeID
	nowT := m.clock.Now()
	now := nowT.UnixNano()
	links := m.linkList()
	views := make([]linkView, len(links))
	var reach reachFrame
	for i, l := range links {
		v := linkView{l: l}
		l.mu.Lock()
		v.conn = l.mu.connN
		v.heard = v.conn != 0 && l.heard(now, m.opts.StallTimeout)
		hearsUs := true
		if r := l.mu.reach; r != nil {
			hearsUs = r.heard[self]
			v.sends = r.sends
		}
		l.mu.Unlock()
		v.direct = v.heard && hearsUs
		views[i] = v
		if v.heard {
			reach.Heard = append(reach.Heard, l.id)
		}
		if v.direct {
			reach.Sends = append(reach.Sends, l.id)
		}
	}
	m.setReach(reach)

	for i := range views {
		dst := &views[i]
		via, conn := m.choosePath(dst, views)
		l := dst.l
		path := pathNone
		switch {
		case via == l:
			path = pathDirect
		case via != nil:
			path = pathTransit
		}
		resent, changed := 0, false
		l.mu.Lock()
		if l.mu.closed {
			l.mu.Unlock()
			continue
		}
		switch {
		case via != l.mu.via || conn != l.mu.viaConn:
			changed = true
			// A new path, or a new connection on it: whatever was sent on
			// the old one may be lost.
			l.mu.via, l.mu.viaConn = via, conn
			resent = l.mu.out.rewind()
			l.mu.progress = nowT
			if via == nil {
				l.freeSpaceLocked() // waiting publishers drop at once now
			}
		case path == pathTransit && l.mu.out.unacked() > 0 && nowT.Sub(l.mu.progress) >= m.opts.ResendAfter:
			resent = l.mu.out.rewind()
			l.mu.progress = nowT
		}
		unacked := l.mu.out.unacked()
		l.mu.Unlock()
		if old := l.path.Swap(path); old != path {
			l.lm.path.Set(float64(path))
			m.log.Debug("peer: path changed", "peer", l.id, "path", pathName(path), "via", nodeOf(via))
		}
		if resent > 0 {
			l.lm.resent.Add(float64(resent))
			l.lm.unacked.Set(float64(unacked))
		}
		if via != nil && (changed || resent > 0) {
			via.poke()
		}
	}
}

// choosePath returns the link dst's outbox goes through and that link's
// connection: dst itself if its direct link is usable, else the transit
// node with the lowest estimated round trip (ties broken by id), else nil.
func (m *Manager) choosePath(dst *linkView, views []linkView) (*Link, uint64) {
	if dst.direct {
		return dst.l, dst.conn
	}
	self := m.cfg.NodeID
	var (
		best     *linkView
		bestCost time.Duration
	)
	for i := range views {
		t := &views[i]
		if t == dst || !t.direct || !t.sends[dst.l.id] {
			continue
		}
		cost := m.estimate(self, t.l.id) + m.estimate(t.l.id, dst.l.id)
		if best == nil || cost < bestCost {
			best, bestCost = t, cost
		}
	}
	if best == nil {
		return nil, 0
	}
	return best.l, best.conn
}

// estimate returns the estimated round trip between two nodes.
func (m *Manager) estimate(a, b string) time.Duration {
	if m.cfg.Estimate != nil {
		if d, ok := m.cfg.Estimate(a, b); ok {
			return d
		}
	}
	return unknownRTT
}

// setReach replaces this node's reach announcement; links announce a
// change.
func (m *Manager) setReach(r reachFrame) {
	m.reach.Lock()
	same := slices.Equal(r.Heard, m.reach.frame.Heard) && slices.Equal(r.Sends, m.reach.frame.Sends)
	if !same {
		m.reach.frame = r
		m.reach.version++
	}
	m.reach.Unlock()
	if !same {
		for _, l := range m.linkList() {
			l.poke()
		}
	}
}

// currentReach returns this node's reach announcement and its version.
func (m *Manager) currentReach() (uint64, reachFrame) {
	m.reach.Lock()
	defer m.reach.Unlock()
	return m.reach.version, m.reach.frame
}

// pokePath wakes the writer of the path to node id (an acknowledgement is
// due to it).
func (m *Manager) pokePath(id string) {
	l := m.Link(id)
	if l == nil {
		return
	}
	l.mu.Lock()
	via := l.mu.via
	l.mu.Unlock()
	if via != nil {
		via.poke()
	}
}

// Reachable reports whether node id can be reached, directly or through a
// transit node: messages published for it now are on their way.
func (m *Manager) Reachable(id string) bool {
	l := m.Link(id)
	return l != nil && l.path.Load() != pathNone
}

// Transit returns the node whose link carries node id's messages when that
// is a transit node, or "" (for the admin API and tests).
func (m *Manager) Transit(id string) string {
	l := m.Link(id)
	if l == nil || l.path.Load() != pathTransit {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return nodeOf(l.mu.via)
}

func nodeOf(l *Link) string {
	if l == nil {
		return ""
	}
	return l.id
}

func pathName(p int32) string {
	switch p {
	case pathDirect:
		return "direct"
	case pathTransit:
		return "transit"
	}
	return "none"
}
