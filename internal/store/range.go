package store

import (
	"encoding/binary"

	bolt "go.etcd.io/bbolt"
)

// LoadMessagesFrom calls fn for up to limit stored messages of clientID with
// Seq >= from, in Seq order, from one read transaction. Sessions use it to
// bring back messages that overflowed their in-memory queue.
func (s *Store) LoadMessagesFrom(clientID string, from uint64, limit int, fn func(*QueuedMessage) error) error {
	if limit <= 0 {
		return nil
	}
	var recs []*QueuedMessage
	err := s.view(func(tx *bolt.Tx) error {
		b := bucketAt(tx, [][]byte{bucketMessages, []byte(clientID)})
		if b == nil {
			return nil
		}
		var start [8]byte
		binary.BigEndian.PutUint64(start[:], from)
		c := b.Cursor()
		for k, v := c.Seek(start[:]); k != nil && len(recs) < limit; k, v = c.Next() {
			q, err := decodeQueued(k, v)
			if err != nil {
				return err
			}
			recs = append(recs, q)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, q := range recs {
		if err := fn(q); err != nil {
			return err
		}
	}
	return nil
}
