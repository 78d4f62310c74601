package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEmulatePoliciesWritesTablesAndCharts(t *testing.T) {
	dir := t.TempDir()
	code, out, errOut := runCLI(t, "emulate", "policies", "--scenario", "uav", "--permutations", "3",
		"--vivaldi-rounds", "50", "--seed", "5", "--out", dir)
	if code != 0 {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	for _, name := range []string{"uav.md", "uav.csv", "uav-worst.svg", "uav-violations.svg"} {
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
	if !strings.Contains(out, "| MEC zones |") || !strings.Contains(errOut, "seed 5") || !strings.Contains(errOut, "100%") {
		t.Fatalf("stdout %q\nstderr %q", out, errOut)
	}
}

func TestEmulatePoliciesRejectsBadFlagsOnOneLine(t *testing.T) {
	for _, args := range [][]string{
		{"--permutations", "0"},
		{"--scenario", "chess"},
		{"--dataset", "paris"},
		{"--workers", "-1"},
	} {
		code, _, errOut := runCLI(t, append([]string{"emulate", "policies", "--out", t.TempDir()}, args...)...)
		if code == 0 || strings.Count(strings.TrimSpace(errOut), "\n") != 0 || !strings.Contains(errOut, args[0]) {
			t.Errorf("%v: exit %d, stderr %q", args, code, errOut)
		}
	}
}
