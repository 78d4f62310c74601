package main

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// idle (-mode idle) measures what idle placement groups cost: each node's
// CPU (user+system, from /proc) over -window and its RSS, first with no
// group, then with -topics sequenced topics with replicas 3 sharing
// -groups groups through the rule's group template (idle/{1}); every node
// replicates every group. Each topic gets one publish (which creates its
// group), then nothing.
func idle(ns []*node) {
	check(setPolicy(ns[0], `{"rules":[{"match":"idle/+/+","mode":"sequenced","replicas":3,"group":"idle/{1}"}]}`))
	time.Sleep(2 * time.Second)
	base := measure(ns, *window)
	fmt.Printf("no group: %s\n", base)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// Publish through every node in turn, so that homes spread over them.
	clients := make([]*mqttclient.Client, len(ns))
	for i, n := range ns {
		c, err := mqttclient.Dial(ctx, n.mqtt(), mqttclient.Options{ClientID: fmt.Sprintf("idle-%d", i), KeepAlive: time.Minute, MaxInflight: 100})
		check(err)
		defer c.Close()
		clients[i] = c
	}
	start := time.Now()
	for t := range *topics {
		g := t % *groups
		c := clients[g%len(clients)]
		if err := c.Publish(ctx, &packet.Publish{Topic: fmt.Sprintf("idle/g%d/t%d", g, t), QoS: 1, Payload: []byte("x")}); err != nil {
			// Report how far it got: on a loaded machine the groups'
			// heartbeats can starve the creation of more.
			check(fmt.Errorf("after %d topics (%d groups) in %.0f s: %w", t, min(t, *groups), time.Since(start).Seconds(), err))
		}
		if (t+1)%100 == 0 {
			fmt.Fprintf(os.Stderr, "created %d topics in %.1f s\n", t+1, time.Since(start).Seconds())
		}
	}
	fmt.Printf("created %d topics in %d groups in %.1f s\n", *topics, *groups, time.Since(start).Seconds())
	time.Sleep(5 * time.Second) // leaders settle, first retention ticks pass
	with := measure(ns, *window)
	fmt.Printf("%d topics in %d groups, replicas 3: %s\n", *topics, *groups, with)
	for i := range ns {
		dcpu := with.cores[i] - base.cores[i]
		drss := with.rssKiB[i] - base.rssKiB[i]
		fmt.Printf("  %s: +%.1f%% of a core (%.2f ms CPU per second per group), +%d KiB RSS (%.0f KiB per group)\n",
			ns[i].id, 100*dcpu, 1000*dcpu/float64(*groups), drss, float64(drss)/float64(*groups))
	}
}

type sample struct {
	cores  []float64 // per node, CPU seconds per wall second
	rssKiB []int64
}

func (s sample) String() string {
	var b strings.Builder
	for i := range s.cores {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "f%d %.1f%% of a core, RSS %d MiB", i+1, 100*s.cores[i], s.rssKiB[i]/1024)
	}
	return b.String()
}

// measure reads every node's CPU time over d, and its RSS at the end.
func measure(ns []*node, d time.Duration) sample {
	t0 := make([]float64, len(ns))
	for i, n := range ns {
		t0[i] = cpuSeconds(n)
	}
	w0 := time.Now()
	time.Sleep(d)
	wall := time.Since(w0).Seconds()
	s := sample{cores: make([]float64, len(ns)), rssKiB: make([]int64, len(ns))}
	for i, n := range ns {
		s.cores[i] = (cpuSeconds(n) - t0[i]) / wall
		s.rssKiB[i] = rssKiB(n)
	}
	return s
}

// clockTicks is USER_HZ, 100 on Linux.
const clockTicks = 100

func cpuSeconds(n *node) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
	check(err)
	// Fields after the command name (which may hold spaces) in parentheses.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / clockTicks
}

func rssKiB(n *node) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", n.cmd.Process.Pid))
	check(err)
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmRSS:") {
			v, _ := strconv.ParseInt(strings.Fields(line)[1], 10, 64)
			return v
		}
	}
	return 0
}
