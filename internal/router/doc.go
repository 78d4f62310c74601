// Package router owns the subscription index: a trie of topic filter levels
// that answers "who subscribed to a filter matching this topic name?" for
// each published message. The index is generic over the subscriber handle S,
// so the same code serves local sessions (a pointer) and remote nodes'
// aggregated interest (a node id).
//
// The index applies MQTT's matching rules ('+', '#', "a/#" matching "a", the
// '$' rule of MQTT 4.7.2), folds a subscriber's overlapping subscriptions
// into one Delivery (maximum QoS, every subscription identifier, MQTT 5
// 3.3.4), honours No Local, and keeps shared subscription groups
// ("$share/{group}/{filter}") apart from members' own subscriptions, handing
// back a round-robin cursor per group. Choosing the member to deliver to,
// sending, queueing and retained messages belong to the caller.
//
// Concurrency: an Index is not safe for concurrent use, with one exception:
// any number of goroutines may call Match at the same time, each with its own
// Matches, provided nothing calls Subscribe or Unsubscribe meanwhile (the
// broker holds a RWMutex: Match under the read lock, the rest under the write
// lock). Match writes nothing in the index but the shared groups' atomic
// round-robin counters. Results in a Matches are copies and stay valid after
// the lock is released.
//
// This package is a pure core: no I/O, no clock, no goroutines. It depends
// only on internal/topic.
package router
