package lint

import (
	"bufio"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// pureCores may not do I/O or read the clock: they take inputs and return
// outputs, and a shell elsewhere drives them.
var pureCores = []string{
	"internal/mqtt/packet",
	"internal/topic",
	"internal/router",
	"internal/retained",
	"internal/coords",
	"internal/placement",
	"internal/meta/fsm",
	// The placement group's state machine: it does its I/O through the
	// topic log's FS seam, never the os or net packages (storage_test.go
	// keeps it below the network too).
	"internal/sequencer",
}

var forbiddenInCores = []string{"net", "net/http", "os", "os/exec", "syscall", "github.com/tetratelabs/wazero"}

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

func loadFiles(t *testing.T) []goFile {
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
	for _, f := range loadFiles(t) {
		if f.test || !isCore(f.dir) {
			continue
		}
		for _, p := range imports(f.ast) {
			for _, bad := range forbiddenInCores {
				if p == bad {
					t.Errorf("%s: pure core imports %q", f.rel, p)
				}
			}
		}
		ast.Inspect(f.ast, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if id, ok := sel.X.(*ast.Ident); ok && id.Name == "time" {
				switch sel.Sel.Name {
				case "Now", "Sleep", "After", "AfterFunc", "NewTimer", "NewTicker", "Tick", "Since", "Until":
					t.Errorf("%s: pure core calls time.%s; take time as an input", f.fset.Position(sel.Pos()), sel.Sel.Name)
				}
			}
			return true
		})
	}
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
