package replica

import (
	"io"

	"github.com/sextantmq/sextant/internal/replication"
	"github.com/sextantmq/sextant/internal/sequencer"
)

// FSM is a sequencer as a replication.FSM.
type FSM struct {
	s       *sequencer.Sequencer
	entries []sequencer.Entry // owned by the apply goroutine
}

var (
	_ replication.FSM[sequencer.Result] = (*FSM)(nil)
	_ replication.Snapshot              = (*sequencer.Snapshot)(nil)
)

// New returns s as the state machine of a replica (replication.OpenGroup
// or replication.NewSingle). The caller keeps s for reads and closes it
// after the replica.
func New(s *sequencer.Sequencer) *FSM { return &FSM{s: s} }

// Applied is the sequencer's.
func (f *FSM) Applied() uint64 { return f.s.Applied() }

// Apply hands the entries to the sequencer.
func (f *FSM) Apply(entries []replication.Entry) ([]sequencer.Result, error) {
	f.entries = f.entries[:0]
	for _, e := range entries {
		f.entries = append(f.entries, sequencer.Entry{Index: e.Index, Term: e.Term, Time: e.Time, Cmd: e.Cmd})
	}
	res, err := f.s.Apply(f.entries)
	clear(f.entries) // do not pin the commands until the next batch
	return res, err
}

// Snapshot is the sequencer's.
func (f *FSM) Snapshot() (replication.Snapshot, error) {
	sn, err := f.s.Snapshot()
	if err != nil {
		return nil, err
	}
	return sn, nil
}

// Restore is the sequencer's.
func (f *FSM) Restore(r io.Reader) error { return f.s.Restore(r) }
