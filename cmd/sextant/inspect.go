package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

// inspectTimeout bounds one listing command.
const inspectTimeout = 15 * time.Second

// ClientsCmd lists a node's clients (its default), shows one, or
// disconnects one.
type ClientsCmd struct {
	List ClientsListCmd `cmd:"" default:"withargs" help:"List the connected clients, or with --sessions every session the node holds (the default)."`
	Show ClientsShowCmd `cmd:"" help:"Show one client's session, connection and subscriptions."`
	Kick ClientsKickCmd `cmd:"" help:"Disconnect a client (MQTT 5: DISCONNECT 0x98 administrative action); with --discard-session its session ends too."`
}

// ClientsListCmd lists clients or sessions.
type ClientsListCmd struct {
	AdminFlags
	Sessions bool `name:"sessions" help:"List every session the node holds, offline persistent ones included, with their queues."`
	JSON     bool `name:"json" help:"Print the API's JSON instead of a table."`
}

func (c *ClientsListCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		if c.Sessions {
			ss, err := cl.Sessions(ctx)
			if err != nil || c.JSON {
				return printJSONOr(e, ss, err)
			}
			fmt.Fprintln(tw, "CLIENT\tONLINE\tPROTOCOL\tEXPIRY S\tSUBS\tQUEUED\tINFLIGHT\tSPILLED")
			for _, s := range ss {
				fmt.Fprintf(tw, "%s\t%v\t%s\t%d\t%d\t%d\t%d\t%d\n", s.ID, s.Online, s.Protocol, s.SessionExpiry, s.Subscriptions, s.Queued, s.Inflight, s.Spilled)
			}
			return flushEmpty(tw, e.stdout, len(ss), "no sessions")
		}
		cs, err := cl.Clients(ctx)
		if err != nil || c.JSON {
			return printJSONOr(e, cs, err)
		}
		fmt.Fprintln(tw, "CLIENT\tREMOTE\tPROTOCOL\tSUBS\tPERSISTENT\tRTT MS")
		for _, ci := range cs {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%v\t%s\n", ci.ID, ci.Remote, ci.Protocol, ci.Subscriptions, ci.Persistent, rtt(ci.RTTms))
		}
		return flushEmpty(tw, e.stdout, len(cs), "no clients connected")
	})
}

// ClientsShowCmd shows one client.
type ClientsShowCmd struct {
	AdminFlags
	ID   string `arg:"" name:"client-id" help:"The client identifier."`
	JSON bool   `name:"json" help:"Print the API's JSON."`
}

func (c *ClientsShowCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		d, err := cl.Client(ctx, c.ID)
		if err != nil || c.JSON {
			return printJSONOr(e, d, err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		row := func(k, v string) { fmt.Fprintf(tw, "%s\t%s\n", k, v) }
		row("client", d.ID)
		if d.Online {
			row("connected from", d.Remote)
			row("user", dash(d.User))
			row("rtt ms", rtt(d.RTTms))
		} else {
			row("connected", "no (the session waits for its client)")
		}
		row("protocol", d.Protocol)
		row("session expiry", fmt.Sprintf("%d s", d.SessionExpiry))
		row("messages", fmt.Sprintf("%d queued, %d in flight, %d on disk", d.Queued, d.Inflight, d.Spilled))
		if err := tw.Flush(); err != nil {
			return err
		}
		fmt.Fprintln(e.stdout)
		printSubscriptions(e.stdout, d.Subscriptions, false)
		return nil
	})
}

// ClientsKickCmd disconnects a client.
type ClientsKickCmd struct {
	AdminFlags
	ID      string `arg:"" name:"client-id" help:"The client identifier."`
	Discard bool   `name:"discard-session" help:"End the client's session too (its subscriptions and queued messages), even if it is offline."`
}

func (c *ClientsKickCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		if _, err := cl.Kick(ctx, c.ID, c.Discard); err != nil {
			return err
		}
		if c.Discard {
			fmt.Fprintf(e.stdout, "client %s disconnected and its session ended\n", c.ID)
		} else {
			fmt.Fprintf(e.stdout, "client %s disconnected\n", c.ID)
		}
		return nil
	})
}

// TopicsCmd lists a node's topics (its default), retained messages and
// subscriptions.
type TopicsCmd struct {
	List          TopicsListCmd          `cmd:"" default:"withargs" help:"List the topics the node holds something for (retained messages), with their mode and who receives them, then the placement groups of sequenced topics with their home, E(t), Lth and last move (the default)."`
	Retained      TopicsRetainedCmd      `cmd:"" help:"List retained messages with their payloads."`
	Subscriptions TopicsSubscriptionsCmd `cmd:"" help:"List the node's subscriptions."`
	Move          TopicsMoveCmd          `cmd:"" help:"Move a sequenced topic's group to a node (no client reconnects); returns when the move is done."`
}

