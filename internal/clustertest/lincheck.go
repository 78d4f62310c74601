package clustertest

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anishathalye/porcupine"
)

// The linearizability model of a sequenced topic's log, for porcupine:
//
//	append(msg) -> index       a publish, returning on its acknowledgement
//	read(index) -> msg | none  a history read of one index
//	latest()    -> index       a history read of the latest index (0: none)
//
// The state is the log's prefix linearized so far. An append returning k
// is legal only as the log's (k)th record; a read of i finds the record
// appended at i once one is, and nothing before; latest is the length.
// A publish's outcome is known from the final log (every append that took
// effect is in it): its index there is the append's output. A publish
// that was never acknowledged returns at the end of the history; one that
// is in the log several times (a QoS 1 publisher's retransmission through
// another node) is one append per record, all from its first attempt, the
// first of them returning at its acknowledgement and the others at the
// end.

// LogOpKind is the kind of a log operation.
type LogOpKind int

// The log operations.
const (
	OpAppend LogOpKind = iota
	OpRead
	OpLatest
)

// LogInput is an operation's input: the topic, and the payload appended
// or the index read.
type LogInput struct {
	Kind    LogOpKind
	Topic   string
	Payload string // OpAppend
	Index   uint64 // OpRead
}

// LogOutput is an operation's output: the index an append got or latest
// returned; for a read, whether the index was found and its payload.
type LogOutput struct {
	Index   uint64
	Found   bool
	Payload string
}

// logState is a linearized prefix of one topic's log: an immutable list
// from its last record back.
type logState struct {
	n       uint64
	payload string
	prev    *logState
}

func (s *logState) at(i uint64) (string, bool) {
	for ; s != nil && s.n >= i; s = s.prev {
		if s.n == i {
			return s.payload, true
		}
	}
	return "", false
}

func (s *logState) len() uint64 {
	if s == nil {
		return 0
	}
	return s.n
}

// LogModel is the porcupine model above, partitioned by topic.
var LogModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		by := map[string][]porcupine.Operation{}
		var topics []string
		for _, op := range history {
			t := op.Input.(LogInput).Topic
			if _, ok := by[t]; !ok {
				topics = append(topics, t)
			}
			by[t] = append(by[t], op)
		}
		out := make([][]porcupine.Operation, 0, len(topics))
		for _, t := range topics {
			out = append(out, by[t])
		}
		return out
	},
	Init: func() any { return (*logState)(nil) },
	Step: func(state, input, output any) (bool, any) {
		s, in, out := state.(*logState), input.(LogInput), output.(LogOutput)
		switch in.Kind {
		case OpAppend:
			if out.Index != s.len()+1 {
				return false, s
			}
			return true, &logState{n: out.Index, payload: in.Payload, prev: s}
		case OpRead:
			p, ok := s.at(in.Index)
			return ok == out.Found && p == out.Payload, s
		case OpLatest:
			return out.Index == s.len(), s
		}
		return false, s
	},
	// Two states reached by linearizing the same operations have the same
	// length and, since every append's index is fixed by its output, the
	// same records: the length identifies them.
	Equal: func(a, b any) bool { return a.(*logState).len() == b.(*logState).len() },
	Hash:  func(s any) uint64 { return s.(*logState).len() },
	DescribeOperation: func(input, output any) string {
		in, out := input.(LogInput), output.(LogOutput)
		switch in.Kind {
		case OpAppend:
			return fmt.Sprintf("append(%s, %q) -> %d", in.Topic, in.Payload, out.Index)
		case OpRead:
			if !out.Found {
				return fmt.Sprintf("read(%s, %d) -> none", in.Topic, in.Index)
			}
			return fmt.Sprintf("read(%s, %d) -> %q", in.Topic, in.Index, out.Payload)
		default:
			return fmt.Sprintf("latest(%s) -> %d", in.Topic, out.Index)
		}
	},
	DescribeState: func(s any) string { return fmt.Sprintf("%d records", s.(*logState).len()) },
	DescribeOperationMetadata: func(info any) string {
		if s, ok := info.(string); ok {
			return s
		}
		return ""
	},
}

// LinRecorder records a run's publishes and history reads with logical
// timestamps (one counter for every client: an operation that returned
// before another was invoked has the smaller stamps, which is what
// linearizability compares; synctest's fake clock would make most of them
// simultaneous). It is safe for concurrent use.
type LinRecorder struct {
	clock atomic.Int64

	mu struct {
		sync.Mutex
		appends map[string]*linAppend // by payload
		reads   []porcupine.Operation
	}
}

type linAppend struct {
	topic, payload string
	client         int
	call, ret      int64 // first attempt; acknowledgement (0: none)
}

// NewLinRecorder returns an empty recorder.
func NewLinRecorder() *LinRecorder {
	r := &LinRecorder{}
	r.mu.appends = map[string]*linAppend{}
	return r
}

// Now returns the next timestamp.
func (r *LinRecorder) Now() int64 { return r.clock.Add(1) }

// Attempt records that client is about to send payload to topic (again,
// if it retries): call it before the PUBLISH is written.
func (r *LinRecorder) Attempt(client int, topic, payload string) {
	at := r.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.mu.appends[payload]; !ok {
		r.mu.appends[payload] = &linAppend{topic: topic, payload: payload, client: client, call: at}
	}
}

// Acked records payload's acknowledgement: call it when it arrives.
func (r *LinRecorder) Acked(payload string) {
	at := r.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if a := r.mu.appends[payload]; a != nil && a.ret == 0 {
		a.ret = at
	}
}

