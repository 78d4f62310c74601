// Package message owns Sextant's in-broker representation of an application
// message (what a PUBLISH carries, independent of the connection it arrived
// on) and its compact binary encoding, used by the store and by peer links.
// It depends on nothing else in Sextant.
package message

import "time"

// UserProperty is an MQTT 5 user property pair.
type UserProperty struct {
	Key, Value string
}

// Message is one application message as the broker routes it. A Message is
// immutable once published: many sessions share one value, so nothing may
// modify it (or its slices) after it leaves the publisher's connection.
type Message struct {
	Topic   string
	Payload []byte
	QoS     byte // the QoS it was published with
	Retain  bool

	// MQTT 5 properties carried end to end.
	PayloadFormat   byte   // 0 unspecified bytes, 1 UTF-8
	ContentType     string //
	ResponseTopic   string
	CorrelationData []byte
	User            []UserProperty
	// Expiry is when the message stops being deliverable (zero: never). The
	// Message Expiry Interval sent to a subscriber is the time left.
	Expiry time.Time

	// Provenance.
	Publisher string    // client id of the publisher ("" for the broker itself); used by No Local
	Created   time.Time // when the broker received it
	Origin    string    // id of the node the publisher is connected to ("" on a node running alone)
	// Stamp is the hybrid logical clock time of a retained message, which
	// orders concurrent retained updates across nodes (last writer wins, ties
	// broken by Origin). Zero on a node running alone.
	Stamp uint64
}

// Expired reports whether the message must no longer be delivered at now.
func (m *Message) Expired(now time.Time) bool {
	return !m.Expiry.IsZero() && !now.Before(m.Expiry)
}

// ExpiryInterval returns the Message Expiry Interval to put on an outgoing
// PUBLISH at now, in whole seconds rounded up, and whether there is one.
func (m *Message) ExpiryInterval(now time.Time) (uint32, bool) {
	if m.Expiry.IsZero() {
		return 0, false
	}
	left := m.Expiry.Sub(now)
	if left <= 0 {
		return 0, true
	}
	secs := (left + time.Second - 1) / time.Second
	if secs > 0xFFFFFFFF {
		secs = 0xFFFFFFFF
	}
	return uint32(secs), true
}

// Size is an estimate of the memory the message holds, for queue accounting.
func (m *Message) Size() int {
	n := 112 + len(m.Topic) + len(m.Origin) + len(m.Payload) + len(m.ContentType) + len(m.ResponseTopic) + len(m.CorrelationData) + len(m.Publisher)
	for _, u := range m.User {
		n += 32 + len(u.Key) + len(u.Value)
	}
	return n
}
