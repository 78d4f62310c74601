// Package memnet is an in-memory network for tests and the geo emulator: stream
// connections (net.Conn / net.Listener) and datagrams (net.PacketConn) between
// "ip:port" addresses, with a one-way latency per host pair (half the
// configured round-trip time), per-link packet loss, two-way and one-way
// partitions per host pair, connection breaks and host isolation, all
// changeable while the network runs.
//
// Latency is implemented with timers from package time, so a Network created
// inside a testing/synctest bubble runs on the bubble's fake clock: a gossip
// round or a Raft election then costs CPU only, not wall time. Every blocking
// operation (Read, Write on a full buffer, Accept, ReadFrom, Dial) waits on
// channels and timers, never on sync.Cond or polling, so it is durably blocked
// in synctest's sense.
//
// Semantics, chosen to be close enough to TCP/UDP for membership and Raft:
//   - Streams are reliable and ordered. A write is buffered at once (bounded per
//     direction by Options.StreamBuffer; a writer blocks while the buffer is
//     full) and becomes readable one one-way latency after it was written.
//     Dial takes one round trip; a dial to an address with no listener fails
//     with ErrRefused after that round trip. Close sends an end-of-stream that
//     the peer reads as io.EOF after the data before it.
//   - Datagrams arrive after the one-way latency, may be lost (SetLoss, seeded
//     by Options.Seed), and are dropped when the receiver's queue is full.
//   - Partition, Isolate: new dials block until their context ends, datagrams
//     are dropped, and existing streams across the cut stall; a stream still
//     cut after Options.BreakAfter is reset (ErrReset on both ends). Healing
//     before that resumes delivery, one one-way latency after the heal.
//   - CutOneWay(from, to) cuts one direction only: datagrams and stream data
//     that way are held up as above, the other way flows, and new streams
//     cannot open (a handshake needs both ways); Heal(a, b) undoes cuts in
//     both directions. Break(a, b) resets the streams open between two hosts
//     without cutting anything, as a connection dropped by a middlebox.
//   - Stall(host) freezes a host as a stopped process (SIGSTOP): its streams
//     deliver nothing either way but are never reset, datagrams it sends are
//     dropped and those sent to it are held; Resume delivers what waited.
//   - Deadlines follow net.Conn: an expired deadline fails the call with an
//     error for which errors.Is(err, os.ErrDeadlineExceeded) holds.
//
// Host is one host's view of the network (listen anywhere, dial from that
// host): what a node built by node.New in a test takes as its network.
//
// Concurrency: every method of Network, of its connections and listeners is
// safe for concurrent use. Control methods (SetRTT, Partition, ...) are
// serialised among themselves.
//
// memnet is test infrastructure: production code never imports it (lint). It does not
// import package testing, so harnesses and the emulator can use it.
package memnet
