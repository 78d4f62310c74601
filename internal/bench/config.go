package bench

import (
	"crypto/tls"
	"errors"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Scenario names a load shape.
type Scenario string

const (
	// P2P is one publisher and one subscriber on one topic.
	P2P Scenario = "p2p"
	// Fanout is one publisher and Subs subscribers of its topic.
	Fanout Scenario = "fanout"
	// Fanin is Pubs publishers, each on its own topic, and one subscriber
	// of a wildcard filter covering them all.
	Fanin Scenario = "fanin"
	// ManyTopics is Topics topics with one subscriber each, and Pubs
	// publishers sending to the topics in round-robin order.
	ManyTopics Scenario = "manytopics"
	// Rate is P2P (or Pubs x Subs on one topic) at a fixed open-loop rate.
	Rate Scenario = "rate"
	// Connections opens Conns idle connections with one subscription each
	// and reports what they cost the broker.
	Connections Scenario = "connections"
)

// Scenarios lists every scenario, in the order help texts show them.
func Scenarios() []Scenario { return []Scenario{P2P, Fanout, Fanin, ManyTopics, Rate, Connections} }

// HeaderSize is the smallest payload the generator can send: the header.
const HeaderSize = 18

// Config is one run. Zero fields take the scenario's defaults (see
// Normalize).
type Config struct {
	Scenario Scenario
	URL      string         // broker address (see mqttclient.ParseURL)
	SubURL   string         // where subscribers connect, if not URL (another node of a cluster)
	Version  packet.Version // 0: MQTT 5
	Username string
	Password string
	TLS      *tls.Config

	QoS         byte
	PayloadSize int           // bytes per message, at least HeaderSize; default 64
	Count       int           // messages per publisher; 0: run for Duration
	Duration    time.Duration // publishing time when Count is 0; default 10s
	Rate        float64       // messages per second over all publishers; 0: closed loop
	Inflight    int           // QoS 1/2 window per publisher (capped by Receive Maximum); default 100
	Pubs        int           // publishers
	Subs        int           // subscribers (fanout, rate)
	Topics      int           // topics (manytopics)
	Conns       int           // connections (connections scenario); default 1000
	ConnectRate float64       // connections opened per second; 0: as fast as 16 dialers go
	Hold        time.Duration // connections: settle time before measuring; default 2s
	Drain       time.Duration // how long to wait for stragglers once publishing ends; default 5s
	KeepAlive   time.Duration // per connection; default 60s

	// TopicPrefix roots every topic of the run; default sxbench/<random>.
	TopicPrefix string
	// ClientPrefix starts every client id; default sxb-<random>.
	ClientPrefix string

	// BrokerPID, when set, is read in /proc for the broker's CPU and memory.
	BrokerPID int

	// Sequenced makes the subscribers check the sx-index user property of
	// every delivery (a sequenced topic's: present, and gap-free per topic
	// from the first one seen) and the result report it (Result.SxIndex).
	// Needs MQTT 5.
	Sequenced bool

	// Progress, when set, is called about once a second during the run.
	Progress func(Progress)
	// Seed makes the random prefixes reproducible; 0 picks one.
	Seed int64
}

// Progress is a snapshot of a run in progress.
type Progress struct {
	Elapsed  time.Duration
	Phase    string // "connect", "publish", "drain", "hold"
	Sent     int64
	Received int64
	Conns    int
}

// Normalize fills in the scenario's defaults and checks the config.
func (c *Config) Normalize() error {
	if c.Scenario == "" {
		c.Scenario = P2P
	}
	if c.Version == 0 {
		c.Version = packet.V5
	}
	if c.PayloadSize == 0 {
		c.PayloadSize = 64
	}
	if c.Inflight == 0 {
		c.Inflight = 100
	}
	if c.Duration == 0 && c.Count == 0 {
		c.Duration = 10 * time.Second
	}
	if c.Drain == 0 {
		c.Drain = 5 * time.Second
	}
	if c.Hold == 0 {
		c.Hold = 2 * time.Second
	}
	if c.KeepAlive == 0 {
		c.KeepAlive = 60 * time.Second
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	switch c.Scenario {
	case P2P:
		def(&c.Pubs, 1)
		def(&c.Subs, 1)
	case Fanout:
		def(&c.Pubs, 1)
		def(&c.Subs, 100)
	case Fanin:
		def(&c.Pubs, 10)
		def(&c.Subs, 1)
	case ManyTopics:
		def(&c.Topics, 100)
		def(&c.Pubs, 10)
		c.Subs = c.Topics
	case Rate:
		def(&c.Pubs, 1)
		def(&c.Subs, 1)
		if c.Rate == 0 {
			c.Rate = 10000
		}
	case Connections:
		def(&c.Conns, 1000)
	default:
		return fmt.Errorf("bench: unknown scenario %q (want one of %v)", c.Scenario, Scenarios())
	}
	if c.Topics == 0 {
		c.Topics = 1
	}
	switch {
	case c.URL == "":
		return errors.New("bench: no broker URL")
	case c.Version != packet.V311 && c.Version != packet.V5:
		return fmt.Errorf("bench: MQTT version %d (want 3.1.1 or 5)", c.Version)
	case c.QoS > 2:
		return fmt.Errorf("bench: QoS %d", c.QoS)
	case c.PayloadSize < HeaderSize:
		return fmt.Errorf("bench: payload size %d is below the %d-byte header", c.PayloadSize, HeaderSize)
	case c.Count < 0 || c.Duration < 0 || c.Rate < 0 || c.Inflight < 0 || c.Pubs < 0 || c.Subs < 0 || c.Conns < 0:
		return errors.New("bench: negative count, duration, rate, window or client number")
	case c.Scenario != Connections && (c.Pubs == 0 || c.Subs == 0):
		return errors.New("bench: a scenario needs at least one publisher and one subscriber")
	case c.Sequenced && c.Version != packet.V5:
		return errors.New("bench: --sequenced needs MQTT 5 (sx-index is a user property)")
	case c.Inflight > 65535:
		return fmt.Errorf("bench: in-flight window %d over 65535", c.Inflight)
	}
	return nil
}
