package placement

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
)

// ErrSnapshot is returned for a snapshot the planner cannot use.
var ErrSnapshot = errors.New("placement: invalid snapshot")

// NodeID names a node (a broker that can be a topic's home).
type NodeID string

// Node is a candidate home with its coordinate and measured load.
type Node struct {
	ID    NodeID
	Coord *coordinate.Coordinate
	Load  Load
	// Rate is every message per second the node handles, in and out, of
	// every mode and client (direct traffic, peer links, the sequenced
	// topics it hosts); 0 means not measured, and the hosted topics' rate
	// stands in for it. The planner attributes to the hosted topics only
	// their share of the load, Rate(topics)/Rate: the rest (connections,
	// direct traffic) does not leave with them.
	Rate float64
	// OutRate is the messages per second the node sends, all traffic; 0
	// means not measured, and the hosted topics' Out stands in for it. It
	// is what Config.MaxOutRate is compared with.
	OutRate float64
}

// Load is a node's measured resource utilisation, each a fraction in [0, 1]
// (1 is saturated). The planner assumes utilisation grows linearly with the
// message rate of the topics a node hosts (ePulsar Section 3.4.3).
type Load struct {
	CPU, Memory, Network float64
}

// Rates are a topic's message rates in messages per second: In is what its
// producers publish, Out what the home delivers to its consumers.
type Rates struct {
	In, Out float64
}

// Total is In + Out, ePulsar's Rout(t): the load a topic puts on its home.
func (r Rates) Total() float64 { return r.In + r.Out }

// Summary is the monitoring record of one topic, computed by its home from the
// topic's clients (Summarize). Its size does not depend on the number of
// clients.
type Summary struct {
	// Producers and Consumers summarise the two sides of the topic.
	Producers, Consumers Side
	// Worst is E(t), one-way: the worst publisher -> home -> subscriber
	// latency estimated from the clients' own coordinates and the home's
	// coordinate when the summary was made; 0 when it had no home.
	Worst time.Duration
	// Publisher is the access node of the producer entry with the highest
	// rate (the lowest node ID among equals); "" without producers. With
	// entries folded per access node (Client.Count), that is the node whose
	// producers publish the most.
	Publisher NodeID
	Rates     Rates
}

// Deviation is W(t), one-way: the producers' deviation plus the consumers'.
func (s *Summary) Deviation() time.Duration {
	return s.Producers.Deviation + s.Consumers.Deviation
}

// Side summarises the producers, or the consumers, of a topic.
type Side struct {
	// Centroid is NC_P(t) (or NC_C(t)); nil when the side is empty.
	Centroid *coordinate.Coordinate
	// Deviation is half (one-way) the largest coords.Deviation of a member
	// from Centroid.
	Deviation time.Duration
	// Center is the approximate centre of the members' smallest enclosing
	// ball (coords.EnclosingCenter) and Radius half the largest deviation
	// from it: the same bound as Centroid and Deviation, tighter when the
	// members are unevenly spread. Used by the Center policy.
	Center *coordinate.Coordinate
	Radius time.Duration
	// Node is the access node all members share, "" when they are on
	// several nodes (or there are none). Coordinates cannot say that a
	// client is close to its own access node (a node's distance to itself
	// is never measured, and its coordinate puts it 2*(height+adjustment)
	// away), so estimates use Access instead when the candidate is Node.
	Node NodeID
	// Access is the largest one-way access latency of a member.
	Access time.Duration
	// Count is the number of members.
	Count int
}

// Client is one producer or consumer of a topic, as its access node sees it.
type Client struct {
	// Node is the client's access node.
	Node NodeID
	// Access is the one-way latency between the client and Node.
	Access time.Duration
	// Coord is the client's coordinate: Node's coordinate with the access RTT
	// in the height (coords.Client).
	Coord *coordinate.Coordinate
	// Rate is the messages per second it publishes (producer) or receives
	// (consumer).
	Rate float64
	// Count is how many clients this entry stands for; 0 means 1. An access
	// node folds a topic's clients into one entry per side: they share its
	// coordinate and differ only in access latency, so the entry with the
	// largest Access bounds them all, Rate is their sum, and Count weighs
	// the entry in the centroid.
	Count int
}

