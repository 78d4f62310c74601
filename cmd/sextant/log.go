package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

// LogCmd reads sequenced topics' logs through the admin API
// (GET /v1/topics/{topic}/messages).
type LogCmd struct {
	Get    LogGetCmd    `cmd:"" help:"Print records of a sequenced topic by index (from the first held by default)."`
	Latest LogLatestCmd `cmd:"" help:"Print a sequenced topic's bounds, home and replicas, and its latest record."`
	Tail   LogTailCmd   `cmd:"" help:"Print a sequenced topic's records, then follow new ones until interrupted (polls the admin API)."`
}

// LogFlags are common to the log commands.
type LogFlags struct {
	AdminFlags
	Format string `name:"format" enum:"text,json" default:"text" help:"text: one line per record (index, time, QoS, payload, user properties); json: one JSON object per line (jq-friendly)."`
}

// readHelp describes --read.
const readHelp = "linearizable: at the group's leader after a Raft barrier (sees every acknowledged record; fails while the group has no majority); home: the home's replica without a barrier (answers during an outage, may lag); local: the answering node's replica when it has one."

// logFrom checks a --from value: an index (1 and up), earliest or latest.
func logFrom(s string) error {
	if s == "earliest" || s == "latest" {
		return nil
	}
	if n, err := strconv.ParseUint(s, 10, 64); err != nil || n == 0 {
		return fmt.Errorf("--from %q: want an index (1 and up), earliest or latest", s)
	}
	return nil
}

// LogGetCmd prints records of a topic.
type LogGetCmd struct {
	LogFlags
	Topic string `arg:"" name:"topic" help:"The topic (a name, not a filter)."`
	From  string `name:"from" default:"earliest" help:"First index to print: a number, earliest or latest." placeholder:"N|earliest|latest"`
	Limit int    `name:"limit" short:"n" default:"100" help:"At most this many records (read in pages of up to 1000)."`
	Read  string `name:"read" enum:"linearizable,home,local" default:"linearizable" help:"${read_help}"`
}

func (c *LogGetCmd) Run(e *env) error {
	if err := logFrom(c.From); err != nil {
		return err
	}
	if c.Limit < 1 {
		return fmt.Errorf("--limit %d: want 1 or more", c.Limit)
	}
	ctx, cancel := context.WithTimeout(e.ctx, inspectTimeout+time.Duration(c.Limit/adminapi.MaxLogLimit)*inspectTimeout)
	defer cancel()
	cl, err := c.client()
	if err != nil {
		return err
	}
	p := newLogPrinter(e.stdout, c.Format)
	from, left := c.From, c.Limit
	var page adminapi.LogPage
	for left > 0 {
		page, err = cl.LogMessages(ctx, c.Topic, client.LogQuery{From: from, Limit: min(left, adminapi.MaxLogLimit), Read: c.Read})
		if err != nil {
			return logError(c.Topic, err)
		}
		if err := p.records(page.Messages); err != nil {
			return err
		}
		left -= len(page.Messages)
		if len(page.Messages) == 0 || page.Next > page.Latest {
			break
		}
		from = strconv.FormatUint(page.Next, 10)
	}
	if p.n == 0 && c.Format == "text" {
		fmt.Fprintf(e.stdout, "no records from %s; %s holds %s\n", c.From, c.Topic, bounds(page.TopicLog))
	}
	if page.Next <= page.Latest && c.Format == "text" {
		fmt.Fprintf(e.stderr, "(more from index %d to %d: --from %d)\n", page.Next, page.Latest, page.Next)
	}
	return nil
}

// LogLatestCmd prints a topic's bounds and latest record.
type LogLatestCmd struct {
	LogFlags
	Topic string `arg:"" name:"topic" help:"The topic (a name, not a filter)."`
	Read  string `name:"read" enum:"linearizable,home,local" default:"linearizable" help:"${read_help}"`
}

func (c *LogLatestCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		page, err := cl.LogMessages(ctx, c.Topic, client.LogQuery{From: "latest", Limit: 1, Read: c.Read})
		if err != nil {
			return logError(c.Topic, err)
		}
		if c.Format == "json" {
			return printJSONOr(e, page, nil)
		}
		tl := page.TopicLog
		fmt.Fprintf(e.stdout, "%s: %s, group %s, home %s (epoch %d), replicas %s, retention %s\n",
			tl.Topic, bounds(tl), tl.Group, tl.Home, tl.Epoch, strings.Join(tl.Replicas, ","), retention(tl.Retention.Messages, time.Duration(tl.Retention.Duration)))
		return newLogPrinter(e.stdout, "text").records(page.Messages)
	})
}

// LogTailCmd prints records and follows new ones.
//
// It polls GET /v1/topics/{topic}/messages from the index after the last
// record it printed, rather than subscribing over MQTT with sx-from: it
// needs only the admin API and its token (no MQTT listener, credentials or
// ACL entry for the topic), each poll names the index it wants so a
// restart or a failover of the group's home cannot make it skip or repeat a
// record, and a read that retention overtook is reported as such. The cost
// is latency: a new record shows after up to maxTailWait when the topic is
// idle (the wait doubles from minTailWait while nothing comes, and resets
// when something does).
type LogTailCmd struct {
	LogFlags
	Topic string `arg:"" name:"topic" help:"The topic (a name, not a filter)."`
	From  string `name:"from" default:"latest" help:"First index to print: a number, earliest or latest." placeholder:"N|earliest|latest"`
	// Tail asks by index, so a replica that lags only delays a record,
	// never skips one: it reads the home without a barrier by default.
	Read string `name:"read" enum:"linearizable,home,local" default:"home" help:"${read_help}"`
}

