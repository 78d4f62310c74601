package monitor

import (
	"math"
	"testing"
	"time"
)

func TestUtilisation(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	prev := Sample{At: t0, CPU: time.Second, RSS: 1 << 20, NetBytes: 1000, MsgIn: 10, MsgOut: 20}
	cur := Sample{At: t0.Add(5 * time.Second), CPU: 6 * time.Second, RSS: 512 << 20, NetBytes: 1000 + 5*12_500_000, MsgIn: 510, MsgOut: 10_020}
	capa := Capacity{CPUs: 2, Memory: 1 << 30, Network: 125_000_000}
	got := Utilisation(prev, cur, capa)
	want := Load{CPU: 0.5, Memory: 0.5, Network: 0.1, MsgIn: 100, MsgOut: 2000}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if !near(got.CPU, want.CPU) || !near(got.Memory, want.Memory) || !near(got.Network, want.Network) ||
		!near(got.MsgIn, want.MsgIn) || !near(got.MsgOut, want.MsgOut) {
		t.Fatalf("load %+v, want %+v", got, want)
	}
	// No network capacity: not measured, 0. A restart (counters back to
	// small values) or no time between samples: no activity.
	capa.Network = 0
	if l := Utilisation(prev, cur, capa); l.Network != 0 {
		t.Fatalf("network without capacity: %v", l.Network)
	}
	restarted := Sample{At: cur.At.Add(time.Second), CPU: time.Millisecond, RSS: 1 << 20}
	if l := Utilisation(cur, restarted, capa); l.CPU != 0 || l.MsgIn != 0 || l.MsgOut != 0 {
		t.Fatalf("after a restart: %+v", l)
	}
	if l := Utilisation(cur, cur, capa); l.CPU != 0 || !near(l.Memory, 0.5) {
		t.Fatalf("same instant: %+v", l)
	}
	// Whatever the samples, the load fits a report.
	r := Report{Node: "n", Seq: 1, Window: time.Second, Load: Utilisation(Sample{}, Sample{At: t0, CPU: math.MaxInt64, MsgIn: math.MaxUint64}, Capacity{CPUs: 1e-9, Memory: 1})}
	if err := r.Validate(); err != nil {
		t.Fatalf("extreme samples give an unreportable load: %v", err)
	}
}
