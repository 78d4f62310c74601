package deploy_test

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/config"
)

// exportedMetrics returns the metric names a node can export: the
// sextant_* names defined in the code (a labelled family with no child yet
// is not gathered, so the source is the reference) and what a running
// node's registry gathers (the Go and process collectors).
func exportedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	names := map[string]bool{"up": true} // Prometheus's own, per scrape target
	metricName := regexp.MustCompile(`^sextant_[a-z0-9_]+$`)
	root := brokertest.ModuleRoot(t)
	err := filepath.WalkDir(filepath.Join(root, "internal"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if s, err := strconv.Unquote(lit.Value); err == nil && metricName.MatchString(s) {
					names[s] = true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	n := brokertest.Start(t, brokertest.Config(t))
	mfs, err := n.Metrics().Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	for _, must := range []string{"sextant_connections", "sextant_peer_link_up", "sextant_meta_leader_known", "sextant_build_info", "go_goroutines", "process_open_fds"} {
		if !names[must] {
			t.Fatalf("the metric scan missed %s: it finds nothing", must)
		}
	}
	return names
}

var exprMetric = regexp.MustCompile(`\b((?:sextant|process|go)_[a-z0-9_]+|up)\b`)

// unknownMetrics lists the metrics expr names that no node exports.
func unknownMetrics(expr string, known map[string]bool) []string {
	var out []string
	for _, m := range exprMetric.FindAllString(expr, -1) {
		base := m
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if b, ok := strings.CutSuffix(m, suffix); ok && known[b] {
				base = b
			}
		}
		if !known[base] {
			out = append(out, m)
		}
	}
	return out
}

// TestAlertRulesUseExportedMetrics parses deploy/prometheus-rules.yaml,
// checks every rule has what Alertmanager and the operator need, and that
// every metric it names exists.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	known := exportedMetrics(t)
	b, err := os.ReadFile("prometheus-rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Groups []struct {
			Name  string
			Rules []struct {
				Alert       string
				Expr        string
				For         string
				Labels      map[string]string
				Annotations map[string]string
			}
		}
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&rules); err != nil {
		t.Fatal(err)
	}
	count := 0
	seen := map[string]bool{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			count++
			if r.Alert == "" || r.Expr == "" || r.Annotations["summary"] == "" || seen[r.Alert] {
				t.Errorf("group %s: rule %q lacks alert, expr or summary, or repeats a name", g.Name, r.Alert)
			}
			seen[r.Alert] = true
			if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
				t.Errorf("%s: severity %q", r.Alert, r.Labels["severity"])
			}
			if bad := unknownMetrics(r.Expr, known); len(bad) > 0 {
				t.Errorf("%s uses metrics no node exports: %v", r.Alert, bad)
			}
		}
	}
	if count < 10 {
		t.Fatalf("only %d rules parsed", count)
	}
}

// TestDashboardUsesExportedMetrics: every query of the Grafana dashboard
// names metrics a node exports.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	known := exportedMetrics(t)
	b, err := os.ReadFile("grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			queries++
			if bad := unknownMetrics(q.Expr, known); len(bad) > 0 {
				t.Errorf("panel %q uses metrics no node exports: %v", p.Title, bad)
			}
		}
	}
	if dash.Title == "" || queries < 20 {
		t.Fatalf("dashboard %q with %d queries", dash.Title, queries)
	}
}

// The shipped configuration files load and validate: the systemd one as it
// is, the container defaults with the allow-anonymous the compose file
// sets (without it they must refuse to start, naming the setting).
func TestShippedConfigsValidate(t *testing.T) {
	c := config.Default()
	if err := config.Load("sextant.yaml", &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("deploy/sextant.yaml: %v", err)
	}
	if c.DataDir != "/var/lib/sextant" || c.ShutdownTimeout >= 45e9 {
		t.Fatalf("deploy/sextant.yaml: data-dir %s, shutdown-timeout %v (must stay under the unit's TimeoutStopSec, 45 s)", c.DataDir, c.ShutdownTimeout)
	}
	c = config.Default()
	if err := config.Load("sextant-container.yaml", &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "allow-anonymous") {
		t.Fatalf("container defaults without authentication: %v", err)
	}
	if _, err := config.FromEnv([]string{"SEXTANT_ALLOW_ANONYMOUS=true"}, &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("container defaults as compose sets them: %v", err)
	}
}
