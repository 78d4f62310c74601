package sequencer

import (
	"encoding/binary"
	"fmt"

	"github.com/sextantmq/sextant/internal/wire"
)

// dedupKey is what a publish is deduplicated by, without its nonce: a
// client's packet id holds one entry at a time.
type dedupKey struct {
	client string
	pid    uint16
}

// dedupEntry is the record a key last got: its nonce and what it was
// assigned.
type dedupEntry struct {
	nonce uint64
	seq   uint64 // position in the group's log
	index uint64 // index in its topic
}

// table is the dedup table: for each (client, packet id), the newest record
// that carried it among the records at positions >= floor. Its content is a
// function of the log's records alone (doc.go, "Deduplication"): insert
// takes records in position order, and evict drops what falls below the
// floor. It is owned by the apply goroutine.
type table struct {
	m map[dedupKey]dedupEntry
	// order holds one item per record inserted, by position, from head on;
	// an item whose key has since got a newer record is stale and skipped.
	// Items are below the window's size (Horizon) in number.
	order []orderItem
	head  int
}

type orderItem struct {
	key dedupKey
	seq uint64
}

func newTable() *table { return &table{m: map[dedupKey]dedupEntry{}} }

func (t *table) len() int { return len(t.m) }

func (t *table) lookup(k dedupKey) (dedupEntry, bool) {
	e, ok := t.m[k]
	return e, ok
}

// insert records that the record at e.seq (above every position inserted
// before) carried key k, replacing k's previous entry.
func (t *table) insert(k dedupKey, e dedupEntry) {
	t.m[k] = e
	t.order = append(t.order, orderItem{key: k, seq: e.seq})
}

// evict drops the entries of records below position floor and returns how
// many went.
func (t *table) evict(floor uint64) int {
	n := 0
	for t.head < len(t.order) && t.order[t.head].seq < floor {
		it := t.order[t.head]
		if e, ok := t.m[it.key]; ok && e.seq == it.seq {
			delete(t.m, it.key)
			n++
		}
		t.order[t.head] = orderItem{} // let the client id go
		t.head++
	}
	// Reclaim the consumed front once it is most of the slice.
	if t.head > 1024 && t.head > len(t.order)/2 {
		t.order = append(t.order[:0], t.order[t.head:]...)
		t.head = 0
	}
	return n
}

// entries calls fn for every live entry in position order.
func (t *table) entries(fn func(dedupKey, dedupEntry)) {
	for _, it := range t.order[t.head:] {
		if e, ok := t.m[it.key]; ok && e.seq == it.seq {
			fn(it.key, e)
		}
	}
}

// The table in a snapshot:
//
//	table = horizon uvarint | count uvarint | count × (client str | packet id uvarint | nonce uvarint | seq uvarint | index uvarint)
//
// entries in position order, positions strictly increasing.

// appendTable appends the table's encoding.
func (t *table) appendTo(dst []byte, horizon uint64) []byte {
	dst = binary.AppendUvarint(dst, horizon)
	dst = binary.AppendUvarint(dst, uint64(len(t.m)))
	t.entries(func(k dedupKey, e dedupEntry) {
		dst = wire.AppendString(dst, k.client)
		dst = binary.AppendUvarint(dst, uint64(k.pid))
		dst = binary.AppendUvarint(dst, e.nonce)
		dst = binary.AppendUvarint(dst, e.seq)
		dst = binary.AppendUvarint(dst, e.index)
	})
	return dst
}

// decodeTable decodes a table written by appendTo and returns it with the
// horizon it was kept under. Errors wrap ErrCorrupt.
func decodeTable(b []byte) (*table, uint64, error) {
	d := wire.NewDecoder(b)
	horizon := d.Uvarint()
	// An entry takes at least 5 bytes.
	n := d.Count(5)
	t := newTable()
	var last uint64
	for i := 0; i < n && !d.Failed(); i++ {
		k := dedupKey{client: d.Str()}
		pid := d.Uvarint()
		e := dedupEntry{nonce: d.Uvarint(), seq: d.Uvarint(), index: d.Uvarint()}
		if pid == 0 || pid > 0xFFFF || e.seq <= last || e.index == 0 {
			d.Fail()
			break
		}
		k.pid = uint16(pid)
		if _, dup := t.m[k]; dup {
			d.Fail()
			break
		}
		last = e.seq
		t.insert(k, e)
	}
	if err := d.Finish(); err != nil {
		return nil, 0, fmt.Errorf("%w: dedup table: %w", ErrCorrupt, err)
	}
	return t, horizon, nil
}
