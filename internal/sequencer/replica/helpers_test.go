package replica

import (
	"flag"
	"testing"

	"github.com/sextantmq/sextant/internal/sequencer"
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

const dir = "pg"

func open(t testing.TB, fsys topiclog.FS, opts sequencer.Options) *sequencer.Sequencer {
	t.Helper()
	s, err := sequencer.Open(fsys, dir, opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// pub is a keyed QoS 1 publish.
func pub(topic, msg, client string, pid uint16, nonce uint64) sequencer.Publish {
	return sequencer.Publish{Topic: topic, Message: []byte(msg), QoS: 1, Key: sequencer.Key{Client: client, PacketID: pid, Nonce: nonce}}
}

func files(t testing.TB, fsys *topiclog.MemFS) map[string][]byte {
	return sequencertest.Files(t, fsys, dir)
}

func sameFiles(t testing.TB, what string, a, b map[string][]byte) {
	t.Helper()
	sequencertest.SameFiles(t, what, a, b)
}
