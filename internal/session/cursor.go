package session

import (
	"maps"
	"slices"

	"github.com/sextantmq/sextant/internal/store"
)

// A session's cursor on a placement group is its backlog on the group's
// sequenced topics: the position (Seq) of the last record it took. The
// group's records reach a session two ways, live (the node's feed, through
// the broker) and replayed (sx-from history, a persistent session's backlog
// after it reconnects), and the cursor makes them one stream: a delivery
// is taken only past the cursor, so no record is taken twice and none out
// of order; and while the cursor is paused, live deliveries wait (they are
// skipped, not queued) for the replay to catch up with the feed, which
// resumes them (Resume). A persistent session whose connection is gone
// pauses on the first live record it cannot take: its backlog is the
// cursor, not a copy of the records, and its replay starts from there when
// the client returns.
type cursor struct {
	seq    uint64
	paused bool
	// stored: the position last written to the store for a persistent
	// session (storeCursorLocked), or restored from it.
	stored uint64
}

// cursorEvery bounds how far a persistent session's stored cursor may
// lag the positions it took through QoS 0 deliveries only (QoS 1/2 ones
// write it with their stored copy): what a crash of its node can replay
// to it again.
const cursorEvery = 256

// storeCursorLocked writes the session's cursor on d's group into p's
// batch after the session took d, if the session is persistent: with every
// QoS 1/2 delivery (the batch holds the delivery's stored copy, so the
// copy and the position past it are durable together), and at least every
// cursorEvery positions of QoS 0 ones. After a crash of the node the
// session's backlog is replayed from there: what it took before is either
// completed or in its stored queue (sent again, with DUP if it was sent),
// never delivered a second time from the log.
func (s *Session) storeCursorLocked(d *Delivery, p *Persist) {
	if d.Group == "" || p == nil || s.mu.expiry == 0 || s.env.Store == nil {
		return
	}
	c := s.mu.cursors[d.Group]
	if c == nil || c.seq == c.stored || d.QoS == 0 && c.seq > c.stored && c.seq-c.stored < cursorEvery {
		return
	}
	p.batch().PutCursor(s.ID, d.Group, c.seq)
	c.stored = c.seq
}

// Cursor is a session's position on a placement group.
type Cursor struct {
	Seq uint64
	// Paused: live deliveries wait for a replay (started on reconnect).
	Paused bool
}

// admitLocked decides whether the session takes d, a record of a group.
func (s *Session) admitLocked(d *Delivery) bool {
	c := s.mu.cursors[d.Group]
	if c != nil && d.Seq <= c.seq {
		return false // taken already (a replay and the feed overlap)
	}
	if d.Replay {
		return true
	}
	if c != nil && c.paused {
		return false
	}
	if s.mu.conn == nil && s.mu.expiry > 0 {
		// The backlog of an offline persistent session is its cursor.
		if c == nil {
			c = s.cursorLocked(d.Group)
			c.seq = d.Seq - 1
		}
		c.paused = true
		return false
	}
	return true
}

// passedLocked moves the cursor past d, which the session took.
func (s *Session) passedLocked(d *Delivery) {
	if d.Group == "" {
		return
	}
	if c := s.cursorLocked(d.Group); d.Seq > c.seq {
		c.seq = d.Seq
	}
}

func (s *Session) cursorLocked(group string) *cursor {
	if s.mu.cursors == nil {
		s.mu.cursors = map[string]*cursor{}
	}
	c := s.mu.cursors[group]
	if c == nil {
		c = &cursor{}
		s.mu.cursors[group] = c
	}
	return c
}

// Cursors returns the session's cursors, by group.
func (s *Session) Cursors() map[string]Cursor {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]Cursor, len(s.mu.cursors))
	for g, c := range s.mu.cursors {
		out[g] = Cursor{Seq: c.seq, Paused: c.paused}
	}
	return out
}

// Pause makes live deliveries of group wait for a replay from position
// from: the cursor moves back to from-1 if it was past it. It returns the
// cursor's position before (0: none), up to which live deliveries were
// taken.
func (s *Session) Pause(group string, from uint64) (prev uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.cursorLocked(group)
	prev = c.seq
	c.paused = true
	if from > 0 && c.seq >= from {
		c.seq = from - 1
	}
	return prev
}

// Resume lets live deliveries of group through again: the replay caught up
// with the feed.
func (s *Session) Resume(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.mu.cursors[group]; c != nil {
		c.paused = false
	}
}

// Forget drops the cursor on group (its record was deleted).
func (s *Session) Forget(group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.mu.cursors, group)
}

// RestoreCursors sets the cursors of a session loaded or moved here: all
// paused, so that the records after them are replayed when the client
// connects.
func (s *Session) RestoreCursors(rs []store.CursorRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		c := s.cursorLocked(r.Group)
		c.seq, c.paused, c.stored = r.Seq, true, r.Seq
	}
}

// cursorRecordsLocked are the cursors as stored with the session.
func (s *Session) cursorRecordsLocked() []store.CursorRecord {
	if len(s.mu.cursors) == 0 {
		return nil
	}
	out := make([]store.CursorRecord, 0, len(s.mu.cursors))
	for _, g := range slices.Sorted(maps.Keys(s.mu.cursors)) {
		out = append(out, store.CursorRecord{Group: g, Seq: s.mu.cursors[g].seq})
	}
	return out
}
