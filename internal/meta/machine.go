package meta

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// machine adapts fsm.State to raft.FSM. Raft calls Apply, Snapshot and
// Restore from its FSM goroutine; readers load the current State at any time.
type machine struct {
	state atomic.Pointer[fsm.State]

	mu struct {
		sync.Mutex
		changed chan struct{} // closed and replaced after every change
	}
}

var (
	_ raft.FSM         = (*machine)(nil)
	_ raft.FSMSnapshot = snapshot(nil)
)

func newMachine() *machine {
	m := &machine{}
	m.state.Store(&fsm.State{})
	m.mu.changed = make(chan struct{})
	return m
}

func (m *machine) current() fsm.State { return *m.state.Load() }

// changed returns a channel closed at the next change.
func (m *machine) changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.changed
}

func (m *machine) set(s fsm.State) {
	m.state.Store(&s)
	m.mu.Lock()
	close(m.mu.changed)
	m.mu.changed = make(chan struct{})
	m.mu.Unlock()
}

// Apply applies a committed command; the fsm.Result is the future's response.
func (m *machine) Apply(l *raft.Log) any {
	next, res := m.current().ApplyEncoded(l.Index, l.Data)
	m.set(next)
	return res
}

// Snapshot captures the current state; encoding happens in Persist.
func (m *machine) Snapshot() (raft.FSMSnapshot, error) {
	return snapshot(m.current().Snapshot()), nil
}

// Restore replaces the state with a snapshot's.
func (m *machine) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, fsm.MaxEncodedBytes+1))
	if err != nil {
		return fmt.Errorf("meta: read snapshot: %w", err)
	}
	s, err := fsm.Restore(b)
	if err != nil {
		return fmt.Errorf("meta: restore snapshot: %w", err)
	}
	m.set(s)
	return nil
}

// snapshot is an encoded fsm.State.
type snapshot []byte

func (s snapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("meta: write snapshot: %w", err)
	}
	return sink.Close()
}

func (s snapshot) Release() {}
