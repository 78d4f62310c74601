package lint

import (
	"bufio"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// pureCores may not do I/O or read the clock: they take inputs and return
// outputs, and a shell elsewhere drives them. The rule is transitive: a
// core may import only packages that are I/O-free themselves.
var pureCores = []string{
	"internal/mqtt/packet",
	"internal/topic",
	"internal/router",
	"internal/retained",
	"internal/coords",
	"internal/placement",
	"internal/monitor",
	"internal/meta/fsm",
	"internal/cluster/routing",
	"internal/cluster/hlc",
}

// forbiddenInCores are the I/O packages: the standard library's network,
// file and process access, and the module's and dependencies' packages
// that own sockets, files, Raft or gossip. Paths ending in "/" forbid
// every package below them.
var forbiddenInCores = []string{
	"net", "net/http", "os", "os/exec", "syscall",
	"github.com/tetratelabs/wazero/",
	"github.com/hashicorp/raft", "github.com/hashicorp/raft-wal/", "github.com/hashicorp/raft-wal",
	"github.com/hashicorp/serf/serf", "github.com/hashicorp/memberlist", "go.etcd.io/bbolt",
	"internal/store", "internal/peer", "internal/netx", "internal/membership", "internal/meta",
	"internal/listener", "internal/session", "internal/broker", "internal/node", "internal/clock",
	"internal/cluster", "internal/cluster/directory", "internal/cluster/retainsync",
}

// harnesses are the test harness packages: production code never imports
// them (tests and other harnesses may). A package whose name ends in
// "test" counts as one too.
var harnesses = []string{
	"internal/brokertest",
	"internal/clustertest",
	"internal/memnet",
	"internal/tlstest",
	"internal/mqtt/packettest",
	"internal/mqttclient/mqttclienttest",
	"internal/clock/clocktest",
	"internal/logging/logtest",
}

// nodeImporters are the production packages allowed to import
// internal/node, the composition root: the command, besides tests and
// harnesses.
var nodeImporters = []string{"cmd/sextant"}

// maxFileLines is the size past which a file must say why it is long, with a
// "lint:long-file <reason>" comment in its first 20 lines.
const maxFileLines = 1000

type goFile struct {
	rel  string // slash path relative to the module root
	dir  string
	test bool
	ast  *ast.File
	fset *token.FileSet
	src  []byte
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("go.mod not found above the test directory")
		}
		dir = parent
	}
}

// parsed caches the module's files: every rule reads the same tree, and
// parsing it once per rule made the package slow under -race.
var parsed struct {
	sync.Mutex
	files []goFile
}

func loadFiles(t *testing.T) []goFile {
	t.Helper()
	parsed.Lock()
	defer parsed.Unlock()
	if parsed.files == nil {
		parsed.files = parseFiles(t)
	}
	return parsed.files
}

