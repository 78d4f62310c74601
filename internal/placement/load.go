package placement

// loads is the planner's projection of every node's load as topics are taken
// off and put on nodes during one round. Utilisation is modelled, per
// resource, as a node's own base load plus a cost per message/s that is the
// same on every node (ePulsar Section 3.4.3 assumes identical brokers): the
// cost is the pooled ratio of utilisation to message rate over the nodes
// that handle messages, Σ util / Σ rate, so the busy nodes, whose load is
// mostly messages, dominate it. A node's rate is every message it handles
// (Node.Rate), or the rate of the topics it hosts when that is not measured
// or is lower. A hosted topic therefore carries cost × its rate, and the
// rest of a node's load (connections, direct traffic, a baseline) stays on
// it whatever moves: a node with little traffic is neither cheap to relieve
// nor expensive to add to.
type loads struct {
	limit   float64    // utilisation above which a node is overloaded
	maxOut  float64    // output messages/s above which a node is overloaded; 0: no limit
	cost    [3]float64 // utilisation per message/s, per resource
	byNode  map[NodeID]*nodeLoad
	ordered []*nodeLoad // by node ID
}

type nodeLoad struct {
	id   NodeID
	util [3]float64 // CPU, memory, network
	rate float64    // messages/s the node handles (all traffic)
	out  float64    // messages/s the node sends (all traffic)
}

func newLoads(nodes []Node, topics []*Topic, limit, maxOut float64) *loads {
	l := &loads{limit: limit, maxOut: maxOut, byNode: make(map[NodeID]*nodeLoad, len(nodes))}
	for i := range nodes {
		n := &nodes[i]
		nl := &nodeLoad{id: n.ID, util: [3]float64{n.Load.CPU, n.Load.Memory, n.Load.Network}}
		l.byNode[n.ID] = nl
		l.ordered = append(l.ordered, nl)
	}
	for _, t := range topics {
		if nl := l.byNode[t.Home]; nl != nil {
			nl.rate += t.Summary.Rates.Total()
			nl.out += t.Summary.Rates.Out
		}
	}
	var util [3]float64
	rate := 0.0
	for i := range nodes {
		nl := l.byNode[nodes[i].ID]
		nl.rate = max(nl.rate, nodes[i].Rate)
		nl.out = max(nl.out, nodes[i].OutRate)
		if nl.rate > 0 {
			rate += nl.rate
			for r := range util {
				util[r] += nl.util[r]
			}
		}
	}
	if rate > 0 {
		for r := range util {
			l.cost[r] = util[r] / rate
		}
	}
	return l
}

func (l *loads) overloaded(nl *nodeLoad) bool {
	for _, u := range nl.util {
		if u > l.limit {
			return true
		}
	}
	return l.maxOut > 0 && nl.out > l.maxOut
}

// relieves reports whether taking t off nl lowers a quantity that is over
// its limit: a topic with no rate (or no output, when only the output rate
// is over) frees nothing.
func (l *loads) relieves(nl *nodeLoad, t *Topic) bool {
	rate := t.Summary.Rates.Total()
	for r, u := range nl.util {
		if u > l.limit && l.cost[r]*rate > 0 {
			return true
		}
	}
	return l.maxOut > 0 && nl.out > l.maxOut && t.Summary.Rates.Out > 0
}

// relievable reports whether taking every one of hosted off nl would bring
// it under its limits. When it would not, the node's load is not its
// topics' and shedding them would cost migrations and fix nothing.
func (l *loads) relievable(nl *nodeLoad, hosted []*Topic) bool {
	var rate, out float64
	for _, t := range hosted {
		rate += t.Summary.Rates.Total()
		out += t.Summary.Rates.Out
	}
	for r, u := range nl.util {
		if u-l.cost[r]*rate > l.limit {
			return false
		}
	}
	return l.maxOut == 0 || nl.out-out <= l.maxOut
}

// canHost reports whether adding t keeps nl from being overloaded.
func (l *loads) canHost(nl *nodeLoad, t *Topic) bool {
	rate := t.Summary.Rates.Total()
	for r, u := range nl.util {
		if u+l.cost[r]*rate > l.limit {
			return false
		}
	}
	return l.maxOut == 0 || nl.out+t.Summary.Rates.Out <= l.maxOut
}

func (l *loads) add(nl *nodeLoad, t *Topic, sign float64) {
	rate := t.Summary.Rates.Total()
	for r := range nl.util {
		nl.util[r] = max(0, nl.util[r]+sign*l.cost[r]*rate)
	}
	nl.rate = max(0, nl.rate+sign*rate)
	nl.out = max(0, nl.out+sign*t.Summary.Rates.Out)
}
