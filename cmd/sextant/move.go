package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

// TopicsMoveCmd moves a sequenced topic's placement group to a node: an
// operator's decision (reason manual), recorded through the metadata
// leader and carried out by the group's home; the command returns once
// the move is done.
type TopicsMoveCmd struct {
	AdminFlags
	Topic   string        `arg:"" help:"A sequenced topic (or a placement group's id)." placeholder:"TOPIC"`
	To      string        `name:"to" required:"" help:"The node id to move the topic's group to." placeholder:"NODE"`
	Timeout time.Duration `name:"timeout" default:"60s" help:"How long to wait for the move to be done (the decision stays recorded if the wait ends first)."`
	JSON    bool          `name:"json" help:"Print the API's JSON answer."`
}

func (c *TopicsMoveCmd) Run(e *env) error {
	if c.Timeout <= 0 || c.Timeout > time.Hour {
		return fmt.Errorf("--timeout %v: want more than 0 and at most 1h", c.Timeout)
	}
	ctx, cancel := context.WithTimeout(e.ctx, c.Timeout+10*time.Second)
	defer cancel()
	cl, err := c.client(client.WithTimeout(c.Timeout + 5*time.Second))
	if err != nil {
		return err
	}
	res, err := cl.Move(ctx, adminapi.MoveRequest{Topic: c.Topic, To: c.To, Timeout: c.Timeout.String()})
	var api *client.APIError
	if errors.As(err, &api) {
		switch api.Code {
		case "not_found":
			return fmt.Errorf("cannot move %s: %s", c.Topic, api.Msg)
		case "conflict":
			return fmt.Errorf("cannot move %s now: %s", c.Topic, api.Msg)
		case "timeout":
			return fmt.Errorf("the move of %s to %s is recorded but not done yet: %s", c.Topic, c.To, api.Msg)
		}
	}
	if err != nil || c.JSON {
		return printJSONOr(e, res, err)
	}
	if res.From == res.Home {
		fmt.Fprintf(e.stdout, "%s (group %s) is already homed on %s (voters %v)\n", c.Topic, res.Group, res.Home, res.Voters)
		return nil
	}
	fmt.Fprintf(e.stdout, "moved %s (group %s) from %s to %s in %.0f ms (voters %v, epoch %d)\n",
		c.Topic, res.Group, res.From, res.Home, res.Seconds*1000, res.Voters, res.Epoch)
	return nil
}