// TopicsListCmd lists topics.
type TopicsListCmd struct {
	AdminFlags
	Filter string `name:"filter" short:"t" default:"#" help:"Only topics this MQTT filter matches." placeholder:"FILTER"`
	Limit  int    `name:"limit" default:"1000" help:"At most this many topics."`
	JSON   bool   `name:"json" help:"Print the API's JSON instead of a table."`
}

func (c *TopicsListCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		ts, err := cl.Topics(ctx, c.Filter, c.Limit)
		if err != nil || c.JSON {
			return printJSONOr(e, ts, err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tMODE\tRETAINED\tLOCAL SUBS\tREMOTE NODES")
		for _, t := range ts {
			fmt.Fprintf(tw, "%s\t%s\t%v\t%d\t%s\n", t.Topic, t.Mode, t.Retained, t.Subscriptions, dash(strings.Join(t.RemoteNodes, ",")))
		}
		if err := flushEmpty(tw, e.stdout, len(ts), "no topics"); err != nil {
			return err
		}
		limitNote(e.stdout, len(ts), c.Limit)
		return printPlacement(ctx, e.stdout, cl, c.Filter)
	})
}

// TopicsRetainedCmd lists retained messages.
type TopicsRetainedCmd struct {
	AdminFlags
	Filter string `arg:"" optional:"" default:"#" help:"Only topics this MQTT filter matches." placeholder:"FILTER"`
	Limit  int    `name:"limit" default:"100" help:"At most this many messages."`
	JSON   bool   `name:"json" help:"Print the API's JSON (full payloads) instead of a table."`
}

// payloadWidth is how much of a payload the table shows.
const payloadWidth = 60

func (c *TopicsRetainedCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		rs, err := cl.Retained(ctx, c.Filter, c.Limit)
		if err != nil || c.JSON {
			return printJSONOr(e, rs, err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "TOPIC\tQOS\tBYTES\tPAYLOAD")
		for _, r := range rs {
			p := strconv.Quote(r.Payload)
			if r.PayloadBase64 != "" {
				p = "base64:" + r.PayloadBase64
			}
			if len(p) > payloadWidth {
				p = p[:payloadWidth-3] + "..."
			}
			fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", r.Topic, r.QoS, r.Bytes, p)
		}
		if err := flushEmpty(tw, e.stdout, len(rs), "no retained messages"); err != nil {
			return err
		}
		limitNote(e.stdout, len(rs), c.Limit)
		return nil
	})
}

// TopicsSubscriptionsCmd lists subscriptions.
type TopicsSubscriptionsCmd struct {
	AdminFlags
	Client string `name:"client" short:"c" help:"Only this client's subscriptions." placeholder:"ID"`
	JSON   bool   `name:"json" help:"Print the API's JSON instead of a table."`
}

func (c *TopicsSubscriptionsCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		ss, err := cl.Subscriptions(ctx, c.Client)
		if err != nil || c.JSON {
			return printJSONOr(e, ss, err)
		}
		printSubscriptions(e.stdout, ss, true)
		return nil
	})
}

func printSubscriptions(w io.Writer, ss []adminapi.SubscriptionInfo, withClient bool) {
	if len(ss) == 0 {
		fmt.Fprintln(w, "no subscriptions")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if withClient {
		fmt.Fprint(tw, "CLIENT\t")
	}
	fmt.Fprintln(tw, "FILTER\tQOS\tOPTIONS")
	for _, s := range ss {
		var opts []string
		if s.NoLocal {
			opts = append(opts, "no-local")
		}
		if s.RetainAsPublished {
			opts = append(opts, "retain-as-published")
		}
		if s.RetainHandling != 0 {
			opts = append(opts, fmt.Sprintf("retain-handling=%d", s.RetainHandling))
		}
		if s.ID != 0 {
			opts = append(opts, fmt.Sprintf("id=%d", s.ID))
		}
		if withClient {
			fmt.Fprintf(tw, "%s\t", s.ClientID)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\n", s.Filter, s.QoS, dash(strings.Join(opts, ",")))
	}
	tw.Flush()
}

// printJSONOr prints v as indented JSON, unless err is set: then it
// returns err.
func printJSONOr(e *env, v any, err error) error {
	if err != nil {
		return err
	}
	enc := json.NewEncoder(e.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// flushEmpty flushes a table, or says so when it has no rows.
func flushEmpty(tw *tabwriter.Writer, w io.Writer, rows int, none string) error {
	if rows == 0 {
		_, err := fmt.Fprintln(w, none)
		return err
	}
	return tw.Flush()
}

func limitNote(w io.Writer, n, limit int) {
	if limit > 0 && n == limit {
		fmt.Fprintf(w, "(the first %d; --limit shows more)\n", limit)
	}
}

func rtt(ms float64) string {
	if ms <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", ms)
}
