package meta

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/netx"
)

// BenchmarkReadBarrier: one ReadBarrier on a follower (a forwarded
// read_index: a round trip, the leader's barrier entry committed by a
// majority, the wait to apply) and on the leader (the barrier alone), in
// a group of three over TCP on loopback with their WAL on disk.
func BenchmarkReadBarrier(b *testing.B) {
	ids := []string{"b1", "b2", "b3"}
	lns := map[string]net.Listener{}
	var servers []Server
	for _, id := range ids {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		lns[id] = ln
		servers = append(servers, Server{ID: id, Addr: ln.Addr().String(), Voter: true})
	}
	nodes := map[string]*Meta{}
	for _, id := range ids {
		m, err := Open(context.Background(), Config{
			NodeID: id, DataDir: b.TempDir(), Addr: lns[id].Addr().String(), Listener: lns[id], Dial: netx.DialTCP,
			Voter: true, Bootstrap: servers,
		})
		if err != nil {
			b.Fatal(err)
		}
		defer m.Close()
		nodes[id] = m
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var lead, follower *Meta
	for _, m := range nodes {
		if err := m.WaitCaughtUp(ctx); err != nil {
			b.Fatal(err)
		}
	}
	for _, m := range nodes {
		if m.IsLeader() {
			lead = m
		} else {
			follower = m
		}
	}
	if lead == nil {
		b.Fatal("no leader")
	}
	for _, c := range []struct {
		name string
		m    *Meta
	}{{"follower", follower}, {"leader", lead}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := c.m.ReadBarrier(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
