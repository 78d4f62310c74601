package main

import (
	"io"
	"log/slog"
	"runtime"
	"testing"

	"github.com/sextantmq/sextant/internal/config"
)

// GOMAXPROCS is process-wide: these tests restore it and must not run in
// parallel with others that read it.

func TestServeProcsFixedByConfig(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(was)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	stop := runProcs(config.Config{Procs: was + 1}, func(string) string { return "" }, func(string) {}, log)
	if got := runtime.GOMAXPROCS(0); got != was+1 {
		t.Fatalf("procs %d set GOMAXPROCS to %d", was+1, got)
	}
	stop()
}

func TestServeProcsFixedByTheEnvironment(t *testing.T) {
	was := runtime.GOMAXPROCS(0)
	defer runtime.GOMAXPROCS(was)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	env := func(k string) string {
		if k == "GOMAXPROCS" {
			return "7"
		}
		return ""
	}
	stop := runProcs(config.Config{Procs: 0}, env, func(string) { t.Error("the adaptive driver ran with GOMAXPROCS set") }, log)
	stop()
	if got := runtime.GOMAXPROCS(0); got != was {
		t.Fatalf("GOMAXPROCS changed to %d with the environment fixing it", got)
	}
}
