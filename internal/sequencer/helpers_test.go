package sequencer

import (
	"flag"
	"fmt"
	"math/bits"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/sequencer/sequencertest"
	"github.com/sextantmq/sextant/internal/topiclog"
)

var seedFlag = flag.Uint64("seed", 0, "seed for the randomized tests (0: a fixed default)")

func testSeed(t testing.TB) uint64 {
	t.Helper()
	seed := *seedFlag
	if seed == 0 {
		seed = 1
	}
	t.Logf("seed %d (rerun with -seed %d)", seed, seed)
	return seed
}

func rng(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, seed^0x5e9)) }

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

const dir = "pg"

// smallSegments makes the log roll often, so retention and snapshots see
// several segments.
var smallSegments = topiclog.Options{SegmentBytes: topiclog.MinSegmentBytes, Sync: topiclog.SyncNone}

func open(t testing.TB, fsys topiclog.FS, opts Options) *Sequencer {
	t.Helper()
	s, err := Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pub is a keyed QoS 1 publish.
func pub(topic, msg, client string, pid uint16, nonce uint64) Publish {
	return Publish{Topic: topic, Message: []byte(msg), QoS: 1, Key: Key{Client: client, PacketID: pid, Nonce: nonce}}
}

// entry makes a committed entry at index, stamped index seconds after t0.
func entry(t testing.TB, index uint64, c Command) Entry {
	t.Helper()
	b, err := EncodeCommand(c)
	if err != nil {
		t.Fatalf("encode: %v", err)
	}
	return Entry{Index: index, Term: 1, Time: t0.Add(time.Duration(index) * time.Second), Cmd: b}
}

func apply(t testing.TB, s *Sequencer, entries ...Entry) []Result {
	t.Helper()
	res, err := s.Apply(entries)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	return res
}

// published returns the result of a one-entry publish apply.
func published(t testing.TB, s *Sequencer, e Entry) []Published {
	t.Helper()
	r := apply(t, s, e)[0]
	if r.Err != nil {
		t.Fatalf("entry %d refused: %v", e.Index, r.Err)
	}
	return r.Publishes
}

func files(t testing.TB, fsys *topiclog.MemFS) map[string][]byte {
	return sequencertest.Files(t, fsys, dir)
}

func sameFiles(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	sequencertest.SameFiles(t, what, a, b)
}

// tableString describes the dedup table in position order.
func tableString(tb *table) string {
	var b strings.Builder
	tb.entries(func(k dedupKey, e dedupEntry) {
		fmt.Fprintf(&b, "%s/%d:%d@%d#%d ", k.client, k.pid, e.nonce, e.seq, e.index)
	})
	return b.String()
}

// checkRebuild checks that the table equals the one rebuilt from the log:
// the property that lets a restarted replica do without a snapshot.
func checkRebuild(t testing.TB, s *Sequencer) {
	t.Helper()
	rb, err := rebuild(s.log, s.horizon)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tableString(s.table), tableString(rb); got != want {
		t.Fatalf("dedup table is not the one the log rebuilds:\n have %s\n want %s", got, want)
	}
	checkTable(t, s.table)
}

// checkTable checks the table's own invariants: each entry has exactly
// one item not marked stale, the map leads its key there, and every client
// known is named by an item (clients with none are forgotten).
func checkTable(t testing.TB, tb *table) {
	t.Helper()
	live := 0
	items, lives := map[*client]int{}, map[*client]int{}
	for i, it := range tb.order[tb.head:] {
		items[it.c]++
		if it.stale {
			continue
		}
		live++
		lives[it.c]++
		slot, ok := tb.slot(it.c, uint16(it.key))
		if want := uint32(tb.base + uint64(tb.head+i)); !ok || slot != want {
			t.Fatalf("item %d (seq %d) not stale but the table leads its key to slot %d (held %v), want %d", i, it.entry.seq, slot, ok, want)
		}
	}
	if live != tb.len() {
		t.Fatalf("%d items not stale for %d entries", live, tb.len())
	}
	inMap := len(tb.m)
	for id, c := range tb.clients {
		if items[c] != c.items || c.items == 0 || lives[c] != c.live {
			t.Fatalf("client %s counts %d items and %d entries, order holds %d and %d", id, c.items, c.live, items[c], lives[c])
		}
		if c.dense != nil {
			if c.live < denseUntil {
				t.Fatalf("client %s has a dense index with %d entries", id, c.live)
			}
			n := 0
			for _, w := range c.dense.present {
				n += bits.OnesCount64(w)
			}
			if n != c.live {
				t.Fatalf("client %s: %d packet ids present in its dense index, %d entries", id, n, c.live)
			}
		} else {
			inMap -= c.live
		}
	}
	if inMap != 0 {
		t.Fatalf("the map holds %d entries more than the clients without a dense index", inMap)
	}
}

// workload is a seeded stream of entries: publishes from a few clients
// that retry (same nonce), reuse packet ids (new nonce), publish QoS 0,
// and now and then a retention tick.
type workload struct {
	r       *rand.Rand
	index   uint64
	nonce   uint64
	clients int
	pids    int
	sent    []Publish // keyed publishes sent so far, to retry
	tick    topiclog.Retention
	noTicks bool
}

func newWorkload(seed uint64) *workload {
	return &workload{r: rng(seed), clients: 4, pids: 8, tick: topiclog.Retention{MaxRecordsPerTopic: 40}}
}

func (w *workload) publish() Publish {
	r := w.r
	if len(w.sent) > 0 && r.IntN(4) == 0 {
		return w.sent[r.IntN(len(w.sent))] // a retry, perhaps of a superseded nonce
	}
	topic := fmt.Sprintf("t/%d", r.IntN(5))
	msg := strings.Repeat(string(rune('a'+r.IntN(26))), r.IntN(40))
	if r.IntN(8) == 0 {
		return Publish{Topic: topic, Message: []byte(msg), Retain: r.IntN(2) == 0}
	}
	w.nonce++
	p := pub(topic, msg, fmt.Sprintf("c%d", r.IntN(w.clients)), uint16(1+r.IntN(w.pids)), w.nonce)
	p.QoS = byte(1 + r.IntN(2))
	p.Retain = r.IntN(10) == 0
	w.sent = append(w.sent, p)
	return p
}

// next returns the next n entries.
func (w *workload) next(t testing.TB, n int) []Entry {
	t.Helper()
	var out []Entry
	for range n {
		w.index += uint64(1 + w.r.IntN(2)) // Raft's own entries leave gaps
		if w.r.IntN(12) == 0 && !w.noTicks {
			out = append(out, entry(t, w.index, RetentionCommand(w.tick)))
			continue
		}
		var ps []Publish
		for range 1 + w.r.IntN(5) {
			ps = append(ps, w.publish())
		}
		out = append(out, entry(t, w.index, PublishCommand(ps...)))
	}
	return out
}
