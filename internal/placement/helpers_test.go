package placement

import (
	"time"

	"github.com/hashicorp/serf/coordinate"

	"github.com/sextantmq/sextant/internal/coords"
)

// at is a 2-D coordinate x, y milliseconds of RTT from the origin.
func at(x, y float64) *coordinate.Coordinate {
	return &coordinate.Coordinate{Vec: []float64{x / 1000, y / 1000}}
}

func node(id string, x, y float64) Node {
	return Node{ID: NodeID(id), Coord: at(x, y)}
}

// client is a client on node n with a one-way access latency.
func client(n Node, access time.Duration, rate float64) Client {
	return Client{Node: n.ID, Access: access, Coord: coords.Client(n.Coord, 2*access), Rate: rate}
}

// topic builds a topic with its summary computed on its home (if any).
func topic(name string, home Node, lth time.Duration, c Clients) Topic {
	var h *Node
	if home.ID != "" {
		h = &home
	}
	s, err := Summarize(c, h)
	if err != nil {
		panic(err)
	}
	return Topic{Name: name, Home: home.ID, Threshold: lth, Summary: s, Clients: &c}
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func movesByTopic(r Result) map[string]Move {
	m := map[string]Move{}
	for _, mv := range r.Moves {
		m[mv.Topic] = mv
	}
	return m
}
