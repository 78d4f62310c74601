package node_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestReadmeSequencedExample runs the README's "Sequenced topics" shell
// blocks against a `sextant serve` process with node id vm, as written but
// for the ports (sextant, mosquitto_pub and mosquitto_sub are wrappers that
// add the node's addresses; mosquitto_sub and log tail stop after two
// seconds), and checks every output line the README shows after a command
// (times and column widths aside).
func TestReadmeSequencedExample(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a sextant process")
	}
	mq := brokertest.RequireMosquitto(t)
	curl := brokertest.RequireTool(t, "curl", "curl")
	bin := brokertest.BuildSextant(t)
	root := brokertest.ModuleRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, string(readme), "## Sequenced topics")

	dir := t.TempDir()
	mqtt, admin := brokertest.FreeAddr(t), brokertest.FreeAddr(t)
	brokertest.StartProcess(t, bin, mqtt, "--node-id", "vm", "--data-dir", filepath.Join(dir, "data"), "--admin-addr", admin)
	_, port, _ := strings.Cut(mqtt, ":")
	tools := filepath.Join(dir, "bin")
	if err := os.Mkdir(tools, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		"sextant":       fmt.Sprintf("exec %q \"$@\" --admin %s\n", bin, admin),
		"mosquitto_pub": fmt.Sprintf("exec %q -p %s \"$@\"\n", mq.Pub, port),
		"mosquitto_sub": fmt.Sprintf("%q -p %s -W 2 \"$@\"; exit 0\n", mq.Sub, port),
		"curl":          fmt.Sprintf("exec %q \"$@\"\n", curl),
	} {
		if err := os.WriteFile(filepath.Join(tools, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}

	// One script: each command echoes a marker first, so the output can
	// be split by command; heredocs are copied as they are.
	var script strings.Builder
	var expect [][]string // per command, the output lines the README shows
	inHeredoc := ""
	for _, line := range strings.Split(strings.Join(blocks, "\n"), "\n") {
		switch {
		case inHeredoc != "":
			script.WriteString(line + "\n")
			if line == inHeredoc {
				inHeredoc = ""
			}
		case strings.HasPrefix(line, "# "):
			if len(expect) > 0 {
				want, _, _ := strings.Cut(strings.TrimPrefix(line, "# "), "   ...")
				expect[len(expect)-1] = append(expect[len(expect)-1], want)
			}
		case strings.TrimSpace(line) == "":
		default:
			line = strings.ReplaceAll(line, "127.0.0.1:8088", admin)
			if strings.Contains(line, "log tail") {
				line = "timeout 2 " + line + " || true"
			}
			fmt.Fprintf(&script, "echo '@@%d'\n%s\n", len(expect), line)
			expect = append(expect, nil)
			if _, tag, ok := strings.Cut(line, "<<'"); ok {
				inHeredoc, _, _ = strings.Cut(tag, "'")
			}
		}
	}
	cmd := exec.Command("bash", "-c", script.String())
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+tools+":"+os.Getenv("PATH"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the README's commands failed: %v\nscript:\n%s\noutput:\n%s", err, script.String(), out)
	}
	outputs := strings.Split(string(out), "@@")
	for i, want := range expect {
		var got string
		for _, o := range outputs {
			if n, rest, ok := strings.Cut(o, "\n"); ok && n == fmt.Sprint(i) {
				got = normalize(rest)
			}
		}
		for _, w := range want {
			if !strings.Contains(got, normalize(w)) {
				t.Errorf("command %d: the README shows %q; the output was:\n%s", i, w, got)
			}
		}
	}
	if t.Failed() {
		t.Logf("script:\n%s", script.String())
	}
}

// shellBlocks returns the ```sh blocks of the README section that starts
// with heading, up to the next heading of its level.
func shellBlocks(t *testing.T, readme, heading string) []string {
	t.Helper()
	_, section, ok := strings.Cut(readme, heading+"\n")
	if !ok {
		t.Fatalf("README has no %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var blocks []string
	for {
		var block string
		_, rest, ok := strings.Cut(section, "```sh\n")
		if !ok {
			break
		}
		block, section, _ = strings.Cut(rest, "```")
		blocks = append(blocks, block)
	}
	if len(blocks) == 0 {
		t.Fatalf("README's %q has no sh block", heading)
	}
	return blocks
}

var (
	timestamp = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
	blanks    = regexp.MustCompile(`[ \t]+`)
)

// normalize replaces times and runs of blanks, which differ from run to
// run and with column widths.
func normalize(s string) string {
	return blanks.ReplaceAllString(timestamp.ReplaceAllString(s, "TIME"), " ")
}
