package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/bench"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// PubCmd publishes messages: sextant pub -t TOPIC -m MESSAGE.
type PubCmd struct{ clientArgs }

const pubHelp = `Publish messages to an MQTT broker (any MQTT 3.1.1 or 5 broker, not only Sextant).

The payload comes from -m, -f, -n, -s, -l or --size. With --count and --rate the same
message is sent repeatedly; --stamp puts the send time in front of each payload so that
'sextant sub --latency' can measure end-to-end latency.

Examples:
  sextant pub -t sensors/1 -m 21.5
  sextant pub --url mqtt://broker:1883 -t a/b -q 1 -r -m hello
  sextant pub -t load -q 1 --count 10000 --rate 1000 --size 64 --stamp`

type pubFlags struct {
	connFlags
	sessionFlags

	Topic   string `short:"t" placeholder:"TOPIC" group:"Message" help:"Topic to publish to (required)."`
	Message string `short:"m" placeholder:"TEXT" group:"Message" help:"Message payload."`
	File    string `short:"f" type:"path" placeholder:"FILE" group:"Message" help:"Send the contents of a file as the payload."`
	Null    bool   `short:"n" name:"null-message" group:"Message" help:"Send an empty payload."`
	Stdin   bool   `short:"s" name:"stdin-file" group:"Message" help:"Send all of standard input as one message."`
	Lines   bool   `short:"l" name:"stdin-line" group:"Message" help:"Send each line of standard input as a message."`
	Size    int    `name:"size" placeholder:"BYTES" group:"Message" help:"Send a generated payload of this many bytes."`
	QoS     int    `short:"q" name:"qos" placeholder:"0|1|2" group:"Message" help:"Quality of service: 0, 1 or 2."`
	Retain  bool   `short:"r" name:"retain" group:"Message" help:"Ask the broker to retain the message."`

	Count int     `name:"count" default:"1" placeholder:"N" group:"Load" help:"Send the message this many times (default ${default})."`
	Rate  float64 `name:"rate" placeholder:"MSG/S" group:"Load" help:"Messages per second (0: as fast as the in-flight window allows)."`
	Stamp bool    `name:"stamp" group:"Load" help:"Prefix each payload with its send time (sx-ts=<unix ns>;) for sub --latency."`

	UserProps       []string `short:"D" name:"user-property" sep:"none" group:"MQTT 5" placeholder:"KEY=VALUE" help:"User property of the PUBLISH (repeatable)."`
	ContentType     string   `name:"content-type" placeholder:"TEXT" group:"MQTT 5" help:"Content Type property."`
	ResponseTopic   string   `name:"response-topic" placeholder:"TOPIC" group:"MQTT 5" help:"Response Topic property."`
	CorrelationData string   `name:"correlation-data" placeholder:"TEXT" group:"MQTT 5" help:"Correlation Data property."`
	MessageExpiry   int64    `name:"message-expiry" default:"-1" placeholder:"SECONDS" group:"MQTT 5" help:"Message Expiry Interval in seconds, -1 for none (default ${default})."`
	TopicAlias      bool     `name:"topic-alias" group:"MQTT 5" help:"Use topic aliases when the broker allows them."`

	Debug bool `short:"d" name:"debug" help:"Print every packet sent and received on stderr."`
	Quiet bool `name:"quiet" help:"Do not print the summary of a multi-message run."`
}

