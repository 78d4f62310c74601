package node

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
)

// methodMigrations asks a node for the migrations it ran (running and
// recent), so that GET /v1/migrations on any node lists the cluster's.
// The answer is JSON: an operator's request, rare and small.
const methodMigrations byte = 46

// maxMigrationsBody bounds an answer (a node keeps its running
// migrations and the last 256).
const maxMigrationsBody = 16 << 20

// migrationsTimeout bounds the wait for the other nodes' lists: a node
// that has not answered by then is reported, not waited for.
const migrationsTimeout = 2 * time.Second

// localMigrations lists this node's running and recent migrations.
func (n *Node) localMigrations() []adminapi.MigrationInfo {
	cp := n.cluster
	if cp == nil || cp.migrations == nil {
		return nil
	}
	var out []adminapi.MigrationInfo
	for _, x := range cp.migrations.Migrations() {
		out = append(out, adminapi.MigrationInfo{Node: n.cfg.NodeID, Group: x.Group, From: x.From, To: x.To,
			Reason: string(x.Reason), Kind: string(x.Kind), Decision: x.Decision, State: string(x.State),
			Step: string(x.Step), Started: x.Started, TotalSeconds: x.Total.Seconds(), PauseSeconds: x.Pause.Seconds(),
			Error: x.Error})
	}
	return out
}

// serveMigrations answers methodMigrations with this node's list.
func (n *Node) serveMigrations(context.Context, string, []byte) ([]byte, error) {
	list := n.localMigrations()
	if list == nil {
		list = []adminapi.MigrationInfo{}
	}
	return json.Marshal(list)
}

// decodeMigrations reads node's answer; each entry must name node.
func decodeMigrations(b []byte, node string) ([]adminapi.MigrationInfo, error) {
	if len(b) > maxMigrationsBody {
		return nil, fmt.Errorf("node: migrations answer of %d bytes", len(b))
	}
	var list []adminapi.MigrationInfo
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, fmt.Errorf("node: migrations answer: %w", err)
	}
	for _, m := range list {
		if m.Node != node {
			return nil, fmt.Errorf("node: migrations answer of %s lists one of %q", node, m.Node)
		}
	}
	return list, nil
}

// Migrations implements adminapi.Migrator: this node's list and, in
// parallel, every other registered node's (or only node's), each asked on
// its peer link within migrationsTimeout. A node with no link or no
// answer in time is listed as unanswered.
func (m migrator) Migrations(ctx context.Context, node string) (adminapi.MigrationList, error) {
	n := m.n
	self := n.cfg.NodeID
	ids := []string{self}
	if cp := n.cluster; cp != nil && cp.meta != nil {
		st := cp.meta.State()
		if node != "" {
			if _, ok := st.Node(node); !ok && node != self {
				return adminapi.MigrationList{}, fmt.Errorf("%w: %q is not registered", adminapi.ErrUnknownNode, node)
			}
			ids = []string{node}
		} else {
			for _, r := range st.Nodes() {
				if r.ID != self {
					ids = append(ids, r.ID)
				}
			}
		}
	} else if node != "" && node != self {
		return adminapi.MigrationList{}, fmt.Errorf("%w: %q (this node runs alone)", adminapi.ErrUnknownNode, node)
	}
	ctx, cancel := context.WithTimeout(ctx, migrationsTimeout)
	defer cancel()
	var (
		out adminapi.MigrationList
		mu  sync.Mutex
		wg  sync.WaitGroup
	)
	for _, id := range ids {
		if id == self {
			out.Migrations = append(out.Migrations, n.localMigrations()...)
			out.Nodes = append(out.Nodes, self)
			continue
		}
		wg.Go(func() {
			list, err := n.askMigrations(ctx, id)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out.Unanswered = append(out.Unanswered, adminapi.NodeError{Node: id, Error: err.Error()})
				return
			}
			out.Migrations = append(out.Migrations, list...)
			out.Nodes = append(out.Nodes, id)
		})
	}
	wg.Wait()
	slices.Sort(out.Nodes)
	slices.SortFunc(out.Unanswered, func(a, b adminapi.NodeError) int { return cmp.Compare(a.Node, b.Node) })
	adminapi.SortMigrations(out.Migrations)
	return out, nil
}

// askMigrations asks node for its migrations on its peer link.
func (n *Node) askMigrations(ctx context.Context, node string) ([]adminapi.MigrationInfo, error) {
	cp := n.cluster
	if cp == nil || cp.layer == nil {
		return nil, fmt.Errorf("node: no link to %s (this node runs alone)", node)
	}
	ans, err := cp.layer.Peers().Call(ctx, node, methodMigrations, nil)
	if err != nil {
		return nil, err
	}
	return decodeMigrations(ans, node)
}
