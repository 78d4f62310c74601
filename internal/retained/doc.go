// Package retained owns a node's index of retained messages: the latest
// retained message per topic name, found by topic filter when a client
// subscribes. Names are kept in a trie of levels, so a filter visits only the
// parts of the tree it can match.
//
// Matching follows internal/topic: '+' is one level (possibly empty), '#' is
// its parent and everything below, and a filter starting with a wildcard does
// not see names starting with '$'.
//
// Concurrency: an Index is safe for concurrent use; it is a plain object
// behind one RWMutex. Callbacks passed to Match and All run under the read
// lock and must not call back into the Index.
//
// The package is pure: no I/O, no clock, no goroutines. It decides nothing
// about persistence, expiry or cluster replication (its caller stores
// messages and checks Message.Expired at delivery); it depends only on
// internal/message.
package retained