func parseFiles(t *testing.T) []goFile {
	t.Helper()
	root := moduleRoot(t)
	var files []goFile
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		files = append(files, goFile{
			rel: rel, dir: filepath.ToSlash(filepath.Dir(rel)),
			test: strings.HasSuffix(name, "_test.go"), ast: f, fset: fset, src: src,
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

func imports(f *ast.File) []string {
	var out []string
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		out = append(out, p)
	}
	return out
}

func TestEveryPackageHasADocComment(t *testing.T) {
	documented := map[string]bool{}
	hasCode := map[string]bool{}
	for _, f := range loadFiles(t) {
		if f.test {
			continue
		}
		hasCode[f.dir] = true
		if f.ast.Doc != nil && strings.HasPrefix(f.ast.Doc.Text(), "Package ") || f.ast.Name.Name == "main" && f.ast.Doc != nil {
			documented[f.dir] = true
		}
	}
	for dir := range hasCode {
		if !documented[dir] {
			t.Errorf("%s: no package doc comment (add a doc.go saying what the package owns)", dir)
		}
	}
}

func TestProductionCodeDoesNotImportTesting(t *testing.T) {
	for _, f := range loadFiles(t) {
		if f.test || strings.HasSuffix(f.ast.Name.Name, "test") {
			continue // test files and xxxtest harness packages may
		}
		for _, p := range imports(f.ast) {
			if p == "testing" || strings.HasPrefix(p, "testing/") {
				t.Errorf("%s imports %q: move the harness into an xxxtest package", f.rel, p)
			}
		}
	}
}

func TestPureCoresDoNoIO(t *testing.T) {
	files := loadFiles(t)
	g := importGraph(t, files)
	for _, v := range coreViolations(g, pureCores, forbiddenInCores) {
		t.Error(v)
	}
	for _, f := range files {
		if f.test || !isCore(f.dir) {
			continue
		}
		for _, call := range clockCalls(f) {
			t.Errorf("%s: pure core calls time.%s; take time as an input", call.pos, call.name)
		}
	}
}

type clockCall struct {
	pos  token.Position
	name string
}

// clockCalls lists f's uses of the clock and of timers.
func clockCalls(f goFile) []clockCall {
	var out []clockCall
	ast.Inspect(f.ast, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
			switch sel.Sel.Name {
			case "Now", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Since", "Until":
				out = append(out, clockCall{f.fset.Position(sel.Pos()), sel.Sel.Name})
			}
		}
		return true
	})
	return out
}

// TestOnlyTheCommandImportsNode: internal/node is the composition root;
// nothing in the data or control path builds a node.
func TestOnlyTheCommandImportsNode(t *testing.T) {
	for _, v := range importerViolations(productionImports(t), []string{"internal/node"}, nodeImporters,
		"only cmd/sextant and tests may import the composition root") {
		t.Error(v)
	}
}

// TestProductionDoesNotImportHarnesses: harness packages are test code.
func TestProductionDoesNotImportHarnesses(t *testing.T) {
	for _, v := range importerViolations(productionImports(t), harnesses, nil,
		"production code must not import a test harness") {
		t.Error(v)
	}
}

// graph maps a package directory (relative to the module root) to what its
// production files import; module packages appear as their directories.
type graph map[string][]string

// importGraph builds the graph of the production files. Harness packages
// are left out (they are test code).
func importGraph(t *testing.T, files []goFile) graph {
	t.Helper()
	mod := modulePath(t)
	g := graph{}
	seen := map[string]map[string]bool{}
	for _, f := range files {
		if f.test {
			continue
		}
		if seen[f.dir] == nil {
			seen[f.dir] = map[string]bool{}
			g[f.dir] = nil
		}
		for _, p := range imports(f.ast) {
			if rel, ok := strings.CutPrefix(p, mod+"/"); ok {
				p = rel
			}
			if !seen[f.dir][p] {
				seen[f.dir][p] = true
				g[f.dir] = append(g[f.dir], p)
			}
		}
	}
	return g
}

// productionImports is the import graph without the harnesses and the
// test-only packages (whose name ends in "test"), which may import
// anything.
func productionImports(t *testing.T) graph {
	t.Helper()
	files := loadFiles(t)
	g := importGraph(t, files)
	for _, f := range files {
		if isHarness(f.dir) || strings.HasSuffix(f.ast.Name.Name, "test") {
			delete(g, f.dir)
		}
	}
	return g
}

func isHarness(dir string) bool { return slices.Contains(harnesses, dir) }

// coreViolations lists every path from a core to a forbidden package,
// following the module's own packages.
func coreViolations(g graph, cores, forbidden []string) []string {
	bad := func(p string) bool {
		for _, f := range forbidden {
			if p == f || strings.HasSuffix(f, "/") && strings.HasPrefix(p, f) {
				return true
			}
		}
		return false
	}
	var out []string
	for _, core := range cores {
		visited := map[string]bool{core: true}
		var walk func(pkg string, path []string)
		walk = func(pkg string, path []string) {
			for _, imp := range g[pkg] {
				via := append(slices.Clone(path), imp)
				if bad(imp) {
					out = append(out, fmt.Sprintf("pure core %s imports the I/O package %s (via %s)", core, imp, strings.Join(via, " -> ")))
					continue
				}
				if _, module := g[imp]; module && !visited[imp] {
					visited[imp] = true
					walk(imp, via)
				}
			}
		}
		walk(core, []string{core})
	}
	slices.Sort(out)
	return out
}

