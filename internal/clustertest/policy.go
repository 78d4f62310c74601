package clustertest

import (
	"context"

	"github.com/sextantmq/sextant/internal/meta/fsm"
)

// SetPolicy replaces the policy rules through the metadata group (as
// `sextant policy` does through the admin API) and waits until every
// running node's copy has them.
func (c *Cluster) SetPolicy(rules ...fsm.Rule) {
	c.T.Helper()
	var m interface {
		Propose(context.Context, fsm.Command) (fsm.Result, error)
	}
	for _, n := range c.running() {
		m = n.Node.Meta()
		break
	}
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	var res fsm.Result
	var err error
	c.Eventually("policy proposed", func() bool {
		res, err = m.Propose(ctx, fsm.PutPolicies(rules))
		return err == nil
	})
	run := c.running()
	for _, n := range run {
		c.Eventually(n.ID+" has the policy and every node registered", func() bool {
			st := n.Node.Meta().State()
			return st.Applied() >= res.Index && len(st.Nodes()) >= len(run)
		})
	}
}
