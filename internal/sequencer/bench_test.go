package sequencer

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/sextantmq/sextant/internal/topiclog"
)

// BenchmarkApply measures Apply per publish with a topic log on disk
// (b.TempDir): one entry of 1, 64 or 256 keyed publishes of 128 bytes per
// Apply, with an fsync per entry (SyncAlways, as replicas 1 uses) or none
// (SyncNone, as replicated groups use). Every publish is new, so each is
// looked up, appended and entered in the dedup table; the table stays at
// its bound (DefaultHorizon) once the window fills. The publishes come from
// 100 clients, or with clients=1 from one client cycling through its
// packet ids (a benchmark's publisher: each lookup finds the entry Horizon
// records old).
func BenchmarkApply(b *testing.B) {
	for _, sync := range []topiclog.SyncPolicy{topiclog.SyncAlways, topiclog.SyncNone} {
		for _, items := range []int{1, 64, 256} {
			for _, clients := range []uint64{100, 1} {
				name := fmt.Sprintf("sync=%s/items=%d", sync, items)
				if clients == 1 {
					if sync != topiclog.SyncNone || items != 256 {
						continue
					}
					name += "/clients=1"
				}
				benchmarkApply(b, name, sync, items, clients)
			}
		}
	}
}

func benchmarkApply(b *testing.B, name string, sync topiclog.SyncPolicy, items int, clients uint64) {
	b.Run(name, func(b *testing.B) {
		s, err := Open(topiclog.OSFS{}, filepath.Join(b.TempDir(), "pg"), Options{Log: topiclog.Options{Sync: sync}})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		msg := make([]byte, 128)
		ps := make([]Publish, items)
		var nonce uint64
		cmds := make([][]byte, 0, 1024)
		for range cap(cmds) {
			for j := range ps {
				nonce++
				ps[j] = Publish{Topic: fmt.Sprint("sensors/", j%16), Message: msg, QoS: 1,
					Key: Key{Client: fmt.Sprint("client-", nonce%clients), PacketID: uint16(1 + nonce%65535), Nonce: nonce}}
			}
			cmd, err := EncodeCommand(PublishCommand(ps...))
			if err != nil {
				b.Fatal(err)
			}
			cmds = append(cmds, cmd)
		}
		b.SetBytes(int64(items * len(msg)))
		b.ResetTimer()
		for i := range b.N {
			if i > 0 && i%len(cmds) == 0 {
				// A new lap: new nonces, so the publishes are new
				// to the dedup table.
				b.StopTimer()
				for k := range cmds {
					cmds[k] = relabel(b, cmds[k])
				}
				b.StartTimer()
			}
			res, err := s.Apply([]Entry{{Index: uint64(i + 1), Term: 1, Time: t0, Cmd: cmds[i%len(cmds)]}})
			if err != nil || res[0].Err != nil || res[0].Publishes[0].Duplicate {
				b.Fatalf("apply: %v %+v", err, res[0])
			}
		}
		el := b.Elapsed()
		b.ReportMetric(float64(el.Nanoseconds())/float64(b.N*items), "ns/publish")
		b.ReportMetric(float64(b.N*items)/el.Seconds(), "publishes/s")
	})
}

// relabel returns cmd with new nonces.
func relabel(b *testing.B, cmd []byte) []byte {
	c, err := DecodeCommand(cmd)
	if err != nil {
		b.Fatal(err)
	}
	for i := range c.Publishes {
		c.Publishes[i].Key.Nonce += 1 << 40
	}
	out, err := EncodeCommand(c)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// BenchmarkReadSeqNearEnd measures a live feed's read: the last 580
// records (one batch of a replicas-3 home at a window of 1,000) of 64-byte
// messages, from memory (the recent records) or, with them off, from the
// segment file on disk, decoded. Per record.
func BenchmarkReadSeqNearEnd(b *testing.B) {
	for _, recent := range []int{0, -1} {
		name := "memory"
		if recent < 0 {
			name = "log"
		}
		b.Run(name, func(b *testing.B) {
			s, err := Open(topiclog.OSFS{}, filepath.Join(b.TempDir(), "pg"), Options{Log: topiclog.Options{Sync: topiclog.SyncNone}, RecentBytes: recent})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			const batch = 580
			ps := make([]Publish, batch)
			for i := range ps {
				ps[i] = Publish{Topic: "sxbench/r3/t", Message: make([]byte, 64), QoS: 1,
					Key: Key{Client: "bench-pub", PacketID: uint16(1 + i), Nonce: uint64(1 + i)}}
			}
			cmd, err := EncodeCommand(PublishCommand(ps...))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := s.Apply([]Entry{{Index: 1, Term: 1, Time: t0, Cmd: cmd}}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				recs, err := s.ReadSeq(1, 4096, 1<<20)
				if err != nil || len(recs) != batch {
					b.Fatalf("%d records, %v", len(recs), err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
		})
	}
}
