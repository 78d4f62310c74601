// Package sequenced is the publish path of sequenced topics: the access
// node's side (Router), which takes the publishes of topics whose policy
// rule is sequenced, and the home's side (Home), which sequences them in
// the group's replicated log.
//
// # Access node
//
// Router.Publish looks the topic's rule up in the local metadata copy
// (cached per topic and policy version); a direct topic is left to the
// broker. A sequenced publish gets its key (client id, packet id, and a
// nonce: the node's hybrid-logical stamp when the PUBLISH arrived, kept
// across retries) and joins the queue of its group's route. A route
// creates the group on its first publish when the metadata has no record
// (home: this node within its group budget, else the alive node with the
// fewest groups, nearest first; voters: fsm.ChooseVoters), then sends the
// queue to the group's home in batches (MethodPublish over the peer link,
// or directly when the home is this node), several batches in flight, and
// acknowledges each publish (PUBACK/PUBREC through its Acker) once the
// home answers that it committed: for replicas 3 or 5, on a majority.
// QoS 0 publishes are not waited for by their publishers, but travel in the
// same queue so that a publisher's order holds across QoS levels.
//
// Order: a route's batches form a stream numbered from 1; the home submits
// a stream's batches in that order (Home.turn), so batches in flight keep
// the order in which the access node received the publishes. When a batch
// fails (the home answers that it does not lead, runs no replica, lost the
// outcome; the link breaks; the call times out) the route starts a new
// stream and sends every publish not yet acknowledged again, in order: to
// the leader the failed node named, else to the next voter, after a
// backoff, and to the record's home as soon as the record changes (a new
// leader records itself as home). Publishes that had committed are
// answered from the group's dedup table; QoS 0 publishes sent in the
// failed stream are dropped and counted (no key to recognise a repeat by),
// but for those of a batch the home answered without submitting it (no
// replica yet, not the leader, stale, moving) and of the stream's later
// batches, which are sent again. The home waits a while for a replica the
// group's record says it will open, and a replica that won a new group's
// first election sends batches to the record's home rather than take them
// just before handing the lead over.
//
// Bounds: at most Config.Inflight publishes outstanding per group: beyond
// it a QoS 1/2 publisher waits for room (its reader stops: back-pressure)
// up to Config.WaitTimeout, then its publish fails with 0x97; a QoS 0
// publish is dropped. Every drop is counted in
// sextant_sequenced_dropped_total by reason.
//
// # Home
//
// Home.Serve answers MethodPublish: it waits for the batch's turn in its
// stream, submits the batch's command (a sequencer publish command, as
// the access node encoded it) to the group's replica, releases the next
// batch's turn and waits for the commit. The answer is each publish's
// (index, seq, duplicate), or a status saying why not (wire.go).
//
// Concurrency: Router and Home are safe for concurrent use. The Router
// owns one sender goroutine per group it publishes to (retired after a
// minute idle) and the goroutines of their calls, in one run.Group that
// Close stops and waits for. Publish runs on the publisher's reader
// goroutine and may block it (back-pressure); acknowledgements are given
// from the calls' goroutines, never under the route's lock.
//
// It knows nothing of MQTT sessions or the broker: the broker calls
// Publish through a small interface of its own.
package sequenced
