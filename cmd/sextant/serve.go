package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/node"
)

// ServeCmd runs a broker node. Every config field is a flag of the same name
// as its YAML key; flags given on the command line override the file.
type ServeCmd struct {
	ConfigFile string        `name:"config" help:"YAML config file; its keys are the flag names below." type:"path" placeholder:"FILE"`
	Config     config.Config `embed:""`
}

func (c *ServeCmd) Run(e *env, kctx *kong.Context) error {
	cfg, err := c.resolve(kctx)
	if err != nil {
		return err
	}
	log := newLogger(e.stderr, cfg.LogLevel, cfg.LogFormat)
	n, err := node.New(cfg, node.Options{Log: log, Version: version})
	if err != nil {
		return err
	}
	if err := n.Start(); err != nil {
		_ = n.Shutdown(context.Background())
		return err
	}
	// SIGHUP reloads the TLS certificate, password file, ACL and admin
	// token file without dropping connections; a file that fails to load
	// is reported and its previous version kept.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for done := false; !done; {
		select {
		case <-e.ctx.Done():
			done = true
		case <-hup:
			_ = n.Reload() // logs its outcome
		}
	}
	log.Info("shutting down")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return n.Shutdown(ctx)
}

// resolve builds the config: defaults, then the file, then the flags that
// were given explicitly on the command line.
func (c *ServeCmd) resolve(kctx *kong.Context) (config.Config, error) {
	cfg := config.Default()
	if c.ConfigFile != "" {
		if err := config.Load(c.ConfigFile, &cfg); err != nil {
			return cfg, err
		}
	}
	for _, p := range kctx.Path {
		if p.Flag == nil || p.Flag.Name == "config" {
			continue
		}
		config.CopyField(&cfg, &c.Config, p.Flag.Name)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, nil
}

func newLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