// importerViolations lists the packages of g that import one of targets
// without being in allowed.
func importerViolations(g graph, targets, allowed []string, why string) []string {
	var out []string
	for dir, imps := range g {
		if slices.Contains(allowed, dir) {
			continue
		}
		for _, imp := range imps {
			if slices.Contains(targets, imp) {
				out = append(out, fmt.Sprintf("%s imports %s: %s", dir, imp, why))
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestImportRulesCatchViolations: the rules above find what they are for,
// on a graph with one violation of each.
func TestImportRulesCatchViolations(t *testing.T) {
	g := graph{
		"internal/topic":   {"strings"},
		"internal/router":  {"internal/topic", "internal/wire"},
		"internal/wire":    {"os"},
		"internal/broker":  {"internal/memnet", "internal/node"},
		"cmd/sextant":      {"internal/node"},
		"internal/session": {"net"},
	}
	if v := coreViolations(g, []string{"internal/topic", "internal/router"}, forbiddenInCores); len(v) != 1 ||
		!strings.Contains(v[0], "internal/router -> internal/wire -> os") {
		t.Errorf("a core reaching os through another package: %v", v)
	}
	if v := importerViolations(g, []string{"internal/node"}, nodeImporters, "x"); len(v) != 1 || !strings.HasPrefix(v[0], "internal/broker imports internal/node") {
		t.Errorf("node imported outside the command: %v", v)
	}
	if v := importerViolations(g, harnesses, nil, "x"); len(v) != 1 || !strings.HasPrefix(v[0], "internal/broker imports internal/memnet") {
		t.Errorf("a harness imported by production code: %v", v)
	}
}

func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "module "); ok {
			return strings.TrimSpace(p)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}

func isCore(dir string) bool {
	for _, c := range pureCores {
		if dir == c {
			return true
		}
	}
	return false
}

func TestTestsDoNotSleep(t *testing.T) {
	for _, f := range loadFiles(t) {
		if !f.test {
			continue
		}
		lines := strings.Split(string(f.src), "\n")
		ast.Inspect(f.ast, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" && sel.Sel.Name == "Sleep" {
				pos := f.fset.Position(sel.Pos())
				if !strings.Contains(lines[pos.Line-1], "lint:sleep-ok") {
					t.Errorf("%s: time.Sleep in a test; wait on a condition, or use synctest (mark a justified use with // lint:sleep-ok <why>)", pos)
				}
			}
			return true
		})
	}
}

func TestErrorfWrapsErrors(t *testing.T) {
	for _, f := range loadFiles(t) {
		if f.test {
			continue
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || len(call.Args) < 2 {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok || sel.Sel.Name != "Errorf" {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "fmt" {
				return true
			}
			lit, ok := call.Args[0].(*ast.BasicLit)
			if !ok {
				return true
			}
			for _, a := range call.Args[1:] {
				if id, ok := a.(*ast.Ident); ok && (id.Name == "err" || strings.HasSuffix(id.Name, "Err")) && !strings.Contains(lit.Value, "%w") {
					t.Errorf("%s: fmt.Errorf formats an error without %%w", f.fset.Position(call.Pos()))
				}
			}
			return true
		})
	}
}

func TestFilesStaySmall(t *testing.T) {
	for _, f := range loadFiles(t) {
		n := strings.Count(string(f.src), "\n")
		if n <= maxFileLines {
			continue
		}
		sc := bufio.NewScanner(strings.NewReader(string(f.src)))
		justified := false
		for i := 0; i < 20 && sc.Scan(); i++ {
			if strings.Contains(sc.Text(), "lint:long-file") {
				justified = true
			}
		}
		if !justified {
			t.Errorf("%s: %d lines (over %d); split it, or say why in a lint:long-file comment", f.rel, n, maxFileLines)
		}
	}
}