// Tail's polling back-off.
var (
	minTailWait = 100 * time.Millisecond
	maxTailWait = 2 * time.Second
)

func (c *LogTailCmd) Run(e *env) error {
	if err := logFrom(c.From); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	p := newLogPrinter(e.stdout, c.Format)
	from, wait := c.From, minTailWait
	var failing error
	for {
		ctx, cancel := context.WithTimeout(e.ctx, inspectTimeout)
		page, err := cl.LogMessages(ctx, c.Topic, client.LogQuery{From: from, Limit: adminapi.MaxLogLimit, Read: c.Read})
		cancel()
		switch {
		case e.ctx.Err() != nil:
			return nil // interrupted
		case err == nil:
			if failing != nil {
				fmt.Fprintf(e.stderr, "sextant: reading %s again\n", c.Topic)
				failing = nil
			}
			if err := p.records(page.Messages); err != nil {
				return err
			}
			from = strconv.FormatUint(page.Next, 10)
			if len(page.Messages) > 0 {
				wait = minTailWait
				if page.Next <= page.Latest {
					continue // more already there
				}
			}
		case compacted(err) > 0:
			first := compacted(err)
			fmt.Fprintf(e.stderr, "sextant: %s: records from %s to %d were removed by retention before they were read\n", c.Topic, from, first-1)
			from = strconv.FormatUint(first, 10)
			continue
		case permanent(err):
			return logError(c.Topic, err)
		default:
			if failing == nil {
				fmt.Fprintf(e.stderr, "sextant: %v (retrying)\n", logError(c.Topic, err))
			}
			failing = err
		}
		select {
		case <-e.ctx.Done():
			return nil
		case <-time.After(wait):
		}
		wait = min(2*wait, maxTailWait)
	}
}

// compacted returns the first index held when err is the API's 410, else 0.
func compacted(err error) uint64 {
	var ae *client.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusGone {
		return 0
	}
	// The message ends with "the first index held is N".
	i := strings.LastIndexByte(ae.Msg, ' ')
	n, _ := strconv.ParseUint(ae.Msg[i+1:], 10, 64)
	return n
}

// permanent reports whether err will not go away by asking again: a bad
// request, a direct topic, no access. An unknown topic is not: tail waits
// for its first record.
func permanent(err error) bool {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return false
	}
	switch ae.Status {
	case http.StatusBadRequest, http.StatusConflict, http.StatusUnauthorized, http.StatusForbidden:
		return true
	}
	return false
}

// logError words the API's errors for the log commands.
func logError(topic string, err error) error {
	var ae *client.APIError
	if !errors.As(err, &ae) {
		return err
	}
	switch ae.Code {
	case "not_sequenced":
		return fmt.Errorf("%s is not a sequenced topic: its policy rule's mode is direct, so it keeps no history (sextant policy get shows the rules)", topic)
	case "unknown_topic":
		return fmt.Errorf("%s: no message was ever published to this sequenced topic", topic)
	case "compacted":
		return fmt.Errorf("%s: %s (--from earliest starts there)", topic, strings.TrimPrefix(ae.Msg, topic+": "))
	case "unavailable", "timeout":
		return fmt.Errorf("%s; try again once a replica of its group is back (sextant groups lists them)", ae.Msg)
	}
	return err
}

func bounds(tl adminapi.TopicLog) string {
	if tl.Count == 0 {
		return fmt.Sprintf("no record held (latest index %d)", tl.Latest)
	}
	return fmt.Sprintf("indexes %d..%d (%d held)", tl.First, tl.Latest, tl.Count)
}

func retention(msgs int64, age time.Duration) string {
	var parts []string
	if msgs > 0 {
		parts = append(parts, fmt.Sprintf("%d messages", msgs))
	}
	if age > 0 {
		parts = append(parts, age.String())
	}
	if len(parts) == 0 {
		return "unbounded"
	}
	return strings.Join(parts, ", ")
}

// logPrinter prints records as text lines or JSON lines.
type logPrinter struct {
	w    io.Writer
	json *json.Encoder // nil: text
	n    int
}

func newLogPrinter(w io.Writer, format string) *logPrinter {
	p := &logPrinter{w: w}
	if format == "json" {
		p.json = json.NewEncoder(w)
	}
	return p
}

func (p *logPrinter) records(recs []adminapi.LogRecord) error {
	tw := tabwriter.NewWriter(p.w, 0, 0, 2, ' ', 0)
	for _, r := range recs {
		p.n++
		if p.json != nil {
			if err := p.json.Encode(r); err != nil {
				return err
			}
			continue
		}
		payload := strconv.Quote(r.Payload)
		if r.PayloadBase64 != "" {
			payload = "base64:" + r.PayloadBase64
		}
		flags := fmt.Sprintf("qos%d", r.QoS)
		if r.Retain {
			flags += ",retain"
		}
		var props []string
		for _, u := range r.UserProperties {
			props = append(props, u.Key+"="+strconv.Quote(u.Value))
		}
		line := fmt.Sprintf("%d\t%s\t%s\t%s", r.Index, r.Time.UTC().Format("2006-01-02T15:04:05.000Z"), flags, payload)
		if len(props) > 0 {
			line += "\t" + strings.Join(props, " ")
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
