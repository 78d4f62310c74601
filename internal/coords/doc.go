// Package coords owns the arithmetic Sextant does on Vivaldi network
// coordinates (serf's coordinate.Coordinate): distances, the centroid of a set
// of coordinates, how far a member of a set can be from its centroid, and the
// coordinate of a client derived from its access node.
//
// # Units
//
// A coordinate estimates round-trip time (RTT): RTT(a, b) is serf's
// DistanceTo, heights and adjustments included, except that adjustments
// never take off more than half of the distance (DistanceTo drops them
// altogether when they would make it non-positive, a jump; see RTT). Sextant's placement speaks
// one-way latency, and takes one-way latency as RTT/2 (OneWay). The
// publisher-to-subscriber latencies of placement, E(t), W(t,b) and the
// threshold Lth(t), are one-way: publisher -> broker -> subscriber is
// OneWay(p, b) + OneWay(b, c).
//
// A client's coordinate is its access node's coordinate with the access RTT
// (client <-> access node) added to the height (Client). Heights add to every
// distance, so every estimate from that client carries its access latency.
//
// # Contract
//
// Pure functions over values: no I/O, no clock, no package state; safe for
// concurrent use. Inputs are never modified; results are fresh values. All
// coordinates passed together must have the same dimensionality; functions
// that combine several coordinates check it and return ErrDimensions.
package coords
