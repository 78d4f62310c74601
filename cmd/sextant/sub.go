package main

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/HdrHistogram/hdrhistogram-go"

	"github.com/sextantmq/sextant/internal/bench"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqttclient"
)

// SubCmd subscribes and prints messages: sextant sub -t FILTER.
type SubCmd struct{ clientArgs }

const subHelp = `Subscribe to topic filters on an MQTT broker and print the messages.

Each message is printed as its payload on one line (-v: topic and payload), or with --json
as one JSON object per line: topic, qos, retain, payload (payload_base64 when not UTF-8),
properties, and sx-index when the broker sent it (Sextant's sequenced topics). With
--latency, messages stamped by 'sextant pub --stamp' (or by 'sextant bench') get their
end-to-end latency printed, and a summary with percentiles is printed at exit.

When the connection is lost (the broker restarted, the network dropped), sub reconnects,
waiting 250 ms and doubling up to 30 s between attempts, and subscribes again unless the
broker kept the session (-c). It exits instead when the broker refused it for good (bad
credentials, not authorized, session taken over by another client), or with --no-reconnect.

Examples:
  sextant sub -t 'sensors/#' -v
  sextant sub --url ws://broker:8083/mqtt -t a/b -q 1 --json
  sextant sub -t load -q 1 --latency -C 10000`

type subFlags struct {
	connFlags
	sessionFlags

	Topics []string `short:"t" name:"topic" sep:"none" placeholder:"FILTER" group:"Subscription" help:"Topic filter to subscribe to (repeatable)."`
	QoS    int      `short:"q" name:"qos" placeholder:"0|1|2" group:"Subscription" help:"Maximum QoS of the subscription: 0, 1 or 2."`
	Unsub  []string `short:"U" name:"unsubscribe" sep:"none" placeholder:"FILTER" group:"Subscription" help:"Topic filter to unsubscribe from first (repeatable; useful with -c)."`
	// MQTT 5 subscription options.
	NoLocal        bool     `name:"no-local" group:"MQTT 5" help:"Do not receive our own publishes."`
	RetainAsPub    bool     `name:"retain-as-published" group:"MQTT 5" help:"Keep the retain flag as the publisher set it."`
	RetainHandling int      `name:"retain-handling" placeholder:"0|1|2" group:"MQTT 5" help:"0: send retained messages, 1: only for a new subscription, 2: never."`
	UserProps      []string `short:"D" name:"user-property" sep:"none" group:"MQTT 5" placeholder:"KEY=VALUE" help:"User property of the SUBSCRIBE (repeatable), e.g. sx-from=earliest."`

	Count      int  `short:"C" name:"count" placeholder:"N" group:"Output" help:"Exit after this many messages."`
	Wait       int  `short:"W" name:"timeout" placeholder:"SECONDS" group:"Output" help:"Exit with status 27 after this many seconds (0: never)."`
	Verbose    bool `short:"v" name:"verbose" group:"Output" help:"Print the topic before the payload."`
	JSON       bool `name:"json" group:"Output" help:"Print one JSON object per message."`
	Latency    bool `name:"latency" group:"Output" help:"Print end-to-end latency of stamped messages, and a summary at exit."`
	NoRetained bool `short:"R" name:"no-retained" group:"Output" help:"Do not print messages that arrive with the retain flag."`
	NoEOL      bool `short:"N" name:"no-eol" group:"Output" help:"Do not print a newline after each payload."`
	ExitAfter  bool `short:"E" name:"exit-after-subscribe" group:"Output" help:"Exit once subscribed (to set up a persistent session)."`

	NoReconnect bool `name:"no-reconnect" group:"Broker" help:"Exit when the connection is lost instead of reconnecting."`

	Debug bool `short:"d" name:"debug" help:"Print every packet sent and received on stderr."`
}

