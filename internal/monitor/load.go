package monitor

import "time"

// Sample is one reading of a node's cumulative counters.
type Sample struct {
	At time.Time
	// CPU is the process's CPU time, user and system.
	CPU time.Duration
	// RSS is its resident memory in bytes (not cumulative).
	RSS int64
	// NetBytes are the bytes read and written on client and peer
	// connections.
	NetBytes uint64
	// MsgIn and MsgOut are the messages received and sent, all traffic.
	MsgIn, MsgOut uint64
}

// Capacity is what a node's utilisations are fractions of.
type Capacity struct {
	// CPUs is the processor time available per second (the cores the
	// process may use).
	CPUs float64
	// Memory is the bytes the process may use.
	Memory int64
	// Network is the bytes per second the node's links carry; 0 when not
	// known: Network utilisation is then reported as 0 and never counts
	// as overload.
	Network float64
}

// Utilisation is the load between two samples of the same process: CPU and
// network as fractions of their capacity over the time between them,
// memory as the later RSS over the memory capacity, message rates per
// second. A counter that went backwards (the process restarted) counts as
// no activity; a capacity of 0 gives a utilisation of 0.
func Utilisation(prev, cur Sample, c Capacity) Load {
	var l Load
	if c.Memory > 0 {
		l.Memory = float64(max(cur.RSS, 0)) / float64(c.Memory)
	}
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		return clampLoad(l)
	}
	if c.CPUs > 0 && cur.CPU > prev.CPU {
		l.CPU = (cur.CPU - prev.CPU).Seconds() / dt / c.CPUs
	}
	if c.Network > 0 && cur.NetBytes > prev.NetBytes {
		l.Network = float64(cur.NetBytes-prev.NetBytes) / dt / c.Network
	}
	if cur.MsgIn > prev.MsgIn {
		l.MsgIn = float64(cur.MsgIn-prev.MsgIn) / dt
	}
	if cur.MsgOut > prev.MsgOut {
		l.MsgOut = float64(cur.MsgOut-prev.MsgOut) / dt
	}
	return clampLoad(l)
}

// clampLoad keeps a load within what a report carries.
func clampLoad(l Load) Load {
	l.CPU, l.Memory, l.Network = min(l.CPU, MaxUtilisation), min(l.Memory, MaxUtilisation), min(l.Network, MaxUtilisation)
	limit := float64(maxFixed-1) / rateScale
	l.MsgIn, l.MsgOut = min(l.MsgIn, limit), min(l.MsgOut, limit)
	return l
}
