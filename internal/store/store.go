package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/sextantmq/sextant/internal/message"
)

// Sentinel errors. Returned errors wrap them; test with errors.Is.
var (
	// ErrClosed: the store is closed (or closing).
	ErrClosed = errors.New("store: closed")
	// ErrCorrupt: a stored record or the file's structure cannot be decoded.
	ErrCorrupt = errors.New("store: corrupt record")
	// ErrInvalid: a batch holds a record the store refuses to write.
	ErrInvalid = errors.New("store: invalid record")
	// ErrSchema: the file has a schema this version cannot read.
	ErrSchema = errors.New("store: unsupported schema")
	// ErrFailed: a write transaction failed; the store accepts no more writes.
	ErrFailed = errors.New("store: write failed")
	// ErrOptions: Options are invalid.
	ErrOptions = errors.New("store: invalid options")
	// ErrLocked: another process holds the file (Open waited
	// Options.LockTimeout for it).
	ErrLocked = errors.New("store: held by another process")
)

// SchemaVersion is the on-disk layout this package writes. Open refuses a
// file with a newer one.
const SchemaVersion = 1

// Bucket and key names of the layout (see the package documentation).
var (
	bucketMeta     = []byte("meta")
	bucketSessions = []byte("sessions")
	bucketMessages = []byte("messages")
	bucketInbound  = []byte("inbound")
	bucketRetained = []byte("retained")
	bucketCursors  = []byte("cursors")
	keySchema      = []byte("schema")
)

// Store is a node's durable local state in one bbolt file. All its methods
// are safe for concurrent use.
type Store struct {
	// Immutable after Open.
	db      *bolt.DB
	opts    Options
	queue   chan pending  // bounded; closed by Close under mu
	stopped chan struct{} // closed when the writer goroutine returns

	failure atomic.Pointer[error] // first write error, sticky

	mu struct {
		// Commit holds the read lock while sending to queue, so Close (write
		// lock) can close queue knowing no send is in progress.
		sync.RWMutex
		closed bool
	}

	// Owned by the writer goroutine; read by Close after stopped is closed.
	closeErr error
}

type pending struct {
	b    *Batch
	done func(error)
}

