package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/sextantmq/sextant/internal/adminapi/client"
)

// GroupsCmd lists the placement groups of sequenced topics
// (GET /v1/groups).
type GroupsCmd struct {
	AdminFlags
	JSON bool `name:"json" help:"Print the API's JSON instead of a table."`
}

func (c *GroupsCmd) Run(e *env) error {
	return c.call(e, inspectTimeout, func(ctx context.Context, cl *client.Client) error {
		gs, err := cl.Groups(ctx)
		if err != nil || c.JSON {
			return printJSONOr(e, gs, err)
		}
		tw := tabwriter.NewWriter(e.stdout, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "GROUP\tHOME\tREPLICAS\tEPOCH\tLEADER\tTERM\tCOMMIT\tLATEST SEQ\tRECORDS\tBYTES\tTOPICS")
		var missing []string
		for _, g := range gs {
			row := []string{g.ID, g.Home, strings.Join(g.Replicas, ","), strconv.FormatUint(g.Epoch, 10)}
			if s := g.Stats; s != nil {
				leader := s.Leader
				if leader == "" {
					leader = "none"
				}
				row = append(row, leader, strconv.FormatUint(s.Term, 10), strconv.FormatUint(s.CommitIndex, 10),
					strconv.FormatUint(s.LatestSeq, 10), strconv.FormatUint(s.Records, 10), strconv.FormatInt(s.Bytes, 10), strconv.Itoa(s.Topics))
			} else {
				row = append(row, "?", "?", "?", "?", "?", "?", "?")
				missing = append(missing, g.ID+": "+g.StatsError)
			}
			fmt.Fprintln(tw, strings.Join(row, "\t"))
		}
		if err := flushEmpty(tw, e.stdout, len(gs), "no placement groups (sequenced topics get one at their first publish)"); err != nil {
			return err
		}
		for _, m := range missing {
			fmt.Fprintf(e.stderr, "no figures for %s\n", m)
		}
		return nil
	})
}
