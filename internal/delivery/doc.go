// Package delivery brings the committed records of placement groups to the
// subscribers of every node, in each group's one order: the feeds, the
// replays of history (sx-from, persistent sessions' backlogs), and the
// reads of history for the admin API.
//
// # Source side
//
// Server answers MethodPoll from this node's replicas: a group's records
// from a position, filtered by the topic filters asked for, at most a
// megabyte per answer. A poll with a wait is a long poll: answered as soon
// as one of its groups has something, else when the wait ends or a newer
// poll of the same node replaces it. Any replica may answer, since every
// replica holds only committed records, in the same order with the same
// positions; feeds ask the group's home first. A poll near a log's end
// (a live feed's) is answered from the records the group's sequencer
// keeps in memory (sequencer.ReadSeq), without reading segment files.
//
// # Feeds
//
// Feeds follow which groups local subscribers may want: a group whose
// rule's filter overlaps a local subscription's filter (topic.Overlap),
// told through broker.Interest. Each such group has a feed: the next
// position to deliver, and the node it polls (the record's home; while
// the home fails, the next voter; back to the home once it answers). A
// node holds one poller per source node, one long poll at a time carrying
// all the groups that node serves. Records are delivered to the broker
// (broker.DeliverSequenced) in order, each message with the user property
// sx-index = its index in its topic; the feed's position moves past them
// before they are delivered, and a poll's answer is applied only if the
// feed still expects it from that position, so a feed that moves to
// another replica (failover, a broken link) resumes from its next position
// there: no gap, no duplicate.
//
// A new feed starts at the first record appended at or after its first
// local subscription (less a margin for the clocks' skew): a group created
// by a publish after the subscription starts at its first record.
// Positions that retention removed before a feed read them are counted
// (sextant_delivery_lost_records_total) and logged with their range; the
// feed continues from the first one held.
//
// Concurrency: Feeds and Server are safe for concurrent use. Feeds owns a
// manager goroutine and one poller per source node (one run.Group), which
// Close stops and waits for; pollers deliver into the broker without
// holding the feeds' lock.
//
// Who imports it: the node, which builds a Server and Feeds and serves
// MethodPoll through the cluster layer.
package delivery