// Clients are a topic's individual producers and consumers.
type Clients struct {
	Producers, Consumers []Client
}

// Topic is a topic (or placement group) to place.
type Topic struct {
	Name string
	// Home is the node the topic lives on now; "" (or a node missing from the
	// snapshot) means it needs a home.
	Home NodeID
	// Threshold is Lth(t), one-way; 0 means no latency constraint.
	Threshold time.Duration
	Summary   Summary
	// Clients are the individual clients. The live system leaves it nil and
	// sends only the Summary; the all-pairs and oracle policies need it and
	// fall back to the centroid estimate without it.
	Clients *Clients
}

// Snapshot is the planner's view of the cluster at one moment.
type Snapshot struct {
	Nodes  []Node
	Topics []Topic
	// Round numbers the round being planned; 0 means the round after the
	// previous one (State.Round + 1). A caller that plans on a timer and
	// also on events numbers its timer rounds and gives an event round the
	// number of the last one: a repeated number does not advance a
	// confirmation streak, so confirmation and cool-down keep counting
	// timer rounds, not events. It must not be below State.Round.
	Round uint64
}

// Validate checks that node IDs and topic names are unique and non-empty, that
// every coordinate is finite and all share one dimensionality, and that loads,
// rates and thresholds are finite and non-negative.
func (s *Snapshot) Validate() error {
	dims := 0
	// check accepts a nil c when optional; what names c, and is only
	// called on error.
	check := func(c *coordinate.Coordinate, optional bool, what func() string) error {
		if c == nil && optional {
			return nil
		}
		if err := coords.Check(c, dims); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrSnapshot, what(), err)
		}
		dims = len(c.Vec)
		return nil
	}
	nodes := make(map[NodeID]bool, len(s.Nodes))
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if n.ID == "" || nodes[n.ID] {
			return fmt.Errorf("%w: empty or duplicate node ID %q", ErrSnapshot, n.ID)
		}
		nodes[n.ID] = true
		if err := check(n.Coord, false, func() string { return "node " + string(n.ID) }); err != nil {
			return err
		}
		if !nonNegative(n.Load.CPU) || !nonNegative(n.Load.Memory) || !nonNegative(n.Load.Network) ||
			!nonNegative(n.Rate) || !nonNegative(n.OutRate) {
			return fmt.Errorf("%w: node %s: bad load %+v, rate %v, out rate %v", ErrSnapshot, n.ID, n.Load, n.Rate, n.OutRate)
		}
	}
	topics := make(map[string]bool, len(s.Topics))
	for i := range s.Topics {
		t := &s.Topics[i]
		if t.Name == "" || topics[t.Name] {
			return fmt.Errorf("%w: empty or duplicate topic name %q", ErrSnapshot, t.Name)
		}
		topics[t.Name] = true
		what := func() string { return "topic " + t.Name }
		sum := &t.Summary
		if t.Threshold < 0 || sum.Worst < 0 || !nonNegative(sum.Rates.In) || !nonNegative(sum.Rates.Out) {
			return fmt.Errorf("%w: topic %s: negative threshold, latency or rate", ErrSnapshot, t.Name)
		}
		for _, side := range [2]*Side{&sum.Producers, &sum.Consumers} {
			if side.Deviation < 0 || side.Radius < 0 || side.Access < 0 || side.Count < 0 {
				return fmt.Errorf("%w: topic %s: negative deviation, radius, access latency or count", ErrSnapshot, t.Name)
			}
			if err := check(side.Centroid, true, what); err != nil {
				return err
			}
			if err := check(side.Center, true, what); err != nil {
				return err
			}
		}
		if t.Clients == nil {
			continue
		}
		for _, list := range [2][]Client{t.Clients.Producers, t.Clients.Consumers} {
			for j := range list {
				c := &list[j]
				if err := check(c.Coord, false, what); err != nil {
					return err
				}
				if c.Access < 0 || !nonNegative(c.Rate) || c.Count < 0 {
					return fmt.Errorf("%w: topic %s: client with negative access latency, rate or count", ErrSnapshot, t.Name)
				}
			}
		}
	}
	return nil
}

func nonNegative(v float64) bool { return v >= 0 && !math.IsInf(v, 1) }
