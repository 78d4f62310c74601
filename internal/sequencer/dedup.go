package sequencer

import (
	"encoding/binary"
	"fmt"
	"math/bits"

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
//
// Entries are keyed by a number per client and the packet id in one
// uint64, not by the client id string: every publish looks the table up
// and most are inserted, and a string key cost a hash of the id and a
// comparison per probe, a third of Apply's time (BENCHMARKS.md, "Profile
// and apply path"). A client's number lives while the window holds
// a record of it; the numbers never leave the table (snapshots and
// entries name the client), so replicas that number differently still
// hold the same table. The map holds only where the entry's item is in
// order, which holds the entry: a lookup's cache miss in the map (65,536
// entries at the horizon) is then one small slot, and the item it leads to
// is, for a client cycling through its packet ids, at the window's floor,
// which evict has just read.
type table struct {
	m       map[uint64]uint32 // clientKey(client, pid) -> its newest item's slot (mod 2^32), but for dense clients
	n       int               // entries
	clients map[string]*client
	next    uint64  // the next client number
	last    *client // the client resolved last: publishes come in runs of one client
	// order holds one item per record inserted, by position, from head on;
	// an item whose key has since got a newer record is stale and skipped.
	// Items are below the window's size (Horizon) in number. base is the
	// number of items removed from its front: an item's slot is base plus
	// its place in order.
	order []orderItem
	head  int
	base  uint64
}

// client is a client id known to the table.
type client struct {
	id    string
	num   uint64
	items int // items of order naming it: at 0 it has no entry, and goes
	live  int // its entries (its items not stale)
	// dense, for a client holding many entries, replaces the map for its
	// packet ids: slots by packet id, those in use marked in present.
	dense *denseIndex
}

// denseIndex is a client's entries by packet id: 264 KiB, against a cache
// miss in the map per publish for a client that holds a good part of the
// window (a publisher cycling through its packet ids: each lookup finds the
// entry Horizon records old, wherever the map put it). A client gets one
// at denseFrom entries and loses it below denseUntil, so that at most
// Horizon/denseUntil clients (16 at the default horizon, 4 MiB) have one.
type denseIndex struct {
	slots   [1 << 16]uint32
	present [1 << 10]uint64 // bit pid: slots[pid] is an entry's slot
}

const (
	denseFrom  = 1 << 14
	denseUntil = 1 << 12
)

func (d *denseIndex) get(pid uint16) (uint32, bool) {
	return d.slots[pid], d.present[pid>>6]&(1<<(pid&63)) != 0
}

func (d *denseIndex) set(pid uint16, slot uint32) {
	d.slots[pid] = slot
	d.present[pid>>6] |= 1 << (pid & 63)
}

func (d *denseIndex) del(pid uint16) { d.present[pid>>6] &^= 1 << (pid & 63) }

type orderItem struct {
	c     *client
	key   uint64
	entry dedupEntry
	// stale: the key got a newer record. Marked by the insert that
	// replaces the entry, so that evicting the item needs no lookup (the
	// entry is cold by then: Horizon records ago).
	stale bool
}

// clientKey is the map key of a client's packet id. Client numbers stay
// below 2^48 (one per client id seen in the window, counted from 0).
func clientKey(c *client, pid uint16) uint64 { return c.num<<16 | uint64(pid) }

func newTable() *table {
	return &table{m: map[uint64]uint32{}, clients: map[string]*client{}}
}

func (t *table) len() int { return t.n }

// resolve returns the table's client with id, adding it if it is new.
func (t *table) resolve(id string) *client {
	if c := t.last; c != nil && c.id == id {
		return c
	}
	c := t.clients[id]
	if c == nil {
		c = &client{id: id, num: t.next}
		t.next++
		t.clients[id] = c
	}
	t.last = c
	return c
}

func (t *table) lookup(k dedupKey) (dedupEntry, bool) {
	c := t.clients[k.client]
	if c == nil {
		return dedupEntry{}, false
	}
	return t.lookupIn(c, k.pid)
}

// lookupIn is lookup for a client resolved.
func (t *table) lookupIn(c *client, pid uint16) (dedupEntry, bool) {
	slot, ok := t.slot(c, pid)
	if !ok {
		return dedupEntry{}, false
	}
	return t.item(slot).entry, true
}

// slot returns the slot of c's entry for pid.
func (t *table) slot(c *client, pid uint16) (uint32, bool) {
	if c.dense != nil {
		return c.dense.get(pid)
	}
	slot, ok := t.m[clientKey(c, pid)]
	return slot, ok
}

// item returns the item at slot. Live items span far fewer than 2^32
// slots, so the slot's low 32 bits place it.
func (t *table) item(slot uint32) *orderItem { return &t.order[slot-uint32(t.base)] }

// insert records that the record at e.seq (above every position inserted
// before) carried key k, replacing k's previous entry.
func (t *table) insert(k dedupKey, e dedupEntry) {
	t.insertIn(t.resolve(k.client), k.pid, e)
}

// insertIn is insert for a client resolved.
func (t *table) insertIn(c *client, pid uint16, e dedupEntry) {
	slot := uint32(t.base + uint64(len(t.order)))
	if old, ok := t.slot(c, pid); ok {
		t.item(old).stale = true
	} else {
		c.live++
		t.n++
	}
	if c.dense != nil {
		c.dense.set(pid, slot)
	} else {
		t.m[clientKey(c, pid)] = slot
	}
	c.items++
	t.order = append(t.order, orderItem{c: c, key: clientKey(c, pid), entry: e})
	if c.dense == nil && c.live >= denseFrom {
		t.densify(c)
	}
}

// densify moves c's entries from the map to a dense index.
func (t *table) densify(c *client) {
	c.dense = new(denseIndex)
	for _, it := range t.order[t.head:] {
		if it.c == c && !it.stale {
			pid := uint16(it.key)
			c.dense.set(pid, t.m[it.key])
			delete(t.m, it.key)
		}
	}
}

// sparsify moves c's entries from its dense index back to the map.
func (t *table) sparsify(c *client) {
	for w, word := range c.dense.present {
		for ; word != 0; word &= word - 1 {
			pid := uint16(w<<6 + bits.TrailingZeros64(word))
			t.m[clientKey(c, pid)] = c.dense.slots[pid]
		}
	}
	c.dense = nil
}

// evict drops the entries of records below position floor and returns how
// many went.
func (t *table) evict(floor uint64) int {
	n := 0
	for t.head < len(t.order) && t.order[t.head].entry.seq < floor {
		it := t.order[t.head]
		if !it.stale { // the key's newest record: its entry goes
			if d := it.c.dense; d != nil {
				d.del(uint16(it.key))
			} else {
				delete(t.m, it.key)
			}
			n++
			t.n--
			if it.c.live--; it.c.dense != nil && it.c.live < denseUntil {
				t.sparsify(it.c)
			}
		}
		if it.c.items--; it.c.items == 0 {
			delete(t.clients, it.c.id)
			if t.last == it.c {
				t.last = nil
			}
		}
		t.order[t.head] = orderItem{} // let the client go
		t.head++
	}
	// Reclaim the consumed front once it is most of the slice.
	if t.head > 1024 && t.head > len(t.order)/2 {
		t.order = append(t.order[:0], t.order[t.head:]...)
		t.base += uint64(t.head)
		t.head = 0
	}
	return n
}

// entries calls fn for every live entry in position order.
func (t *table) entries(fn func(dedupKey, dedupEntry)) {
	for _, it := range t.order[t.head:] {
		if !it.stale {
			fn(dedupKey{client: it.c.id, pid: uint16(it.key)}, it.entry)
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
		if _, dup := t.lookup(k); dup {
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
