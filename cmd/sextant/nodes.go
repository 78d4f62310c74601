package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/adminapi/client"
)

// AdminFlags locate a node's admin API.
type AdminFlags struct {
	Admin string `name:"admin" short:"a" default:"127.0.0.1:8088" help:"Admin API address of a node (HOST:PORT or URL)." placeholder:"ADDR"`
	Token string `name:"token" env:"SEXTANT_TOKEN" help:"Admin API bearer token." placeholder:"TOKEN"`
	CA    string `name:"cafile" aliases:"ca" env:"SEXTANT_CAFILE,SEXTANT_CA" type:"path" help:"PEM CA certificate that verifies a node's admin API served over TLS (admin-tls); implies https (--ca is the same flag)." placeholder:"FILE"`
}

func (a AdminFlags) client(opts ...client.Option) (*client.Client, error) {
	if a.CA == "" {
		return client.New(a.Admin, a.Token, opts...), nil
	}
	pem, err := os.ReadFile(a.CA)
	if err != nil {
		return nil, fmt.Errorf("--cafile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("--cafile %s: no PEM certificate in it", a.CA)
	}
	opts = append(opts, client.WithTLS(&tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}))
	return client.New(a.Admin, a.Token, opts...), nil
}

// call runs fn with a client of the admin API, within d (and the
// command's context).
func (a AdminFlags) call(e *env, d time.Duration, fn func(ctx context.Context, cl *client.Client) error) error {
	ctx, cancel := context.WithTimeout(e.ctx, d)
	defer cancel()
	cl, err := a.client()
	if err != nil {
		return err
	}
	return fn(ctx, cl)
}

// NodesCmd lists the cluster's nodes (its default) and removes a node that
// is gone.
type NodesCmd struct {
	List   NodesListCmd  `cmd:"" default:"withargs" help:"Show the cluster's nodes, their coordinates and estimated RTTs (the default)."`
	Remove NodeRemoveCmd `cmd:"" help:"Remove a node that is gone for good (it cannot drain itself) from the metadata group, the registry and gossip."`
}

// NodesListCmd prints the cluster's nodes and their estimated RTT matrix.
type NodesListCmd struct {
	AdminFlags
	JSON bool `name:"json" help:"Print the API's JSON instead of tables."`
}

func (c *NodesListCmd) Run(e *env) error {
	ctx, cancel := context.WithTimeout(e.ctx, 15*time.Second)
	defer cancel()
	cl, err := c.client()
	if err != nil {
		return err
	}
	nodes, err := cl.Nodes(ctx)
	if err != nil {
		return err
	}
	if c.JSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(nodes)
	}
	printNodes(e.stdout, nodes)
	return nil
}

func printNodes(w io.Writer, nodes []adminapi.NodeInfo) {
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].ID < nodes[j].ID })
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tSTATE\tTIER\tSITE\tZONE\tMQTT\tADMIN\tCOORD ERROR")
	for _, n := range nodes {
		cerr := "-"
		if n.Coordinate != nil {
			cerr = fmt.Sprintf("%.2f", n.Coordinate.Error)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.ID, n.State, n.Tier, dash(n.Site), dash(n.Zone), dash(n.MQTTAddr), dash(n.AdminAddr), cerr)
	}
	tw.Flush()
	if len(nodes) < 2 {
		return
	}
	fmt.Fprintln(w, "\nEstimated RTT (ms, from network coordinates):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{""}
	for _, n := range nodes {
		header = append(header, n.ID)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, a := range nodes {
		row := []string{a.ID}
		for _, b := range nodes {
			switch v, ok := a.RTTms[b.ID]; {
			case a.ID == b.ID:
				row = append(row, "-")
			case ok:
				row = append(row, fmt.Sprintf("%.1f", v))
			default:
				row = append(row, "?")
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
	}
	tw.Flush()
	for _, a := range nodes {
		if len(a.MeasuredMs) == 0 {
			continue
		}
		ids := make([]string, 0, len(a.MeasuredMs))
		for id := range a.MeasuredMs {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		parts := make([]string, 0, len(ids))
		for _, id := range ids {
			parts = append(parts, fmt.Sprintf("%s %.1f", id, a.MeasuredMs[id]))
		}
		fmt.Fprintf(w, "\nMeasured RTT from %s over its peer links (ms): %s\n", a.ID, strings.Join(parts, ", "))
	}
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