// Open opens or creates the store file at path, creating the buckets on first
// use. It fails with ErrSchema if the file was written by a newer schema, and
// waits at most Options.LockTimeout for another process holding the file.
func Open(path string, o Options) (*Store, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	o = o.withDefaults()
	db, err := bolt.Open(path, 0o600, &bolt.Options{
		Timeout:      o.LockTimeout,
		NoSync:       o.Fsync != FsyncAlways,
		FreelistType: bolt.FreelistMapType,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("%w: %s is locked by another process, probably another sextant serve with the same data-dir (waited %v)",
			ErrLocked, path, o.LockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	if err := db.Update(initSchema); err != nil {
		return nil, errors.Join(fmt.Errorf("store: open %s: %w", path, err), db.Close())
	}
	s := &Store{
		db:      db,
		opts:    o,
		queue:   make(chan pending, o.QueueLen),
		stopped: make(chan struct{}),
	}
	go s.run()
	return s, nil
}

func initSchema(tx *bolt.Tx) error {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		empty := true
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return fmt.Errorf("%w: file has data but no schema version", ErrSchema)
		}
		var err error
		if meta, err = tx.CreateBucket(bucketMeta); err != nil {
			return err
		}
		if err := meta.Put(keySchema, binary.BigEndian.AppendUint32(nil, SchemaVersion)); err != nil {
			return err
		}
	}
	v := meta.Get(keySchema)
	switch {
	case len(v) != 4 || binary.BigEndian.Uint32(v) == 0:
		return fmt.Errorf("%w: schema version %x", ErrCorrupt, v)
	case binary.BigEndian.Uint32(v) > SchemaVersion:
		return fmt.Errorf("%w: file has schema %d, this build reads up to %d", ErrSchema, binary.BigEndian.Uint32(v), SchemaVersion)
	}
	// cursors came after schema 1's first files: created on open, and
	// ignored by builds that do not know it.
	for _, name := range [][]byte{bucketSessions, bucketMessages, bucketInbound, bucketRetained, bucketCursors} {
		if _, err := tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// Commit queues b to be written in a later transaction, possibly together
// with other callers' batches, and returns. The store owns b until done is
// called; after that the caller may Reset and reuse it.
//
// done is called exactly once, from the store's single writer goroutine, when
// b is durable as the fsync mode defines it (nil) or cannot be (an error
// wrapping ErrFailed). Batches complete in the order Commit queued them: when
// done(nil) runs, every batch queued earlier is durable too. done must not
// block; it may be nil. An empty batch writes nothing and works as a barrier:
// it completes as soon as every batch queued before it has, not with the
// batches queued after it that the same transaction writes.
//
// Overload policy: the queue is bounded by Options.QueueLen. When it is full,
// Commit blocks (back-pressure to the publisher) until there is room or ctx
// ends. If Commit returns an error, b was not queued and done is never
// called: ctx.Err(), ErrClosed, b.Err() (ErrInvalid) or ErrFailed.
func (s *Store) Commit(ctx context.Context, b *Batch, done func(error)) error {
	if err := b.Err(); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if done == nil {
		done = func(error) {}
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.mu.closed {
		return ErrClosed
	}
	if p := s.failure.Load(); p != nil {
		return *p
	}
	select {
	case s.queue <- pending{b, done}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// CommitWait commits b and waits until it is durable. If ctx ends after b was
// queued, CommitWait returns ctx.Err() while b may still commit.
func (s *Store) CommitWait(ctx context.Context, b *Batch) error {
	ch := make(chan error, 1)
	if err := s.Commit(ctx, b, func(err error) { ch <- err }); err != nil {
		return err
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops accepting commits, writes every queued batch (calling its
// done), fsyncs and closes the file. Commits blocked on a full queue are
// queued first (or give up with their ctx). Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.mu.closed {
		s.mu.Unlock()
		return nil
	}
	s.mu.closed = true
	close(s.queue)
	s.mu.Unlock()
	<-s.stopped
	return errors.Join(s.closeErr, s.db.Close())
}

// run is the writer goroutine: it owns every write transaction.
func (s *Store) run() {
	defer close(s.stopped)
	var (
		tick  <-chan time.Time
		rearm func(time.Duration) bool
	)
	if s.opts.Fsync == FsyncBatch {
		t := s.opts.Clock.NewTimer(s.opts.SyncInterval)
		defer t.Stop()
		tick, rearm = t.C(), t.Reset
	}
	if dirty := s.loop(tick, rearm); dirty {
		s.closeErr = s.sync()
	}
}

// loop commits queued batches until the queue is closed and drained, and
// fsyncs on every tick (nil unless FsyncBatch) if something was written. It
// returns whether written data still awaits an fsync.
func (s *Store) loop(tick <-chan time.Time, rearm func(time.Duration) bool) (dirty bool) {
	var group []pending
	for {
		select {
		case p, ok := <-s.queue:
			if !ok {
				return dirty
			}
			group = append(group[:0], p)
			ops := p.b.Len()
			open := true
		gather:
			for ops < s.opts.MaxBatchOps {
				select {
				case p, ok := <-s.queue:
					if !ok {
						open = false
						break gather
					}
					group = append(group, p)
					ops += p.b.Len()
				default:
					break gather
				}
			}
			if s.commit(group, ops) && s.opts.Fsync != FsyncAlways {
				dirty = true
			}
			clear(group) // drop references to the callers' batches
			if !open {
				return dirty
			}
		case <-tick:
			if dirty {
				if err := s.sync(); err != nil {
					s.fail(err)
				}
				dirty = false
			}
			rearm(s.opts.SyncInterval)
		}
	}
}

// commit writes a group of batches in one transaction and completes them in
// order. It reports whether anything was written.
func (s *Store) commit(g []pending, ops int) bool {
	// Barriers at the head of the group: every batch queued before them is
	// complete already, so they need not wait for this transaction.
	for len(g) > 0 && g[0].b.Len() == 0 && s.failure.Load() == nil {
		g[0].done(nil)
		g = g[1:]
	}
	var err error
	wrote := false
	if p := s.failure.Load(); p != nil {
		err = *p
	} else if ops > 0 {
		start := time.Now()
		var tx *bolt.Tx
		err = s.db.Update(func(t *bolt.Tx) error {
			tx = t
			return apply(t, g)
		})
		if err == nil {
			wrote = true
			total := time.Since(start)
			// A committed transaction keeps its statistics.
			stats := tx.Stats()
			write := stats.GetWriteTime()
			s.opts.Observer.ObserveCommit(CommitInfo{Batches: len(g), Ops: ops, Apply: total - write, Write: write})
		} else {
			err = s.fail(err)
		}
	}
	for _, p := range g {
		p.done(err)
	}
	return wrote
}

// fail makes err the store's sticky failure (if it is the first) and returns
// the failure.
func (s *Store) fail(err error) error {
	werr := fmt.Errorf("%w: %w", ErrFailed, err)
	s.failure.CompareAndSwap(nil, &werr)
	return *s.failure.Load()
}

func (s *Store) sync() error {
	start := time.Now()
	if err := s.db.Sync(); err != nil {
		return fmt.Errorf("store: fsync: %w", err)
	}
	s.opts.Observer.ObserveSync(time.Since(start))
	return nil
}

// apply performs every op of g in tx.
func apply(tx *bolt.Tx, g []pending) error {
	a := applier{
		sessions: tx.Bucket(bucketSessions),
		messages: tx.Bucket(bucketMessages),
		inbound:  tx.Bucket(bucketInbound),
		retained: tx.Bucket(bucketRetained),
		cursors:  tx.Bucket(bucketCursors),
	}
	if a.sessions == nil || a.messages == nil || a.inbound == nil || a.retained == nil || a.cursors == nil {
		return fmt.Errorf("%w: missing bucket", ErrCorrupt)
	}
	for _, p := range g {
		for _, o := range p.b.ops {
			if err := a.apply(p.b, o); err != nil {
				return err
			}
		}
	}
	return nil
}

type applier struct {
	sessions, messages, inbound, retained, cursors *bolt.Bucket
	// The per-client bucket used last, since consecutive ops tend to share it.
	subRoot *bolt.Bucket
	subName []byte
	sub     *bolt.Bucket
}

func (a *applier) apply(b *Batch, o op) error {
	name := b.bytes(o.name)
	switch o.kind {
	case opPutSession:
		// The record's cursors replace those put since the last one.
		if a.subRoot == a.cursors {
			a.sub = nil
		}
		if err := a.cursors.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
			return err
		}
		return a.sessions.Put(name, b.bytes(o.val))
	case opDeleteSession:
		a.sub = nil
		if err := a.sessions.Delete(name); err != nil {
			return err
		}
		for _, root := range []*bolt.Bucket{a.messages, a.inbound, a.cursors} {
			if err := root.DeleteBucket(name); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
				return err
			}
		}
		return nil
	case opPutMessage, opPutInbound:
		root, val := a.messages, b.bytes(o.val)
		if o.kind == opPutInbound {
			root, val = a.inbound, []byte{}
		}
		sub, err := a.bucket(root, name, true)
		if err != nil {
			return err
		}
		return sub.Put(b.bytes(o.key), val)
	case opDeleteMessage, opDeleteInbound:
		root := a.messages
		if o.kind == opDeleteInbound {
			root = a.inbound
		}
		sub, err := a.bucket(root, name, false)
		if err != nil || sub == nil {
			return err
		}
		return sub.Delete(b.bytes(o.key))
	case opPutCursor:
		sub, err := a.bucket(a.cursors, name, true)
		if err != nil {
			return err
		}
		key, val := b.bytes(o.key), b.bytes(o.val)
		if old := sub.Get(key); len(old) == 8 && binary.BigEndian.Uint64(old) >= binary.BigEndian.Uint64(val) {
			return nil
		}
		return sub.Put(key, val)
	case opPutRetained:
		return a.retained.Put(name, b.bytes(o.val))
	case opDeleteRetained:
		return a.retained.Delete(name)
	case opDeleteRetainedTombstone:
		v := a.retained.Get(name)
		if v == nil {
			return nil
		}
		m, err := message.Decode(v)
		if err != nil || len(m.Payload) != 0 || m.Stamp != binary.BigEndian.Uint64(b.bytes(o.key)) {
			return nil // a message, a newer tombstone, or a record for the loader to report
		}
		return a.retained.Delete(name)
	}
	return fmt.Errorf("store: unknown op %d", o.kind)
}

// bucket returns root's bucket for a client, creating it if create is set
// (else nil if it does not exist).
func (a *applier) bucket(root *bolt.Bucket, name []byte, create bool) (*bolt.Bucket, error) {
	if a.sub != nil && a.subRoot == root && string(a.subName) == string(name) {
		return a.sub, nil
	}
	var sub *bolt.Bucket
	if create {
		var err error
		if sub, err = root.CreateBucketIfNotExists(name); err != nil {
			return nil, err
		}
	} else if sub = root.Bucket(name); sub == nil {
		return nil, nil
	}
	a.subRoot, a.subName, a.sub = root, name, sub
	return sub, nil
}
