package main

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/bench"
)

// BenchCmd runs the load generator against any MQTT broker.
type BenchCmd struct{ clientArgs }

const benchHelp = `Load an MQTT broker (any MQTT 3.1.1 or 5 broker) with a scenario and report throughput,
end-to-end latency percentiles (HDR histograms), and the fate of every message: lost,
duplicated and reordered, per publisher.

Scenarios:
  p2p          one publisher, one subscriber, as fast as flow control allows
  fanout       one publisher, --subs subscribers of its topic (default 100)
  fanin        --pubs publishers (default 10), one wildcard subscriber
  manytopics   --topics topics with one subscriber each (default 100), --pubs publishers
               sending to them round-robin (default 10)
  rate         p2p at a fixed open-loop --rate (default 10000 msg/s)
  connections  open --conns idle connections with one subscription each (default 1000)
               and report the broker's memory per connection (needs --broker-pid)

Against a cluster, --sub-url puts the subscribers on another node. With --sequenced (topics
under a sequenced policy rule) the subscribers also check each delivery's sx-index: present,
and rising by one per topic from the first seen (scripts/bench-sequenced.sh compares direct
topics with replicas 1, 3 and 5 that way).

Any scenario takes --rate to publish at a fixed total rate instead of closed loop. With
--broker-pid the broker's CPU seconds per delivered message and its RSS come from /proc.
The generator reports its own CPU use (process CPU time / wall time) and says when it, or
it and the broker together, saturated the machine's cores.

Examples:
  sextant bench p2p -q 1 --duration 10s
  sextant bench fanout --subs 1000 --rate 100 --duration 30s --broker-pid $(pidof sextant)
  sextant bench rate --url mqtt://broker:1883 --rate 10000 --json`

type benchFlags struct {
	connFlags

	Scenario string `arg:"" name:"scenario" enum:"p2p,fanout,fanin,manytopics,rate,connections" help:"p2p, fanout, fanin, manytopics, rate or connections."`

	QoS         int           `short:"q" name:"qos" placeholder:"0|1|2" group:"Load" help:"QoS of publishes and subscriptions."`
	Size        int           `name:"size" default:"64" placeholder:"BYTES" group:"Load" help:"Payload bytes per message, at least 18 (default ${default})."`
	Count       int           `name:"count" placeholder:"N" group:"Load" help:"Messages per publisher (instead of --duration)."`
	Duration    time.Duration `name:"duration" default:"10s" group:"Load" help:"How long to publish (unless --count)."`
	Rate        float64       `name:"rate" placeholder:"MSG/S" group:"Load" help:"Total messages per second over all publishers (0: closed loop)."`
	Inflight    int           `name:"inflight" default:"100" placeholder:"N" group:"Load" help:"QoS 1/2 window per publisher, capped by the broker's Receive Maximum (default ${default})."`
	Pubs        int           `name:"pubs" placeholder:"N" group:"Load" help:"Publishers (scenario default)."`
	Subs        int           `name:"subs" placeholder:"N" group:"Load" help:"Subscribers (scenario default)."`
	Topics      int           `name:"topics" placeholder:"N" group:"Load" help:"Topics (manytopics)."`
	Conns       int           `name:"conns" placeholder:"N" group:"Load" help:"Connections (connections scenario)."`
	ConnectRate float64       `name:"connect-rate" placeholder:"CONN/S" group:"Load" help:"Connections opened per second (0: as fast as possible)."`
	Hold        time.Duration `name:"hold" default:"2s" group:"Load" help:"connections: how long to hold them before measuring."`
	Drain       time.Duration `name:"drain" default:"5s" group:"Load" help:"After publishing, wait this long without progress for stragglers."`
	Prefix      string        `name:"topic-prefix" placeholder:"TOPIC" group:"Load" help:"Root of the run's topics (default sxbench/<random>)."`

	SubURL    string `name:"sub-url" placeholder:"URL" group:"Broker" help:"Connect the subscribers to this broker instead (another node of a cluster: measures cross-node delivery)."`
	BrokerPID int    `name:"broker-pid" placeholder:"PID" group:"Output" help:"PID of the broker process, for its CPU and memory (local brokers only)."`
	JSON      bool   `name:"json" group:"Output" help:"Print the result as JSON."`
	Quiet     bool   `name:"quiet" group:"Output" help:"No progress line."`
	Strict    bool   `name:"strict" group:"Output" help:"Exit with status 3 if any message was lost, duplicated or reordered, or an error occurred."`
	Sequenced bool   `name:"sequenced" group:"Load" help:"The topics are sequenced (a policy rule with mode: sequenced): check that every delivery carries sx-index, gap-free per topic, and report it (MQTT 5)."`
}

func (c *BenchCmd) Run(e *env) error {
	var f benchFlags
	if done, err := parseFlags(e, "bench", benchHelp, &f, c.Args); done || err != nil {
		return err
	}
	url, err := f.target()
	if err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	if err := checkQoS("-q", f.QoS); err != nil {
		return err
	}
	cfg := bench.Config{
		Scenario: bench.Scenario(f.Scenario), URL: url, SubURL: f.SubURL, Version: o.Version,
		Username: f.Username, Password: f.Password, TLS: o.TLS, KeepAlive: o.KeepAlive,
		QoS: byte(f.QoS), PayloadSize: f.Size, Count: f.Count, Duration: f.Duration, Rate: f.Rate,
		Inflight: f.Inflight, Pubs: f.Pubs, Subs: f.Subs, Topics: f.Topics, Conns: f.Conns,
		ConnectRate: f.ConnectRate, Hold: f.Hold, Drain: f.Drain, TopicPrefix: f.Prefix,
		BrokerPID: f.BrokerPID, Sequenced: f.Sequenced,
	}
	if f.Count > 0 {
		cfg.Duration = 0
	}
	if err := cfg.Normalize(); err != nil {
		return usageError(err)
	}
	p := &progressLine{w: e.stderr, tty: isTerminal(e.stderr)}
	if !f.Quiet {
		cfg.Progress = p.show
	}
	res, err := bench.Run(e.ctx, cfg)
	p.end()
	if err != nil {
		return err
	}
	if f.JSON {
		err = bench.WriteJSON(e.stdout, res)
	} else {
		err = bench.WriteText(e.stdout, res)
	}
	if err != nil {
		return err
	}
	if f.Strict && bench.Anomalies(res) {
		return &exitError{code: 3, err: errors.New("bench: messages were lost, duplicated or reordered, or errors occurred (--strict)")}
	}
	return nil
}

// progressLine shows bench progress on stderr once a run has lasted a few
// seconds: rewritten in place on a terminal, a line every 10 s otherwise.
type progressLine struct {
	mu    sync.Mutex
	w     interface{ Write([]byte) (int, error) }
	tty   bool
	shown bool
}

// progressAfter is how long a run goes before it shows progress.
const progressAfter = 3 * time.Second

func (p *progressLine) show(pr bench.Progress) {
	if pr.Elapsed < progressAfter {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	line := bench.FormatProgress(pr)
	if p.tty {
		fmt.Fprintf(p.w, "\r%-70s", line)
		p.shown = true
		return
	}
	if s := int(pr.Elapsed.Round(time.Second) / time.Second); s%10 == 0 {
		fmt.Fprintln(p.w, strings.TrimSpace(line))
	}
}

func (p *progressLine) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprintf(p.w, "\r%-70s\r", "")
	}
}
