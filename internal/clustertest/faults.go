package clustertest

import (
	"fmt"

	"github.com/sextantmq/sextant/internal/node"
)

// Faults beyond Kill, Partition and Isolate (harness.go): a stopped
// process (Stall, Resume) and a crash that lets nothing out (Crash).

// Stall freezes node i as a process stopped by SIGSTOP: its links, its
// clients' connections (on its own host) and its gossip deliver nothing
// either way, and none is reset however long it lasts
// (memnet.Network.Stall). The node's own goroutines and timers keep
// running, which a real stop would freeze: the in-process analogue.
func (c *Cluster) Stall(i int) { c.Net.Stall(hostOf(i)) }

// Resume undoes Stall(i) (SIGCONT): what waited is delivered.
func (c *Cluster) Resume(i int) { c.Net.Resume(hostOf(i)) }

// Crash stops node i as kill -9 does, as far as its peers and clients can
// tell: the node is frozen first, so nothing it says while halting (a
// DISCONNECT, a last Raft message, a gossip leave) gets out; it is halted
// without leaving (node.Halt); then every connection it had is reset, as
// the kernel does for a killed process. Restart(i) starts it again from
// its data directory (with Options.Store, its sessions and groups come
// back). What node.Halt writes to its own disk on the way down (the
// sessions' records, a clean close of its logs) is gentler than a real
// kill: the process-level tests cover that.
func (c *Cluster) Crash(i int) {
	c.T.Helper()
	n := c.nodes[i]
	if !n.Running() {
		c.T.Fatalf("clustertest: crash %s: not running", n.ID)
	}
	c.Net.Stall(n.Host)
	n.stop()
	c.Net.ResetHost(n.Host)
	c.Net.Resume(n.Host)
}

// String names node i for schedules: "n<i+1>".
func nodeName(i int) string { return fmt.Sprintf("n%d", i+1) }

// Current returns the node's node.Node while it runs, else nil; safe to
// call while another goroutine restarts it (the Node field is not).
func (n *Node) Current() *node.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.running {
		return nil
	}
	return n.Node
}
