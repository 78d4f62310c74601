package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

// HealthCmd checks a node's readiness through its admin API: exit status 0
// when /readyz answers 200, 1 otherwise. It is the container image's health
// check (the image has no shell and no curl).
type HealthCmd struct {
	AdminFlags
	Timeout time.Duration `name:"timeout" default:"5s" help:"How long to wait for the answer."`
	Quiet   bool          `name:"quiet" short:"q" help:"Print nothing; the exit status says it all."`
}

func (c *HealthCmd) Run(e *env) error {
	ctx, cancel := context.WithTimeout(e.ctx, c.Timeout)
	defer cancel()
	cl, err := c.client()
	if err != nil {
		return err
	}
	if err := cl.Ready(ctx); err != nil {
		if c.Quiet {
			return &exitError{code: 1, err: fmt.Errorf("not ready: %w", err)}
		}
		return fmt.Errorf("not ready: %w", err)
	}
	if !c.Quiet {
		fmt.Fprintln(e.stdout, "ready")
	}
	return nil
}

// NodeCmd groups the commands that act on one node.
type NodeCmd struct {
	Drain  NodeDrainCmd  `cmd:"" help:"Drain a node before restarting, upgrading or removing it: its clients move to other nodes with their sessions, then it stops."`
	Remove NodeRemoveCmd `cmd:"" help:"Remove a node that is gone for good (the same as nodes remove)."`
}

// NodeRemoveCmd asks a node (--admin) to remove another one from the
// cluster.
type NodeRemoveCmd struct {
	AdminFlags
	ID    string `arg:"" name:"node-id" help:"Id of the node to remove."`
	Force bool   `name:"force" help:"Remove it even though gossip still sees it alive (prefer sextant node drain --leave on it)."`
}

func (c *NodeRemoveCmd) Run(e *env) error {
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cl, err := c.client(client.WithTimeout(time.Minute))
	if err != nil {
		return err
	}
	if err := cl.RemoveNode(ctx, c.ID, c.Force); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "node %s removed from the cluster\n", c.ID)
	return nil
}

// NodeDrainCmd asks a node, through its admin API, to drain and stop.
type NodeDrainCmd struct {
	AdminFlags
	Leave   bool          `name:"leave" help:"Remove the node from the cluster for good (clients are told the server moved; it leaves the metadata group). Without it the node is expected back."`
	Timeout time.Duration `name:"timeout" default:"0s" help:"How long the node waits for persistent sessions to move (0: its drain-timeout setting)."`
	JSON    bool          `name:"json" help:"Print the API's JSON report."`
}

func (c *NodeDrainCmd) Run(e *env) error {
	// The node waits for sessions to move (up to its drain-timeout or
	// --timeout) and for the metadata group: allow for both.
	wait := 2*time.Minute + c.Timeout
	ctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	cl, err := c.client(client.WithTimeout(wait))
	if err != nil {
		return err
	}
	req := adminapi.DrainRequest{Leave: c.Leave}
	if c.Timeout > 0 {
		req.Timeout = c.Timeout.String()
	}
	rep, err := cl.Drain(ctx, req)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	fmt.Fprintf(e.stdout, "node %s drained in %.1f s: %d connections closed (%s), %d of %d persistent sessions taken over by %d other nodes",
		rep.NodeID, rep.Seconds, rep.Disconnected, rep.Reason, rep.Moved, rep.Persistent, rep.OtherNodes)
	if rep.LeadershipMoved {
		fmt.Fprint(e.stdout, "; metadata leadership handed over")
	}
	if rep.LeftGroup {
		fmt.Fprint(e.stdout, "; left the metadata group")
	}
	fmt.Fprintln(e.stdout, "; the node is stopping")
	for _, w := range rep.Warnings {
		fmt.Fprintf(e.stdout, "warning: %s\n", w)
	}
	return nil
}
