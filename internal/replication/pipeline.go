package replication

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/go-msgpack/v2/codec"
	"github.com/hashicorp/raft"
	wal "github.com/hashicorp/raft-wal"
)

// transportTimeout bounds a group connection's dial, each write, and each
// wait for an answer.
const transportTimeout = 10 * time.Second

// groupTransport is a group's Raft transport: the library's
// NetworkTransport (configured without its own pipeline), whose
// AppendEntries it times, with a replication pipeline of this package's
// (pipeline) when Config.Pipeline allows more than one AppendEntries in
// flight per follower.
type groupTransport struct {
	*raft.NetworkTransport
	// immutable
	layer   *layer
	metrics *metrics
	depth   int                              // AppendEntries in flight per follower (Config.Pipeline)
	timeout time.Duration                    // bounds each write and each wait for an answer
	clamp   func(*raft.AppendEntriesRequest) // caps the commit index sent (behindLog.clamp); nil: none
}

// The library looks for these on its transport (pre-vote elections,
// closing on shutdown); the embedded NetworkTransport provides them.
var (
	_ raft.WithPreVote = (*groupTransport)(nil)
	_ raft.WithClose   = (*groupTransport)(nil)
)

// AppendEntries sends one AppendEntries and waits for its answer (Raft's
// replication when not pipelining, and its heartbeats).
func (t *groupTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if t.clamp != nil {
		t.clamp(args)
	}
	start := time.Now()
	err := t.NetworkTransport.AppendEntries(id, target, args, resp)
	if err == nil && len(args.Entries) > 0 {
		t.metrics.appendRPC.Observe(time.Since(start).Seconds())
	}
	return err
}

// AppendEntriesPipeline opens a pipeline to a follower on a connection of
// its own.
func (t *groupTransport) AppendEntriesPipeline(_ raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	if t.depth < 2 {
		return nil, raft.ErrPipelineReplicationNotSupported
	}
	c, err := t.layer.Dial(target, t.timeout)
	if err != nil {
		return nil, err
	}
	t.metrics.pipelines[pipelineOpened].Inc()
	return newPipeline(c, t.depth, t.timeout, t.metrics, t.layer.Done(), t.clamp), nil
}

// Wire format of a pipelined AppendEntries, the NetworkTransport's (its
// accepting side answers them): the RPC type byte (rpcAppendEntries, 0),
// the msgpack request; the answer is an error string, then the msgpack
// response. Answers come in request order: the accepting side handles one
// request of a connection at a time.
const rpcAppendEntries byte = 0

// msgpackHandle is the NetworkTransport's encoding (its default: times
// in the old format).
func msgpackHandle() *codec.MsgpackHandle {
	return &codec.MsgpackHandle{BasicHandle: codec.BasicHandle{TimeNotBuiltin: true}}
}

// errPipelineFailed: an earlier AppendEntries of the pipeline failed or
// was refused; Raft replicates without the pipeline again, from the
// follower's last acknowledged entry.
var errPipelineFailed = errors.New("replication: the pipeline stopped after a failed or refused append")

// pipeline is a raft.AppendPipeline: up to depth AppendEntries in flight
// to one follower on one connection, so the follower stores batch k+1
// right after batch k instead of a round trip later.
//
// The library's own pipeline wedges after a refused append
// (hashicorp/raft#612): Raft's reader of the answers stops at the first
// refused one, so answers pile up unread, its decoder blocks handing the
// next one over, and the sender blocks for room in flight, which only
// Close (called by that same sender, when it notices the reader stopped)
// would give. Here the decoder marks the pipeline failed at the first
// answer that makes Raft's reader stop (an error, a refusal, a newer
// term), before handing it over: from then on AppendEntries fails at once,
// including a call waiting for room, so the sender leaves the pipeline,
// closes it and replicates one request at a time from the follower's last
// acknowledged entry, as after any failure; and the decoder hands nothing
// over after that answer, so it never waits for a reader that stopped.
type pipeline struct {
	// immutable
	conn    net.Conn
	timeout time.Duration
	metrics *metrics
	slots   chan struct{}                    // one per request sent and not answered
	sent    chan *appendFuture               // in send order, for the decoder
	done    chan raft.AppendFuture           // answered, for Raft's reader
	failed  chan struct{}                    // closed at the first failed or refused answer
	stop    chan struct{}                    // closed by Close
	closed  <-chan struct{}                  // the group's streams closed
	wg      sync.WaitGroup                   // the decoder
	clamp   func(*raft.AppendEntriesRequest) // caps the commit index sent (groupTransport.clamp); nil: none

	failOnce  sync.Once
	closeOnce sync.Once

	mu  sync.Mutex // the writer
	w   *bufio.Writer
	enc *codec.Encoder
	dec *codec.Decoder // the decoder's only
}

// pipelineBuffer is the write buffer of a pipeline's connection. Every
// leader keeps one per follower, idle groups too; an entry's data larger
// than what is free goes to the connection directly.
const pipelineBuffer = 64 << 10