// Read records a read of topic's index, invoked at call (a Now taken
// before it was sent), that found payload or nothing; note (where it was
// served) shows in the visualization and the stale-read report.
func (r *LinRecorder) Read(client int, topic string, index uint64, call int64, found bool, payload, note string) {
	r.add(porcupine.Operation{ClientId: client, Call: call, Return: r.Now(), Metadata: note,
		Input: LogInput{Kind: OpRead, Topic: topic, Index: index}, Output: LogOutput{Found: found, Payload: payload}})
}

// Latest records a read of topic's latest index, invoked at call.
func (r *LinRecorder) Latest(client int, topic string, call int64, latest uint64, note string) {
	r.add(porcupine.Operation{ClientId: client, Call: call, Return: r.Now(), Metadata: note,
		Input: LogInput{Kind: OpLatest, Topic: topic}, Output: LogOutput{Index: latest}})
}

func (r *LinRecorder) add(op porcupine.Operation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.reads = append(r.mu.reads, op)
}

// Reads returns how many reads were recorded.
func (r *LinRecorder) Reads() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.mu.reads)
}

// History builds the operations to check from the final logs (topic ->
// payloads, index i at [i-1]): each publish found in them is one append
// per record holding it; a publish in none took no effect and is left
// out (an acknowledged one is a loss, which the delivery checks report).
func (r *LinRecorder) History(final map[string][]string) []porcupine.Operation {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := map[string]map[string][]uint64{} // topic -> payload -> indexes
	for topic, log := range final {
		m := map[string][]uint64{}
		for i, p := range log {
			m[p] = append(m[p], uint64(i+1))
		}
		at[topic] = m
	}
	ops := slices.Clone(r.mu.reads)
	for _, a := range r.mu.appends {
		for j, idx := range at[a.topic][a.payload] {
			ret := int64(math.MaxInt64)
			if j == 0 && a.ret != 0 {
				ret = a.ret
			}
			ops = append(ops, porcupine.Operation{ClientId: a.client, Call: a.call, Return: ret,
				Input: LogInput{Kind: OpAppend, Topic: a.topic, Payload: a.payload}, Output: LogOutput{Index: idx}})
		}
	}
	return ops
}

// Stale lists reads that missed an append acknowledged before they began
// (the plainest violations, named with where they were served), at most
// limit of them.
func (r *LinRecorder) Stale(final map[string][]string, limit int) []string {
	ops := r.History(final)
	acked := map[string]map[uint64]int64{} // topic -> index -> when its append returned
	for _, op := range ops {
		in, out := op.Input.(LogInput), op.Output.(LogOutput)
		if in.Kind == OpAppend && op.Return != math.MaxInt64 {
			if acked[in.Topic] == nil {
				acked[in.Topic] = map[uint64]int64{}
			}
			acked[in.Topic][out.Index] = op.Return
		}
	}
	// latestBefore is the highest index of topic acknowledged before at.
	latestBefore := func(topic string, at int64) uint64 {
		var hi uint64
		for idx, ret := range acked[topic] {
			if ret < at {
				hi = max(hi, idx)
			}
		}
		return hi
	}
	var out []string
	for _, op := range ops {
		in, o := op.Input.(LogInput), op.Output.(LogOutput)
		switch {
		case in.Kind == OpRead && !o.Found:
			if ret, ok := acked[in.Topic][in.Index]; ok && ret < op.Call {
				out = append(out, fmt.Sprintf("read(%s, %d) -> none at %d (%v), its append returned at %d", in.Topic, in.Index, op.Call, op.Metadata, ret))
			}
		case in.Kind == OpLatest:
			if hi := latestBefore(in.Topic, op.Call); o.Index < hi {
				out = append(out, fmt.Sprintf("latest(%s) -> %d at %d (%v), %d was acknowledged before", in.Topic, o.Index, op.Call, op.Metadata, hi))
			}
		}
		if len(out) >= limit {
			break
		}
	}
	return out
}

// ErrNoVerdict: porcupine did not finish within its time.
var ErrNoVerdict = errors.New("linearizability: no verdict")

// CheckLinearizable checks the recorded history against the final logs.
// On a violation it writes porcupine's visualization into dir (a new
// directory under the system's temporary one when dir is "", kept after
// the test) and returns an error naming the file; a check that does not
// finish within timeout returns ErrNoVerdict (not a violation).
func (r *LinRecorder) CheckLinearizable(final map[string][]string, dir string, timeout time.Duration) error {
	ops := r.History(final)
	res, info := porcupine.CheckOperationsVerbose(LogModel, ops, timeout)
	switch res {
	case porcupine.Ok:
		return nil
	case porcupine.Unknown:
		return fmt.Errorf("%w within %v over %d operations", ErrNoVerdict, timeout, len(ops))
	}
	if dir == "" {
		d, err := os.MkdirTemp("", "sextant-lincheck-")
		if err != nil {
			return fmt.Errorf("linearizability: not linearizable (%d operations); no directory for the visualization: %w", len(ops), err)
		}
		dir = d
	}
	path := filepath.Join(dir, "sequenced-linearizability.html")
	if err := porcupine.VisualizePath(LogModel, info, path); err != nil {
		return fmt.Errorf("linearizability: not linearizable (%d operations); visualization failed: %w", len(ops), err)
	}
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("linearizability: not linearizable (%d operations); no visualization: %w", len(ops), err)
	}
	return fmt.Errorf("linearizability: not linearizable (%d operations); visualization: %s", len(ops), path)
}