// subscriber is the state of the message handler; it runs on the client's
// reader goroutine, and Run reads it only after the client has stopped.
type subPrinter struct {
	f       *subFlags
	out     *bufio.Writer
	n       int
	done    chan struct{}
	hist    *hdrhistogram.Histogram
	stamped int
	err     error
}

func (c *SubCmd) Run(e *env) error {
	var f subFlags
	if done, err := parseFlags(e, "sub", subHelp, &f, c.Args); done || err != nil {
		return err
	}
	sp, err := f.subscribePacket()
	if err != nil {
		return err
	}
	o, err := f.options()
	if err != nil {
		return err
	}
	if err := f.apply(&o, "sub"); err != nil {
		return err
	}
	if f.Debug {
		o.Trace = tracer(e.stderr)
	}
	pr := &subPrinter{f: &f, out: bufio.NewWriter(e.stdout), done: make(chan struct{}), hist: bench.NewLatencyRecorder()}
	o.OnPublish = pr.handle
	cl, err := f.dial(e.ctx, o)
	if err != nil {
		return err
	}
	defer func() {
		if cl != nil {
			cl.Close()
		}
	}()

	var timeout <-chan time.Time
	if f.Wait > 0 {
		t := time.NewTimer(time.Duration(f.Wait) * time.Second)
		defer t.Stop()
		timeout = t.C
	}
	if len(f.Unsub) > 0 {
		if _, err := cl.Unsubscribe(e.ctx, &packet.Unsubscribe{Filters: f.Unsub}); err != nil {
			return fmt.Errorf("unsubscribe: %w", err)
		}
	}
	if sp != nil {
		if _, err := cl.Subscribe(e.ctx, sp); err != nil {
			return fmt.Errorf("subscribe: %w", err)
		}
	}
	var res error
	timedOut := &exitError{code: 27, err: fmt.Errorf("sub: timed out after %ds", f.Wait)}
wait:
	for sp != nil && !f.ExitAfter {
		select {
		case <-pr.done:
			break wait
		case <-e.ctx.Done():
			break wait
		case <-timeout:
			res = timedOut
			break wait
		case <-cl.Done():
			lost := cl.Err()
			if f.NoReconnect || !reconnectable(lost) {
				res = lost
				break wait
			}
			cl.Close()
			cl, res = f.reconnect(e, o, sp, lost, pr.done, timeout, timedOut)
			if cl == nil {
				break wait
			}
		}
	}
	var derr error
	if cl != nil {
		dctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		derr = cl.Disconnect(dctx, nil)
	}
	// The client has stopped: the printer is ours now.
	if pr.err != nil {
		return fmt.Errorf("writing output: %w", pr.err)
	}
	if f.Latency {
		pr.summary()
	}
	if err := pr.out.Flush(); err != nil {
		return fmt.Errorf("writing output: %w", err)
	}
	if res != nil {
		return res
	}
	return derr
}

// Reconnection backoff of sub.
const (
	reconnectMin = 250 * time.Millisecond
	reconnectMax = 30 * time.Second
)

// reconnect connects again after the connection was lost (cause), with
// backoff, and subscribes again unless the broker kept the session. It
// returns a nil client when it gives up: with a nil error when stop or the
// command's context ended, timedOut when timeout fired, or the refusal that
// makes retrying pointless.
func (f *subFlags) reconnect(e *env, o mqttclient.Options, sp *packet.Subscribe, cause error,
	stop <-chan struct{}, timeout <-chan time.Time, timedOut error) (*mqttclient.Client, error) {
	fmt.Fprintf(e.stderr, "sextant: sub: %v; reconnecting\n", cause)
	delay := reconnectMin
	for {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-stop:
			t.Stop()
			return nil, nil
		case <-e.ctx.Done():
			t.Stop()
			return nil, nil
		case <-timeout:
			t.Stop()
			return nil, timedOut
		}
		delay = min(2*delay, reconnectMax)
		cl, err := f.dial(e.ctx, o)
		if err == nil && !cl.Server().SessionPresent {
			if _, err = cl.Subscribe(e.ctx, sp); err != nil {
				cl.Close()
				err = fmt.Errorf("subscribe: %w", err)
			}
		}
		if err == nil {
			fmt.Fprintf(e.stderr, "sextant: sub: reconnected (session present: %v)\n", cl.Server().SessionPresent)
			return cl, nil
		}
		if e.ctx.Err() != nil {
			return nil, nil
		}
		if !reconnectable(err) {
			return nil, err
		}
		fmt.Fprintf(e.stderr, "sextant: sub: %v; retrying in %v\n", err, delay)
	}
}

