// Package bench is the load generator behind `sextant bench`. It drives any
// MQTT 3.1.1 or 5.0 broker, given by URL, through a scenario (p2p, fanout,
// fanin, manytopics, rate, connections) with its own client
// (internal/mqttclient: our codec, batched writes), and returns a Result:
// throughput, end-to-end latency percentiles from HDR histograms, the fate
// of every message (lost, duplicated, reordered, per publisher), the CPU the
// generator used and, given the broker's pid, the broker's CPU per delivered
// message and its memory.
//
// # How messages are accounted for
//
// Every payload starts with a header (see Header): a magic, the send time,
// the publisher's index and its sequence number. Each subscriber keeps, per
// publisher, a bitmap of sequence numbers seen, so a second copy is a
// duplicate and a number lower than the highest seen is a reordering; after
// the run, the messages each subscriber should have received (from the
// publishers' per-topic counts) minus the distinct ones it did receive are
// lost. Topics are unique per run, so nothing from an earlier run (retained
// messages, persistent sessions) is counted.
//
// # Time
//
// The generator measures real time: latency is the receive time minus the
// send time stamped in the payload, on one machine's clock. In open-loop
// runs (a rate) the stamp is the time the schedule said the message was due,
// so a generator or broker that falls behind shows up as latency instead of
// being hidden (no coordinated omission). Tests of this package check
// accounting and structure, never timing.
//
// # Concurrency
//
// Run owns every goroutine it starts (publishers, a progress ticker, and the
// clients' reader/writer pairs) and returns only after all have stopped.
// Subscriber state is touched only by its client's reader goroutine until
// the run ends; latency histograms are sharded, each behind a mutex.
//
// It must not import the broker's packages: it measures brokers from the
// outside, through MQTT and /proc only.
package bench
