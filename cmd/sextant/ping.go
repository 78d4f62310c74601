package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/sextantmq/sextant/internal/bench"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// PingCmd measures MQTT-level round trips to a broker.
type PingCmd struct{ clientArgs }

const pingHelp = `Measure MQTT round trips to a broker: PINGREQ/PINGRESP (the default), or a publish to a
topic the client itself subscribes to, at QoS 0, 1 or 2 (--mode qos0|qos1|qos2), which
measures the broker's whole publish path. Prints one line per sample and a summary with
percentiles; exits with status 1 if the broker does not answer a sample within --timeout.

Examples:
  sextant ping -h broker
  sextant ping --url mqtt://broker:1883 --mode qos1 -c 100 --interval 10ms`

type pingFlags struct {
	connFlags

	ClientID string        `short:"i" name:"id" placeholder:"ID" help:"Client id (default: sextant-ping-<pid>)."`
	Count    int           `short:"c" name:"count" default:"10" placeholder:"N" help:"Samples to take (default ${default})."`
	Interval time.Duration `name:"interval" default:"1s" help:"Time between samples."`
	Wait     time.Duration `name:"timeout" default:"5s" help:"How long to wait for each answer."`
	Mode     string        `name:"mode" default:"ping" enum:"ping,qos0,qos1,qos2" help:"ping (PINGREQ), or qos0/qos1/qos2 (publish to our own subscription)."`
	Topic    string        `short:"t" name:"topic" placeholder:"TOPIC" help:"Topic for the publish modes (default: sextant/ping/<client id>)."`
	Size     int           `name:"size" default:"16" placeholder:"BYTES" help:"Payload bytes in the publish modes, at least 8 (default ${default})."`
	JSON     bool          `name:"json" help:"Print the summary as JSON (and no per-sample lines)."`
	Debug    bool          `short:"d" name:"debug" help:"Print every packet sent and received on stderr."`
}

type pingSummary struct {
	Broker   string        `json:"broker"`
	Mode     string        `json:"mode"`
	Sent     int           `json:"sent"`
	Answered int           `json:"answered"`
	Latency  bench.Latency `json:"rtt"`
}

func (c *PingCmd) Run(e *env) error {
	var f pingFlags
	if done, err := parseFlags(e, "ping", pingHelp, &f, c.Args); done || err != nil {
		return err
	}
	if f.Count <= 0 || f.Interval < 0 || f.Wait <= 0 || f.Size < 8 {
		return usageError(errors.New("ping: want -c > 0, --interval >= 0, --timeout > 0 and --size >= 8"))
	}
	url, err := f.target()
	if err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	o.ClientID = f.ClientID
	if o.ClientID == "" {
		o.ClientID = fmt.Sprintf("sextant-ping-%d", os.Getpid())
	}
	if f.Debug {
		o.Trace = tracer(e.stderr)
	}
	qos := -1
	if f.Mode != "ping" {
		qos = int(f.Mode[3] - '0')
	}
	topic := f.Topic
	if topic == "" {
		topic = "sextant/ping/" + o.ClientID
	}
	// In the publish modes the handler hands each sample's sequence number
	// back to the measuring loop.
	got := make(chan uint64, 16)
	if qos >= 0 {
		o.OnPublish = func(p *packet.Publish) {
			if p.Topic == topic && len(p.Payload) >= 8 {
				select {
				case got <- binary.BigEndian.Uint64(p.Payload):
				default:
				}
			}
		}
	}
	cl, err := f.dial(e.ctx, o)
	if err != nil {
		return err
	}
	defer cl.Close()
	if qos >= 0 {
		sctx, cancel := context.WithTimeout(e.ctx, f.Wait)
		_, err := cl.Subscribe(sctx, &packet.Subscribe{Subs: []packet.Subscription{{Filter: topic, QoS: byte(qos)}}})
		cancel()
		if err != nil {
			return fmt.Errorf("ping: subscribe %q: %w", topic, err)
		}
	}
	hist := bench.NewLatencyRecorder()
	sum := pingSummary{Broker: url, Mode: f.Mode}
	payload := make([]byte, f.Size)
	var missed error
	start := time.Now()
	for seq := 0; seq < f.Count; seq++ {
		if seq > 0 {
			if err := sleepUntil(e.ctx, start.Add(time.Duration(seq)*f.Interval)); err != nil {
				break
			}
		}
		sctx, cancel := context.WithTimeout(e.ctx, f.Wait)
		t0 := time.Now()
		var err error
		if qos < 0 {
			err = cl.Ping(sctx)
		} else {
			err = pingPublish(sctx, cl, got, topic, byte(qos), payload, uint64(seq))
		}
		rtt := time.Since(t0)
		cancel()
		sum.Sent++
		switch {
		case err == nil:
			sum.Answered++
			bench.RecordLatency(hist, rtt)
			if !f.JSON {
				fmt.Fprintf(e.stdout, "%s seq=%d rtt=%.3f ms\n", url, seq, float64(rtt)/float64(time.Millisecond))
			}
		case e.ctx.Err() != nil:
			sum.Sent--
		case errors.Is(err, context.DeadlineExceeded):
			missed = fmt.Errorf("ping: %s did not answer within %v (%d of %d samples unanswered)", url, f.Wait, sum.Sent-sum.Answered, sum.Sent)
			if !f.JSON {
				fmt.Fprintf(e.stdout, "%s seq=%d no answer within %v\n", url, seq, f.Wait)
			}
		default:
			return fmt.Errorf("ping: %w", err)
		}
		if e.ctx.Err() != nil {
			break
		}
	}
	sum.Latency = bench.Summarize(hist)
	if f.JSON {
		b, _ := json.MarshalIndent(&sum, "", "  ")
		fmt.Fprintln(e.stdout, string(b))
	} else {
		fmt.Fprintf(e.stdout, "--- %s %s: %d sent, %d answered\nrtt ms: %s\n", url, f.Mode, sum.Sent, sum.Answered, bench.LatencyLine(sum.Latency))
	}
	dctx, cancel := context.WithTimeout(context.Background(), f.Wait)
	defer cancel()
	_ = cl.Disconnect(dctx, nil)
	if missed != nil {
		return missed
	}
	if sum.Answered == 0 && sum.Sent > 0 {
		return errors.New("ping: no answers")
	}
	return nil
}

// pingPublish publishes sample seq to our own subscription and waits until
// it comes back.
func pingPublish(ctx context.Context, cl *mqttclient.Client, got <-chan uint64, topic string, qos byte, payload []byte, seq uint64) error {
	binary.BigEndian.PutUint64(payload, seq)
	if err := cl.PublishAsync(ctx, &packet.Publish{Topic: topic, QoS: qos, Payload: payload}, nil); err != nil {
		return err
	}
	for {
		select {
		case s := <-got:
			if s == seq {
				return nil
			}
			// A late answer to an earlier sample: keep waiting.
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