// reconnectable reports whether a lost connection or a failed reconnection
// is worth retrying: not when the broker refused this client for good, nor
// when it (or our own arguments) broke the protocol.
func reconnectable(err error) bool {
	var re *mqttclient.ReasonError
	if errors.As(err, &re) {
		switch re.Code {
		case packet.SessionTakenOver, packet.NotAuthorized, packet.Banned, packet.BadUserNameOrPassword,
			packet.ClientIdentifierNotValid, packet.UnsupportedProtocolVersion, packet.BadAuthenticationMethod,
			packet.AdministrativeAction, packet.ProtocolError, packet.MalformedPacket, packet.TopicFilterInvalid:
			return false
		}
		return true
	}
	return err != nil && !errors.Is(err, mqttclient.ErrProtocol) && !errors.Is(err, mqttclient.ErrBadURL) &&
		!errors.Is(err, mqttclient.ErrNotAllowed) && !errors.Is(err, mqttclient.ErrClosed)
}

// subscribePacket builds the SUBSCRIBE (nil when only unsubscribing).
func (f *subFlags) subscribePacket() (*packet.Subscribe, error) {
	switch {
	case len(f.Topics) == 0 && len(f.Unsub) == 0:
		return nil, usageError(errors.New("sub: no topic filter (-t)"))
	case f.Count < 0 || f.Wait < 0:
		return nil, usageError(errors.New("sub: negative -C or -W"))
	case f.RetainHandling < 0 || f.RetainHandling > 2:
		return nil, usageError(fmt.Errorf("sub: --retain-handling %d: want 0, 1 or 2", f.RetainHandling))
	case f.JSON && f.Verbose:
		return nil, usageError(errors.New("sub: --json already includes the topic; drop -v"))
	}
	if err := checkQoS("-q", f.QoS); err != nil {
		return nil, err
	}
	if len(f.Topics) == 0 {
		return nil, nil
	}
	u, err := parseUserProps(f.UserProps)
	if err != nil {
		return nil, err
	}
	sp := &packet.Subscribe{}
	sp.Props.User = u
	for _, t := range f.Topics {
		sp.Subs = append(sp.Subs, packet.Subscription{Filter: t, QoS: byte(f.QoS),
			NoLocal: f.NoLocal, RetainAsPublished: f.RetainAsPub, RetainHandling: byte(f.RetainHandling)})
	}
	return sp, nil
}

func (p *subPrinter) handle(m *packet.Publish) {
	f := p.f
	if p.err != nil || (f.Count > 0 && p.n >= f.Count) || (f.NoRetained && m.Retain) {
		return
	}
	payload := m.Payload
	var lat time.Duration
	stamped := false
	if f.Latency {
		var sent time.Time
		if sent, payload, stamped = bench.ParseStamp(m.Payload); stamped {
			lat = time.Since(sent)
			bench.RecordLatency(p.hist, lat)
			p.stamped++
		}
	}
	if f.JSON {
		p.err = p.writeJSON(m, payload, lat, stamped)
	} else {
		if stamped {
			fmt.Fprintf(p.out, "%.3f ms ", float64(lat)/float64(time.Millisecond))
		}
		if f.Verbose {
			p.out.WriteString(m.Topic)
			p.out.WriteByte(' ')
		}
		p.out.Write(payload)
		if !f.NoEOL {
			p.out.WriteByte('\n')
		}
		p.err = p.out.Flush()
	}
	p.n++
	if f.Count > 0 && p.n == f.Count {
		close(p.done)
	}
}

