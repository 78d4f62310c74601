package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
	"github.com/sextantmq/sextant/internal/topic"
)

// printPlacement lists the placement groups of sequenced topics whose
// topics (or id) match filter: each group's home, E(t), Lth and last move,
// from GET /v1/placement. A node that cannot answer gets a note, not an
// error: the topics above were listed.
func printPlacement(ctx context.Context, w io.Writer, cl *client.Client, filter string) error {
	p, err := cl.Placement(ctx)
	if err != nil {
		_, werr := fmt.Fprintf(w, "\nsequenced topics: placement unavailable: %v\n", err)
		return werr
	}
	var gs []adminapi.PlacementGroup
	for _, g := range p.Groups {
		if filter == "" || filter == "#" || topic.Match(filter, g.Group) || slices.ContainsFunc(g.Topics, func(t string) bool { return topic.Match(filter, t) }) {
			gs = append(gs, g)
		}
	}
	if len(gs) == 0 {
		return nil
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQUENCED GROUP\tTOPICS\tHOME\tE(t)\tLTH\tLAST MOVE\tPENDING")
	for _, g := range gs {
		et, lth := "-", "-"
		if g.Monitored {
			et = fmtMs(g.EtMs)
			if g.Violated {
				et += " (violated)"
			}
		}
		if g.LthMs > 0 {
			lth = fmtMs(g.LthMs)
		}
		last, pending := "-", "-"
		if m := g.LastMove; m != nil {
			last = m.Reason + " " + m.At.UTC().Format(time.DateTime)
		}
		if d := g.Pending; d != nil {
			pending = "to " + d.Home + " (" + d.Reason + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", g.Group, dash(strings.Join(g.Topics, ",")), g.Home, et, lth, last, pending)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if p.LeaderErr != "" {
		fmt.Fprintf(w, "(E(t) unknown: %s)\n", p.LeaderErr)
	}
	return nil
}

func fmtMs(v float64) string { return fmt.Sprintf("%.1fms", v) }
