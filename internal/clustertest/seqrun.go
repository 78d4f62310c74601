package clustertest

import (
	"fmt"
	"slices"
	"sync"
)

// SeqRun records a sequenced-topics run under faults, for the checks of
// issue 14: publish attempts and acknowledgements, each subscriber's
// messages per connection, history reads (Lin, for porcupine); and
// verifies them against the final logs read back from the cluster.
// Unlike SeqChecker it covers several topics, subscribers that reconnect
// to a persistent session (a session resumed after its node crashed may
// get QoS 1 records again: docs/design/sequenced.md, what a failure can
// cost; QoS 2 ones never), and publishers that lose their access node.
type SeqRun struct {
	Lin *LinRecorder

	mu struct {
		sync.Mutex
		pubs   map[string]*runPub // by payload (unique per message)
		order  map[string][]string
		subs   map[string][][]Message // subscriber -> connections -> messages in arrival order
		resent int
	}
}

type runPub struct {
	publisher, topic string
	qos              byte
	acked            bool
	// accessLost: outstanding when its publisher lost its access node and
	// sent again through another: the new node gives it a new key, so a
	// publish that had committed is in the log twice (documented, QoS 2
	// included).
	accessLost bool
}

// NewSeqRun returns an empty run.
func NewSeqRun() *SeqRun {
	r := &SeqRun{Lin: NewLinRecorder()}
	r.mu.pubs = map[string]*runPub{}
	r.mu.order = map[string][]string{}
	r.mu.subs = map[string][][]Message{}
	return r
}

// Attempt records that publisher (client index client, for the
// visualization) is about to send payload to topic at qos.
func (r *SeqRun) Attempt(client int, publisher, topic, payload string, qos byte) {
	r.mu.Lock()
	if _, ok := r.mu.pubs[payload]; !ok {
		r.mu.pubs[payload] = &runPub{publisher: publisher, topic: topic, qos: qos}
		r.mu.order[publisher] = append(r.mu.order[publisher], payload)
	}
	r.mu.Unlock()
	r.Lin.Attempt(client, topic, payload)
}

// Acked records payload's successful acknowledgement.
func (r *SeqRun) Acked(payload string) {
	r.Lin.Acked(payload)
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.mu.pubs[payload]; p != nil {
		p.acked = true
	}
}

// AccessLost records that payloads were outstanding when their publisher's
// connection to its access node ended, and will be sent again elsewhere.
func (r *SeqRun) AccessLost(payloads []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range payloads {
		if rp := r.mu.pubs[p]; rp != nil {
			rp.accessLost = true
			r.mu.resent++
		}
	}
}

// TopicOf returns the topic payload was published to.
func (r *SeqRun) TopicOf(payload string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p := r.mu.pubs[payload]; p != nil {
		return p.topic
	}
	return ""
}

// Connected starts a new connection of subscriber: messages received
// from now on belong to it.
func (r *SeqRun) Connected(subscriber string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.mu.subs[subscriber] = append(r.mu.subs[subscriber], nil)
}

// Received records a message subscriber received on its current
// connection.
func (r *SeqRun) Received(subscriber string, m Message) {
	r.mu.Lock()
	defer r.mu.Unlock()
	conns := r.mu.subs[subscriber]
	if len(conns) == 0 {
		conns = append(conns, nil)
	}
	conns[len(conns)-1] = append(conns[len(conns)-1], m)
	r.mu.subs[subscriber] = conns
}

// Stats returns how many publishes were made and acknowledged, and how
// many were sent again after an access node was lost.
func (r *SeqRun) Stats() (published, acked, resent int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range r.mu.pubs {
		if p.acked {
			acked++
		}
	}
	return len(r.mu.pubs), acked, r.mu.resent
}

// HasAll reports whether subscriber received every acknowledged publish.
func (r *SeqRun) HasAll(subscriber string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	got := map[string]bool{}
	for _, conn := range r.mu.subs[subscriber] {
		for _, m := range conn {
			got[m.Payload] = true
		}
	}
	for payload, p := range r.mu.pubs {
		if p.acked && !got[payload] {
			return false
		}
	}
	return true
}

