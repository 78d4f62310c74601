package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"
	"time"

	"github.com/alecthomas/kong"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/buildinfo"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/logging"
	"github.com/sextantmq/sextant/internal/node"
	"github.com/sextantmq/sextant/internal/procs"
)

// ServeCmd runs a broker node. Every config field is a flag of the same name
// as its YAML key and a SEXTANT_ environment variable; the file, then the
// environment, then flags given on the command line override the defaults.
type ServeCmd struct {
	ConfigFile string        `name:"config" env:"SEXTANT_CONFIG" help:"YAML config file; its keys are the flag names below." type:"path" placeholder:"FILE"`
	Config     config.Config `embed:""`
}

func (c *ServeCmd) Run(e *env, kctx *kong.Context) error {
	cfg, unknownEnv, err := c.resolve(kctx, os.Environ())
	if err != nil {
		return err
	}
	log, format := logging.New(e.stderr, cfg.LogLevel, cfg.LogFormat, logging.Env{Getenv: os.Getenv, Stream: logging.Stderr})
	for _, k := range unknownEnv {
		log.Warn("ignoring an environment variable that names no configuration key", "var", k)
	}
	bi := buildinfo.Read()
	n, err := node.New(cfg, node.Options{Log: log, Version: bi.Short()})
	if err != nil {
		return err
	}
	if err := n.Start(); err != nil {
		_ = n.Shutdown(context.Background())
		return err
	}
	log.Info("sextant build", "version", bi.Short(), "go", bi.GoVersion, "log_format", format)
	procsChanged := n.Metrics().ProcsChanges
	stopProcs := runProcs(cfg, os.Getenv, func(to string) { procsChanged.WithLabelValues(to).Inc() }, log)
	// SIGHUP reloads the TLS certificate, password file, ACL and admin
	// token file without dropping connections; a file that fails to load
	// is reported and its previous version kept.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	signalled := false
	for done := false; !done; {
		select {
		case <-e.ctx.Done():
			done, signalled = true, true
		case <-n.Stopping():
			done = true
		case <-hup:
			_ = n.Reload() // logs its outcome
		}
	}
	stopProcs() // the drain and shutdown get every processor
	return stop(n, cfg, log, signalled)
}

// stop ends the node within cfg.ShutdownTimeout. After SIGTERM or SIGINT
// it drains first (clients sent to other nodes with their sessions, the
// metadata leadership handed over); after a drain through the admin API it
// only shuts down. A second signal exits at once.
func stop(n *node.Node, cfg config.Config, log *slog.Logger, signalled bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	force := make(chan os.Signal, 1)
	signal.Notify(force, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(force)
	go func() {
		select {
		case <-force:
			log.Error("second stop signal: exiting at once")
			os.Exit(1)
		case <-ctx.Done():
		}
	}()
	if signalled {
		log.Info("stop signal received: draining, then stopping", "drain_timeout", cfg.DrainTimeout, "shutdown_timeout", cfg.ShutdownTimeout)
		if _, err := n.Drain(ctx, adminapi.DrainRequest{}); errors.Is(err, adminapi.ErrDraining) {
			select { // a drain through the admin API is under way: let it finish
			case <-n.Stopping():
			case <-ctx.Done():
			}
		} else if err != nil {
			log.Warn("drain failed; stopping anyway", "err", err)
		}
	}
	log.Info("shutting down: closing connections, leaving the cluster, flushing the store")
	err := n.Shutdown(ctx)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		log.Error("the stop did not finish within shutdown-timeout; exiting with what is left open", "shutdown_timeout", cfg.ShutdownTimeout, "err", err)
	}
	return err
}

// resolve builds the config: defaults, then the file, then the SEXTANT_
// variables of environ, then the flags given explicitly on the command
// line. It also returns the SEXTANT_ variables that name no key.
func (c *ServeCmd) resolve(kctx *kong.Context, environ []string) (config.Config, []string, error) {
	cfg := config.Default()
	if c.ConfigFile != "" {
		if err := config.Load(c.ConfigFile, &cfg); err != nil {
			return cfg, nil, err
		}
	}
	unknown, err := config.FromEnv(environ, &cfg)
	if err != nil {
		return cfg, nil, err
	}
	for _, p := range kctx.Path {
		if p.Flag == nil || p.Flag.Name == "config" {
			continue
		}
		config.CopyField(&cfg, &c.Config, p.Flag.Name)
	}
	if err := cfg.Validate(); err != nil {
		return cfg, nil, fmt.Errorf("invalid configuration: %w", err)
	}
	return cfg, unknown, nil
}

// runProcs applies cfg.Procs to the process: a fixed count, or (0, and no
// GOMAXPROCS in the environment) the adaptive count of internal/procs, run
// until the returned stop is called. The serve command owns it because
// GOMAXPROCS is process-wide.
func runProcs(cfg config.Config, getenv func(string) string, count func(to string), log *slog.Logger) (stop func()) {
	if cfg.Procs > 0 {
		runtime.GOMAXPROCS(cfg.Procs)
		return func() {}
	}
	if v := getenv("GOMAXPROCS"); v != "" {
		log.Info("procs fixed by the GOMAXPROCS environment variable", "procs", runtime.GOMAXPROCS(0))
		return func() {}
	}
	p := procs.DefaultPolicy(runtime.GOMAXPROCS(0))
	if p.Max <= 1 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		err := procs.Run(ctx, p, procs.Driver{
			CPU:      procs.SelfCPU,
			Set:      procs.SetRuntime,
			Interval: 250 * time.Millisecond,
			Changed: func(c procs.Change) {
				to := "wide"
				if c.To < c.From {
					to = "narrow"
				}
				count(to)
				log.Debug("procs changed", "from", c.From, "to", c.To, "cpu_cores", c.Use)
			},
		})
		if err != nil {
			log.Warn("adaptive procs stopped; running with every processor", "err", err)
		}
	}()
	return func() { cancel(); <-done }
}