func newPipeline(c net.Conn, depth int, timeout time.Duration, m *metrics, closed <-chan struct{}, clamp func(*raft.AppendEntriesRequest)) *pipeline {
	p := &pipeline{
		conn: c, timeout: timeout, metrics: m,
		slots:  make(chan struct{}, depth),
		sent:   make(chan *appendFuture, depth),
		done:   make(chan raft.AppendFuture, depth),
		failed: make(chan struct{}),
		stop:   make(chan struct{}),
		closed: closed,
		clamp:  clamp,
		w:      bufio.NewWriterSize(c, pipelineBuffer),
		dec:    codec.NewDecoder(bufio.NewReader(c), msgpackHandle()),
	}
	p.enc = codec.NewEncoder(p.w, msgpackHandle())
	p.wg.Add(1)
	go p.decode()
	return p
}

// AppendEntries sends args, waiting for room in flight (back-pressure);
// it fails at once once the pipeline failed or closed.
func (p *pipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	select {
	case <-p.failed:
		return nil, errPipelineFailed
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	default:
	}
	select {
	case p.slots <- struct{}{}:
	case <-p.failed:
		return nil, errPipelineFailed
	case <-p.stop:
		return nil, raft.ErrPipelineShutdown
	case <-p.closed:
		return nil, raft.ErrPipelineShutdown
	}
	f := &appendFuture{start: time.Now(), args: args, resp: resp, ch: make(chan struct{})}
	if p.clamp != nil {
		p.clamp(args)
	}
	p.mu.Lock()
	err := p.write(args)
	if err == nil {
		// Queued under the writer's lock, so the decoder expects the
		// answers in the order the requests went out. Never blocks: a
		// slot is held for it.
		p.sent <- f
	}
	p.mu.Unlock()
	if err != nil {
		<-p.slots
		p.fail()
		return nil, fmt.Errorf("replication: pipelined append: %w", err)
	}
	return f, nil
}

func (p *pipeline) write(args *raft.AppendEntriesRequest) error {
	if p.timeout > 0 {
		_ = p.conn.SetWriteDeadline(time.Now().Add(p.timeout))
	}
	if err := p.w.WriteByte(rpcAppendEntries); err != nil {
		return err
	}
	if err := p.enc.Encode(args); err != nil {
		return err
	}
	return p.w.Flush()
}

// decode reads the answers in request order and hands them to Raft's
// reader, until a failure, Close, or the group's streams closing.
func (p *pipeline) decode() {
	defer p.wg.Done()
	for {
		var f *appendFuture
		select {
		case f = <-p.sent:
		case <-p.stop:
			return
		case <-p.closed:
			return
		}
		if p.timeout > 0 {
			_ = p.conn.SetReadDeadline(time.Now().Add(p.timeout))
		}
		err := p.read(f.resp)
		// Raft's reader stops at this answer: fail before freeing its
		// slot, so that a sender waiting for room leaves instead of
		// sending on.
		stops := err != nil || !f.resp.Success || f.resp.Term > f.args.Term
		if stops {
			p.fail()
		}
		<-p.slots
		if err == nil && len(f.args.Entries) > 0 {
			p.metrics.appendRPC.Observe(time.Since(f.start).Seconds())
		}
		f.respond(err)
		// Waits only while Raft's reader is busy: it reads until an
		// answer that stops it, which is the decoder's last. After a
		// failure nothing more is sent, and the connection is not read
		// again.
		select {
		case p.done <- f:
		case <-p.stop:
			return
		}
		if stops {
			return
		}
	}
}

func (p *pipeline) read(resp *raft.AppendEntriesResponse) error {
	var rpcErr string
	if err := p.dec.Decode(&rpcErr); err != nil {
		return err
	}
	if err := p.dec.Decode(resp); err != nil {
		return err
	}
	if rpcErr != "" {
		return errors.New(rpcErr)
	}
	return nil
}

func (p *pipeline) fail() {
	p.failOnce.Do(func() {
		close(p.failed)
		p.metrics.pipelines[pipelineFailed].Inc()
	})
}

// Consumer yields the answers in request order.
func (p *pipeline) Consumer() <-chan raft.AppendFuture { return p.done }

// Close stops the decoder and closes the connection; answers still in
// flight are dropped (Raft resends from the follower's last acknowledged
// entry).
func (p *pipeline) Close() error {
	p.closeOnce.Do(func() {
		close(p.stop)
		_ = p.conn.Close()
		p.wg.Wait()
	})
	return nil
}

// appendFuture is one pipelined AppendEntries (raft.AppendFuture).
type appendFuture struct {
	start time.Time
	args  *raft.AppendEntriesRequest
	resp  *raft.AppendEntriesResponse
	ch    chan struct{} // closed when answered
	err   error
}

func (f *appendFuture) respond(err error) {
	f.err = err
	close(f.ch)
}

func (f *appendFuture) Error() error {
	<-f.ch
	return f.err
}
func (f *appendFuture) Start() time.Time                      { return f.start }
func (f *appendFuture) Request() *raft.AppendEntriesRequest   { return f.args }
func (f *appendFuture) Response() *raft.AppendEntriesResponse { return f.resp }

// timedLog is a group's log store with each append timed
// (sextant_replication_log_write_seconds).
type timedLog struct {
	*wal.WAL
	metrics *metrics
}

func (l timedLog) StoreLog(log *raft.Log) error { return l.StoreLogs([]*raft.Log{log}) }

func (l timedLog) StoreLogs(logs []*raft.Log) error {
	start := time.Now()
	err := l.WAL.StoreLogs(logs)
	l.metrics.logWrite.Observe(time.Since(start).Seconds())
	return err
}
