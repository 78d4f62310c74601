package store

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/sextantmq/sextant/internal/message"
)

// scanChunk is how many records a Load reads per read transaction. Callbacks
// run between transactions, so they may commit (and wait) freely: a read
// transaction held across a wait would block bbolt's remapping when a commit
// grows the file.
const scanChunk = 256

// LoadSessions calls fn for every stored session, in client id order. It
// stops at the first error, from fn or a corrupt record (ErrCorrupt).
//
// Each Load reads committed data in chunks of several read transactions: it
// sees every record at most once, but is not a snapshot if commits run
// concurrently. Load at startup, before committing.
func (s *Store) LoadSessions(fn func(*SessionRecord) error) error {
	return scan(s, [][]byte{bucketSessions}, decodeSession, func(r *SessionRecord) error {
		if err := s.mergeCursors(r); err != nil {
			return err
		}
		return fn(r)
	})
}

// mergeCursors puts into r the cursors recorded by PutCursor since r was
// stored: they are newer than r's.
func (s *Store) mergeCursors(r *SessionRecord) error {
	err := s.view(func(tx *bolt.Tx) error {
		b := bucketAt(tx, [][]byte{bucketCursors, []byte(r.ClientID)})
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) == 0 || len(v) != 8 || binary.BigEndian.Uint64(v) == 0 {
				return fmt.Errorf("%w: cursor %q of %q: value %x", ErrCorrupt, k, r.ClientID, v)
			}
			c := CursorRecord{Group: string(k), Seq: binary.BigEndian.Uint64(v)}
			if i := slices.IndexFunc(r.Cursors, func(x CursorRecord) bool { return x.Group == c.Group }); i >= 0 {
				r.Cursors[i] = c
			} else {
				r.Cursors = append(r.Cursors, c)
			}
			return nil
		})
	})
	if err == nil {
		slices.SortFunc(r.Cursors, func(a, b CursorRecord) int { return strings.Compare(a.Group, b.Group) })
	}
	return err
}

// LoadMessages calls fn for every stored message of clientID, in Seq order.
func (s *Store) LoadMessages(clientID string, fn func(*QueuedMessage) error) error {
	return scan(s, [][]byte{bucketMessages, []byte(clientID)}, decodeQueued, fn)
}

// LoadRetained calls fn for every retained message, in topic order.
func (s *Store) LoadRetained(fn func(*message.Message) error) error {
	return scan(s, [][]byte{bucketRetained}, decodeRetained, fn)
}

// LoadInbound returns clientID's inbound QoS 2 packet ids awaiting PUBREL, in
// increasing order.
func (s *Store) LoadInbound(clientID string) ([]uint16, error) {
	var ids []uint16
	err := s.view(func(tx *bolt.Tx) error {
		b := bucketAt(tx, [][]byte{bucketInbound, []byte(clientID)})
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			id, err := decodeInbound(k)
			if err == nil && (v == nil || len(v) != 0) { // nil: a nested bucket
				err = fmt.Errorf("%w: inbound packet id %d has a value or is a bucket", ErrCorrupt, id)
			}
			if err != nil {
				return fmt.Errorf("%w (client %q)", err, clientID)
			}
			ids = append(ids, id)
			return nil
		})
	})
	return ids, err
}

// NextSeq returns the Seq to give clientID's next queued message: one more
// than the highest stored, or 1. A session calls it once when it is restored
// and counts up from there in memory; since Seq only has to order the
// messages that exist, reusing the Seq of a deleted last message is harmless.
func (s *Store) NextSeq(clientID string) (uint64, error) {
	next := uint64(1)
	err := s.view(func(tx *bolt.Tx) error {
		b := bucketAt(tx, [][]byte{bucketMessages, []byte(clientID)})
		if b == nil {
			return nil
		}
		k, _ := b.Cursor().Last()
		if k == nil {
			return nil
		}
		if len(k) != 8 {
			return fmt.Errorf("%w: message key %x of %q", ErrCorrupt, k, clientID)
		}
		next = binary.BigEndian.Uint64(k) + 1
		return nil
	})
	return next, err
}

// Check verifies the file's page structure (bbolt's consistency check) and
// returns the problems found, wrapping ErrCorrupt. It reads the whole file.
func (s *Store) Check() error {
	return s.view(func(tx *bolt.Tx) error {
		var errs []error
		for err := range tx.Check() {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return fmt.Errorf("%w: %d problems, first: %w", ErrCorrupt, len(errs), errs[0])
		}
		return nil
	})
}

func (s *Store) view(fn func(*bolt.Tx) error) error {
	err := s.db.View(fn)
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// bucketAt follows path from the root; nil if a bucket is missing.
func bucketAt(tx *bolt.Tx, path [][]byte) *bolt.Bucket {
	b := tx.Bucket(path[0])
	for _, name := range path[1:] {
		if b == nil {
			return nil
		}
		b = b.Bucket(name)
	}
	return b
}

// scan decodes the records of the bucket at path in key order, scanChunk per
// read transaction, and calls fn for each outside the transaction.
func scan[T any](s *Store, path [][]byte, decode func(k, v []byte) (T, error), fn func(T) error) error {
	var (
		after []byte // last key read; nil before the first chunk
		recs  = make([]T, 0, scanChunk)
	)
	for {
		recs = recs[:0]
		err := s.view(func(tx *bolt.Tx) error {
			b := bucketAt(tx, path)
			if b == nil {
				return nil
			}
			c := b.Cursor()
			k, v := c.First()
			if after != nil {
				k, v = c.Seek(after)
				if bytes.Equal(k, after) {
					k, v = c.Next()
				}
			}
			for ; k != nil && len(recs) < scanChunk; k, v = c.Next() {
				if v == nil {
					return fmt.Errorf("%w: unexpected bucket %q in %q", ErrCorrupt, k, path)
				}
				rec, err := decode(k, v)
				if err != nil {
					return err
				}
				recs = append(recs, rec)
				after = append(after[:0], k...)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, r := range recs {
			if err := fn(r); err != nil {
				return err
			}
		}
		if len(recs) < scanChunk {
			return nil
		}
	}
}
