// Package run owns the goroutine group every long-lived part of a node
// starts its goroutines through (habit 13: every goroutine has an owner and
// a stop path): the node itself, the cluster layer, the metadata group and
// the peer links each hold one Group. A Group gives its goroutines a
// context that ends when the group stops, refuses new goroutines once it
// is stopping, and lets its owner wait for every goroutine it started.
//
// Why one helper: three parts had each written the same spawn function
// (check "closed" under a lock, Add, go, Done); a Group is that function
// once, with the context the goroutines need to notice the stop.
//
// Concurrency: a Group is safe for concurrent use. Go may be called from
// the group's own goroutines; Wait must not be (it would wait for itself).
//
// Anything may import it; it imports only the standard library.
package run
