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
