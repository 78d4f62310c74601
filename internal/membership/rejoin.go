package membership

import "context"

// Join joins the cluster through addrs after Start, retrying with backoff
// until one of them answers or ctx ends. A node restarted without a join
// list uses it to find the members it knew (see internal/node), in the
// background, so that it serves its clients meanwhile.
func (m *Membership) Join(ctx context.Context, addrs []string) error { return m.join(ctx, addrs) }
