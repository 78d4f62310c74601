package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
)

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, nil, &out, &errb)
	return code, out.String(), errb.String()
}

func TestVersionPrints(t *testing.T) {
	code, out, _ := runCLI(t, "version")
	if code != 0 || !strings.HasPrefix(out, "sextant ") {
		t.Fatalf("code %d, out %q", code, out)
	}
}

func TestUnknownFlagIsOneLineAndNonZero(t *testing.T) {
	code, _, errOut := runCLI(t, "version", "--no-such-flag")
	if code == 0 {
		t.Fatal("unknown flag exited 0")
	}
	if !strings.Contains(errOut, "no-such-flag") {
		t.Fatalf("stderr does not name the flag: %q", errOut)
	}
}

// TestBareSextantPrintsUsage: sextant without arguments prints the usage
// with every command, not only an error.
func TestBareSextantPrintsUsage(t *testing.T) {
	code, out, errOut := runCLI(t)
	if code != 0 || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, w := range []string{"Usage: sextant <command>", "serve", "pub", "nodes", "clients", "topics", "policy", "--version"} {
		if !strings.Contains(out, w) {
			t.Errorf("usage lacks %q:\n%s", w, out)
		}
	}
}

// TestHelpCommand: "sextant help" and "sextant help CMD" are the --help of
// the whole tool and of the command (the client commands' own help too).
func TestHelpCommand(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"help"}, "Usage: sextant <command>"},
		{[]string{"help", "serve"}, "Usage: sextant serve"},
		{[]string{"help", "policy", "set"}, "Usage: sextant policy set"},
		{[]string{"help", "pub"}, "Usage: sextant pub"},
	} {
		code, out, errOut := runCLI(t, c.args...)
		if code != 0 || errOut != "" || !strings.Contains(out, c.want) {
			t.Errorf("%v: exit %d, stderr %q, out lacks %q", c.args, code, errOut, c.want)
		}
	}
}

// TestUnknownFlagSuggestsClosest: an unknown flag gets the closest one
// the command has, also where the edit distance is large but the first word
// is shared (--mqtt-port for --mqtt-addr) and for the client commands.
func TestUnknownFlagSuggestsClosest(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"serve", "--mqtt-port", "1883"}, "did you mean --mqtt-addr?"},
		{[]string{"serve", "--data_dir", "x"}, "--data-dir"},
		{[]string{"nodes", "--admn", "x"}, "--admin"},
		{[]string{"pub", "--hots", "x"}, "--host"},
	} {
		code, _, errOut := runCLI(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || len(strings.Split(strings.TrimSpace(errOut), "\n")) != 1 {
			t.Errorf("%v: exit %d, stderr %q; want one line suggesting %s", c.args, code, errOut, c.want)
		}
	}
	if _, _, errOut := runCLI(t, "serve", "--zzzz"); strings.Contains(errOut, "did you mean") {
		t.Errorf("a flag like no other got a suggestion: %q", errOut)
	}
}

// TestHelpShowsDefaults: a flag's help names its default, and a command
// group's help shows the flags of the command it runs by default.
func TestHelpShowsDefaults(t *testing.T) {
	code, out, _ := runCLI(t, "nodes", "--help")
	if code != 0 || !strings.Contains(out, "--admin=ADDR") || !strings.Contains(out, "(default:") || !strings.Contains(out, "127.0.0.1:8088") {
		t.Fatalf("nodes --help does not show --admin with its default:\n%s", out)
	}
	_, out, _ = runCLI(t, "serve", "--help")
	for _, w := range []string{"./sextant-data", "(default: 10000)"} {
		if !strings.Contains(out, w) {
			t.Errorf("serve --help lacks %q", w)
		}
	}
	_, out, _ = runCLI(t, "pub", "--help")
	if !strings.Contains(out, "(default: localhost)") {
		t.Errorf("pub --help does not show the host's default")
	}
}

// TestCAFlagHasOneName: the admin commands take --cafile, the name the
// MQTT client commands use, and still accept --ca.
func TestCAFlagHasOneName(t *testing.T) {
	for _, cmd := range [][]string{{"nodes"}, {"policy", "get"}, {"clients"}, {"topics"}, {"pub", "-t", "x", "-m", "y"}} {
		_, out, _ := runCLI(t, append(cmd, "--help")...)
		if !strings.Contains(out, "--cafile=FILE") {
			t.Errorf("%v --help has no --cafile", cmd)
		}
	}
	missing := t.TempDir() + "/none.pem"
	for _, flag := range []string{"--cafile", "--ca"} {
		_, _, errOut := runCLI(t, "nodes", "--admin", "127.0.0.1:1", flag, missing)
		if !strings.Contains(errOut, "--cafile") || !strings.Contains(errOut, "none.pem") {
			t.Errorf("nodes %s: %q", flag, errOut)
		}
	}
}
