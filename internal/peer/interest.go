package peer

import (
	"slices"
	"sync"
)

// interestLog is how many recent changes are kept, at least, for deltas (up
// to twice as many): a link further behind gets a full snapshot instead.
const interestLog = 4096

// interest is this node's aggregated interest, announced to every peer. Each
// filter carries a reference count: the broker reports every local
// subscription added (+1) or removed (-1), and since additions commute, two
// reports that race still end right. This is the one count of local
// subscriptions per filter in a node. A filter is announced while its count
// is positive. Each change of the announced set gets a version, and the
// last interestLog changes are kept so a link can send just what changed
// since the version it last sent.
type interest struct {
	mu struct {
		sync.Mutex
		count   map[string]int
		version uint64
		log     []interestChange // versions version-len(log)+1 .. version
	}
}

type interestChange struct {
	filter  string
	present bool
}

func newInterest() *interest {
	in := &interest{}
	in.mu.count = map[string]int{}
	return in
}

// add applies a report of delta subscriptions and reports whether the
// announced set changed.
func (in *interest) add(filter string, delta int) bool {
	in.mu.Lock()
	defer in.mu.Unlock()
	before := in.mu.count[filter] > 0
	n := in.mu.count[filter] + delta
	if n == 0 {
		delete(in.mu.count, filter)
	} else {
		in.mu.count[filter] = n
	}
	after := n > 0
	if before == after {
		return false
	}
	in.mu.version++
	if len(in.mu.log) == 2*interestLog { // keep the newest half: amortised O(1)
		n := copy(in.mu.log, in.mu.log[interestLog:])
		clear(in.mu.log[n:])
		in.mu.log = in.mu.log[:n]
	}
	in.mu.log = append(in.mu.log, interestChange{filter, after})
	return true
}

// version returns the current version.
func (in *interest) version() uint64 {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.mu.version
}

// since returns what a peer that has version v needs: a snapshot on a new
// connection (first) or when v is older than the log; else nothing (ok
// false) if v is current, or a delta.
func (in *interest) since(v uint64, first bool) (f interestFrame, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	cur := in.mu.version
	if v == cur && !first {
		return f, false
	}
	oldest := cur - uint64(len(in.mu.log)) // the log covers versions oldest+1..cur
	if first || v < oldest || v > cur {
		f = interestFrame{Full: true, To: cur}
		for filter, n := range in.mu.count {
			if n > 0 {
				f.Add = append(f.Add, filter)
			}
		}
		slices.Sort(f.Add)
		return f, true
	}
	net := map[string]bool{}
	for _, c := range in.mu.log[v-oldest:] {
		net[c.filter] = c.present
	}
	f = interestFrame{From: v, To: cur}
	for filter, present := range net {
		if present {
			f.Add = append(f.Add, filter)
		} else {
			f.Remove = append(f.Remove, filter)
		}
	}
	slices.Sort(f.Add)
	slices.Sort(f.Remove)
	return f, true
}

// remoteInterest tracks one peer's announced set on one connection, checking
// that deltas follow each other.
type remoteInterest struct {
	version uint64
	synced  bool
}

// apply checks f against the versions seen so far.
func (r *remoteInterest) apply(f interestFrame) bool {
	if f.Full {
		r.version, r.synced = f.To, true
		return true
	}
	if !r.synced || f.From != r.version {
		return false
	}
	r.version = f.To
	return true
}