func (c *PubCmd) Run(e *env) error {
	var f pubFlags
	if done, err := parseFlags(e, "pub", pubHelp, &f, c.Args); done || err != nil {
		return err
	}
	base, lines, err := f.payload()
	if err != nil {
		return err
	}
	pk, err := f.packet()
	if err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	if err := f.apply(&o, "pub"); err != nil {
		return err
	}
	o.TopicAliases = f.TopicAlias
	if f.Debug {
		o.Trace = tracer(e.stderr)
	}
	cl, err := f.dial(e.ctx, o)
	if err != nil {
		return err
	}
	defer cl.Close()

	var wg sync.WaitGroup
	var mu sync.Mutex
	var acked, failed int
	var firstErr error
	done := func(err error) {
		mu.Lock()
		if err != nil {
			failed++
			if firstErr == nil {
				firstErr = err
			}
		} else {
			acked++
		}
		mu.Unlock()
		wg.Done()
	}
	start := time.Now()
	var interval time.Duration
	if f.Rate > 0 {
		interval = time.Duration(float64(time.Second) / f.Rate)
	}
	sent := 0
	var buf []byte
	next := func() ([]byte, bool) {
		if lines != nil {
			if !lines.Scan() {
				return nil, false
			}
			return lines.Bytes(), true
		}
		return base, sent < f.Count
	}
	for {
		msg, ok := next()
		if !ok {
			break
		}
		if interval > 0 {
			if err := sleepUntil(e.ctx, start.Add(time.Duration(sent)*interval)); err != nil {
				break
			}
		}
		pk.Payload = msg
		if f.Stamp {
			buf = append(bench.AppendStamp(buf[:0], time.Now()), msg...)
			pk.Payload = buf
		}
		if pk.QoS > 0 {
			wg.Add(1)
		}
		if err := cl.PublishAsync(e.ctx, pk, done); err != nil {
			if pk.QoS > 0 {
				wg.Done()
			}
			if errors.Is(err, context.Canceled) {
				break
			}
			return fmt.Errorf("publish: %w", err)
		}
		sent++
	}
	if lines != nil && lines.Err() != nil {
		return fmt.Errorf("reading standard input: %w", lines.Err())
	}
	wg.Wait()
	elapsed := time.Since(start)
	dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	derr := cl.Disconnect(dctx, nil)
	if !f.Quiet && (sent > 1 || lines != nil) {
		line := fmt.Sprintf("published %d messages in %.3f s (%.0f msg/s)", sent, elapsed.Seconds(), float64(sent)/elapsed.Seconds())
		if pk.QoS > 0 {
			line += fmt.Sprintf(", %d acknowledged", acked)
		}
		fmt.Fprintln(e.stdout, line)
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d publishes failed: %w", failed, sent, firstErr)
	}
	return derr
}

// payload returns the message to send repeatedly, or a scanner of lines.
func (f *pubFlags) payload() ([]byte, *bufio.Scanner, error) {
	sources := 0
	for _, set := range []bool{f.Message != "", f.File != "", f.Null, f.Stdin, f.Lines, f.Size > 0} {
		if set {
			sources++
		}
	}
	switch {
	case f.Topic == "":
		return nil, nil, usageError(errors.New("pub: no topic (-t)"))
	case sources == 0:
		return nil, nil, usageError(errors.New("pub: no payload: give one of -m, -f, -n, -s, -l or --size"))
	case sources > 1:
		return nil, nil, usageError(errors.New("pub: give only one of -m, -f, -n, -s, -l and --size"))
	case f.Size < 0 || f.Count < 0 || f.Rate < 0:
		return nil, nil, usageError(errors.New("pub: negative --size, --count or --rate"))
	}
	switch {
	case f.Message != "":
		return []byte(f.Message), nil, nil
	case f.File != "":
		b, err := os.ReadFile(f.File)
		if err != nil {
			return nil, nil, usageError(fmt.Errorf("-f: %w", err))
		}
		return b, nil, nil
	case f.Null:
		return []byte{}, nil, nil
	case f.Stdin:
		b, err := io.ReadAll(os.Stdin)
		if err != nil {
			return nil, nil, fmt.Errorf("reading standard input: %w", err)
		}
		return b, nil, nil
	case f.Lines:
		sc := bufio.NewScanner(os.Stdin)
		sc.Buffer(make([]byte, 64<<10), packet.MaxPacketSize)
		return nil, sc, nil
	}
	b := make([]byte, f.Size)
	for i := range b {
		b[i] = 'x'
	}
	return b, nil, nil
}

// packet builds the PUBLISH template from the flags.
func (f *pubFlags) packet() (*packet.Publish, error) {
	if err := checkQoS("-q", f.QoS); err != nil {
		return nil, err
	}
	pk := &packet.Publish{Topic: f.Topic, QoS: byte(f.QoS), Retain: f.Retain}
	u, err := parseUserProps(f.UserProps)
	if err != nil {
		return nil, err
	}
	pr := &pk.Props
	pr.User = u
	if f.ContentType != "" {
		pr.SetContentType(f.ContentType)
	}
	if f.ResponseTopic != "" {
		pr.SetResponseTopic(f.ResponseTopic)
	}
	if f.CorrelationData != "" {
		pr.SetCorrelationData([]byte(f.CorrelationData))
	}
	switch {
	case f.MessageExpiry > 0xFFFFFFFF || f.MessageExpiry < -1:
		return nil, usageError(fmt.Errorf("--message-expiry %d: want -1..4294967295", f.MessageExpiry))
	case f.MessageExpiry >= 0:
		pr.SetMessageExpiry(uint32(f.MessageExpiry))
	}
	return pk, nil
}

// sleepUntil waits until t or until ctx ends.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-tm.C:
		return nil
	}
}
