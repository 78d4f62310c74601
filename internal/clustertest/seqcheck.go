package clustertest

import (
	"fmt"
	"slices"
	"sync"
	"time"
)

// SeqChecker checks what the subscribers of one sequenced topic received
// against what was published and acknowledged: the guarantees of
// docs/design/sequenced.md. Record every publish attempt (Published),
// every acknowledgement (Acked) and every subscriber's messages in
// arrival order (Received), then Verify.
type SeqChecker struct {
	Topic string

	mu struct {
		sync.Mutex
		pubs  map[string]*seqPub // by payload (unique per publish attempt's message)
		order map[string][]string
		subs  map[string][]Message
		acks  []time.Time // when each acknowledgement came, in order
	}
}

type seqPub struct {
	publisher string
	qos       byte
	acked     bool
}

// NewSeqChecker returns a checker for topic.
func NewSeqChecker(topic string) *SeqChecker {
	k := &SeqChecker{Topic: topic}
	k.mu.pubs = map[string]*seqPub{}
	k.mu.order = map[string][]string{}
	k.mu.subs = map[string][]Message{}
	return k
}

// Published records that publisher sent payload (again, if it retries).
func (k *SeqChecker) Published(publisher, payload string, qos byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.mu.pubs[payload]; !ok {
		k.mu.pubs[payload] = &seqPub{publisher: publisher, qos: qos}
		k.mu.order[publisher] = append(k.mu.order[publisher], payload)
	}
}

// Acked records that payload's publish was acknowledged with success.
func (k *SeqChecker) Acked(payload string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if p := k.mu.pubs[payload]; p != nil {
		p.acked = true
	}
	k.mu.acks = append(k.mu.acks, time.Now())
}

// LongestAckGap returns the longest time without an acknowledgement
// between after and the last one: what a failure at after cost publishers.
func (k *SeqChecker) LongestAckGap(after time.Time) time.Duration {
	k.mu.Lock()
	defer k.mu.Unlock()
	var gap time.Duration
	prev := after
	for _, at := range k.mu.acks {
		if at.Before(after) {
			continue
		}
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}

// Received records a message subscriber got.
func (k *SeqChecker) Received(subscriber string, m Message) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.mu.subs[subscriber] = append(k.mu.subs[subscriber], m)
}

// Has reports whether subscriber received every acknowledged publish.
func (k *SeqChecker) Has(subscriber string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	got := map[string]bool{}
	for _, m := range k.mu.subs[subscriber] {
		got[m.Payload] = true
	}
	for payload, p := range k.mu.pubs {
		if p.acked && !got[payload] {
			return false
		}
	}
	return true
}

// AckedCount returns how many publishes were acknowledged.
func (k *SeqChecker) AckedCount() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	n := 0
	for _, p := range k.mu.pubs {
		if p.acked {
			n++
		}
	}
	return n
}

// Verify checks:
//   - every subscriber's messages of the topic carry indexes that follow
//     each other without a gap or a repeat, from 1 for a subscriber that
//     was there from the start (fromStart);
//   - all subscribers agree on the message at each index: each one's
//     sequence is a contiguous part of one order, so common messages are
//     in the same relative order (pairwise total order);
//   - every message delivered was published;
//   - complete subscribers (up throughout) have every acknowledged
//     publish: nothing acknowledged is lost;
//   - a QoS 2 publish is in the order at most once (QoS 1 publishes may
//     repeat: a publisher's retransmission after its node died);
//   - each publisher's messages are in the order in the order it sent them
//     (for publishers in inOrder: those that never sent a message again).
func (k *SeqChecker) Verify(fromStart, complete, inOrder []string) []error {
	k.mu.Lock()
	defer k.mu.Unlock()
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	order := map[uint64]string{} // index -> payload
	for sub, ms := range k.mu.subs {
		var last uint64
		for i, m := range ms {
			if m.Topic != k.Topic {
				continue
			}
			switch {
			case m.Index == 0:
				bad("%s: message %d (%q) has no sx-index", sub, i, m.Payload)
			case last == 0 && slices.Contains(fromStart, sub) && m.Index != 1:
				bad("%s: first index %d, want 1", sub, m.Index)
			case last != 0 && m.Index != last+1:
				bad("%s: index %d after %d (message %d, %q): a gap or a reordering", sub, m.Index, last, i, m.Payload)
			}
			last = m.Index
			if p, ok := order[m.Index]; ok && p != m.Payload {
				bad("%s: index %d is %q, another subscriber got %q", sub, m.Index, m.Payload, p)
			}
			order[m.Index] = m.Payload
			if _, ok := k.mu.pubs[m.Payload]; !ok {
				bad("%s: %q was never published", sub, m.Payload)
			}
		}
	}
	seen := map[string][]uint64{}
	for idx, p := range order {
		seen[p] = append(seen[p], idx)
	}
	for payload, p := range k.mu.pubs {
		if p.qos == 2 && len(seen[payload]) > 1 {
			bad("QoS 2 publish %q is in the order %d times (indexes %v)", payload, len(seen[payload]), seen[payload])
		}
	}
	for _, sub := range complete {
		got := map[string]bool{}
		for _, m := range k.mu.subs[sub] {
			got[m.Payload] = true
		}
		for payload, p := range k.mu.pubs {
			if p.acked && !got[payload] {
				bad("%s: acknowledged publish %q lost", sub, payload)
			}
		}
	}
	for _, pub := range inOrder {
		var prev uint64
		for _, payload := range k.mu.order[pub] {
			idx := seen[payload]
			if len(idx) == 0 {
				continue
			}
			first := slices.Min(idx)
			if first < prev {
				bad("%s: %q at index %d, before an earlier publish at %d", pub, payload, first, prev)
			}
			prev = first
		}
	}
	return errs
}