// Verify checks the run against final, each topic's log read back from the
// cluster (index i at [i-1]):
//   - every acknowledged publish is in its topic's log (none lost), and
//     every record of a log was published;
//   - the log's indexes are gap-free (the reader checks that as it builds
//     final: see ReadLog);
//   - each subscriber's messages carry indexes and agree with the log at
//     their index; on its first connection they follow each other without
//     a gap or a repeat (per topic); after a reconnection (its node
//     crashed) QoS 1 records may come again (an unacknowledged one sent
//     again, a PUBACK whose deletion was not written) but none beyond the
//     highest index seen so far plus one: no gap; a record delivered at
//     QoS 2 never reaches the subscriber twice, across reconnections and
//     crashes of its node (the subscribers are correct QoS 2 receivers,
//     Receiver); every subscriber that stayed subscribed from the start
//     (complete) received every index of every log;
//   - a QoS 2 publish is in the log at most once, unless its publisher lost
//     its access node while it was outstanding (then the new access node
//     gives it a new key: a documented duplicate);
//   - each publisher in inOrder (those that never lost their access node)
//     has its messages in each log in the order it sent them.
func (r *SeqRun) Verify(final map[string][]string, complete, inOrder []string) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	where := map[string][]uint64{} // payload -> indexes in its topic's log
	for topic, log := range final {
		for i, p := range log {
			rp := r.mu.pubs[p]
			switch {
			case rp == nil:
				bad("%s index %d: %q was never published", topic, i+1, p)
			case rp.topic != topic:
				bad("%s index %d: %q was published to %s", topic, i+1, p, rp.topic)
			}
			where[p] = append(where[p], uint64(i+1))
		}
	}
	for payload, p := range r.mu.pubs {
		n := len(where[payload])
		switch {
		case p.acked && n == 0:
			bad("acknowledged publish %q (%s, QoS %d, from %s) lost: not in the log", payload, p.topic, p.qos, p.publisher)
		case p.qos == 2 && n > 1 && !p.accessLost:
			bad("QoS 2 publish %q is in %s %d times (indexes %v)", payload, p.topic, n, where[payload])
		}
	}
	for sub, conns := range r.mu.subs {
		last := map[string]uint64{} // topic -> last index received
		have := map[string]map[uint64]bool{}
		for c, ms := range conns {
			for i, m := range ms {
				log, ok := final[m.Topic]
				if !ok {
					continue
				}
				if have[m.Topic] == nil {
					have[m.Topic] = map[uint64]bool{}
				}
				switch {
				case m.Index == 0:
					bad("%s: connection %d, message %d (%q) has no sx-index", sub, c, i, m.Payload)
					continue
				case m.Index > uint64(len(log)):
					bad("%s: connection %d: index %d of %s is past its log's end (%d)", sub, c, m.Index, m.Topic, len(log))
				case log[m.Index-1] != m.Payload:
					bad("%s: %s index %d is %q, the log holds %q", sub, m.Topic, m.Index, m.Payload, log[m.Index-1])
				}
				prev := last[m.Topic]
				switch {
				case prev == 0 && slices.Contains(complete, sub) && m.Index != 1:
					bad("%s: first index of %s is %d, want 1", sub, m.Topic, m.Index)
				case prev != 0 && c == 0 && m.Index != prev+1:
					bad("%s: %s index %d after %d (message %d, %q): a gap, a repeat or a reordering", sub, m.Topic, m.Index, prev, i, m.Payload)
				case prev != 0 && c > 0 && m.Index > prev+1:
					// After a reconnection QoS 1 records may come again,
					// but none may be skipped.
					bad("%s: connection %d: %s index %d after %d at most (message %d, %q): a gap", sub, c, m.Topic, m.Index, prev, i, m.Payload)
				case m.QoS == 2 && have[m.Topic][m.Index]:
					bad("%s: connection %d: %s index %d (%q) delivered again at QoS 2: a duplicate", sub, c, m.Topic, m.Index, m.Payload)
				}
				last[m.Topic] = max(prev, m.Index)
				have[m.Topic][m.Index] = true
			}
		}
		if !slices.Contains(complete, sub) {
			continue
		}
		for topic, log := range final {
			missing := 0
			firstMissing := uint64(0)
			for i := range log {
				if !have[topic][uint64(i+1)] {
					if missing == 0 {
						firstMissing = uint64(i + 1)
					}
					missing++
				}
			}
			if missing > 0 {
				bad("%s: %d of %d records of %s never delivered (the first: index %d)", sub, missing, len(log), topic, firstMissing)
			}
		}
	}
	for _, pub := range inOrder {
		prev := map[string]uint64{}
		for _, payload := range r.mu.order[pub] {
			idx := where[payload]
			if len(idx) == 0 {
				continue
			}
			t := r.mu.pubs[payload].topic
			if idx[0] < prev[t] {
				bad("%s: %q at %s index %d, before an earlier publish at %d", pub, payload, t, idx[0], prev[t])
			}
			prev[t] = idx[0]
		}
	}
	return errs
}
