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
		c.seq, c.paused = r.Seq, true
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