type jsonMessage struct {
	Topic      string          `json:"topic"`
	QoS        byte            `json:"qos"`
	Retain     bool            `json:"retain"`
	Payload    *string         `json:"payload,omitempty"`
	PayloadB64 string          `json:"payload_base64,omitempty"`
	Properties *jsonProps      `json:"properties,omitempty"`
	SxIndex    json.RawMessage `json:"sx-index,omitempty"`
	LatencyMS  *float64        `json:"latency_ms,omitempty"`
}

type jsonProps struct {
	PayloadFormat   *byte       `json:"payload_format,omitempty"`
	MessageExpiry   *uint32     `json:"message_expiry,omitempty"`
	ContentType     string      `json:"content_type,omitempty"`
	ResponseTopic   string      `json:"response_topic,omitempty"`
	CorrelationData string      `json:"correlation_data_base64,omitempty"`
	SubscriptionIDs []uint32    `json:"subscription_ids,omitempty"`
	User            [][2]string `json:"user_properties,omitempty"`
}

func (p *subPrinter) writeJSON(m *packet.Publish, payload []byte, lat time.Duration, stamped bool) error {
	j := jsonMessage{Topic: m.Topic, QoS: m.QoS, Retain: m.Retain}
	if utf8.Valid(payload) {
		s := string(payload)
		j.Payload = &s
	} else {
		j.PayloadB64 = base64.StdEncoding.EncodeToString(payload)
	}
	if stamped {
		v := float64(lat) / float64(time.Millisecond)
		j.LatencyMS = &v
	}
	pr := &m.Props
	var jp jsonProps
	if pr.Has(packet.PropPayloadFormat) {
		v := pr.PayloadFormat
		jp.PayloadFormat = &v
	}
	if pr.Has(packet.PropMessageExpiry) {
		v := pr.MessageExpiry
		jp.MessageExpiry = &v
	}
	jp.ContentType, jp.ResponseTopic = pr.ContentType, pr.ResponseTopic
	if len(pr.CorrelationData) > 0 {
		jp.CorrelationData = base64.StdEncoding.EncodeToString(pr.CorrelationData)
	}
	jp.SubscriptionIDs = pr.SubscriptionIDs
	for _, u := range pr.User {
		jp.User = append(jp.User, [2]string{u.Key, u.Value})
		if u.Key == "sx-index" && j.SxIndex == nil {
			if _, err := strconv.ParseUint(u.Value, 10, 64); err == nil {
				j.SxIndex = json.RawMessage(u.Value)
			} else {
				j.SxIndex, _ = json.Marshal(u.Value)
			}
		}
	}
	if jp.PayloadFormat != nil || jp.MessageExpiry != nil || jp.ContentType != "" || jp.ResponseTopic != "" ||
		jp.CorrelationData != "" || len(jp.SubscriptionIDs) > 0 || len(jp.User) > 0 {
		j.Properties = &jp
	}
	b, err := json.Marshal(&j)
	if err != nil {
		return err
	}
	p.out.Write(b)
	p.out.WriteByte('\n')
	return p.out.Flush()
}

// summary prints the latency percentiles of the stamped messages.
func (p *subPrinter) summary() {
	l := bench.Summarize(p.hist)
	if p.f.JSON {
		b, _ := json.Marshal(map[string]any{"summary": map[string]any{
			"messages": p.n, "stamped": p.stamped, "latency": l,
		}})
		p.out.Write(b)
		p.out.WriteByte('\n')
		return
	}
	fmt.Fprintf(p.out, "%d messages, %d stamped; latency ms: %s\n", p.n, p.stamped, bench.LatencyLine(l))
}
