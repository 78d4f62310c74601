// Command sextant is the whole of Sextant in one binary: the broker node
// (serve), the MQTT client tools (pub, sub, ping), the load generator
// (bench), cluster inspection and the geo emulator. This package only parses
// flags and calls into internal packages; each command lives in its own file.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/alecthomas/kong"

	"github.com/sextantmq/sextant/internal/buildinfo"
)

// CLI is the command tree. Each command type is defined in its own file.
type CLI struct {
	ShowVersion kong.VersionFlag `name:"version" help:"Print the version, commit and Go version, and exit."`

	Serve   ServeCmd   `cmd:"" help:"Run a broker node."`
	Pub     PubCmd     `cmd:"" passthrough:"" help:"Publish messages to any MQTT broker (see sextant pub --help)."`
	Sub     SubCmd     `cmd:"" passthrough:"" help:"Subscribe and print messages, with latency of stamped ones (see sextant sub --help)."`
	Ping    PingCmd    `cmd:"" passthrough:"" help:"Measure MQTT round trips to a broker (see sextant ping --help)."`
	Bench   BenchCmd   `cmd:"" passthrough:"" help:"Load-test any MQTT broker (see sextant bench --help)."`
	Nodes   NodesCmd   `cmd:"" help:"Show the cluster's nodes, their coordinates and estimated RTTs; remove a node that is gone (nodes remove ID)."`
	Clients ClientsCmd `cmd:"" help:"Show a node's clients and sessions, one client in detail, or disconnect one."`
	Topics  TopicsCmd  `cmd:"" help:"Show a node's topics, retained messages and subscriptions."`
	Policy  PolicyCmd  `cmd:"" help:"Read or replace the topic policy rules (docs/policy.md)."`
	Log     LogCmd     `cmd:"" help:"Read a sequenced topic's history by index: get, latest, tail."`
	Groups  GroupsCmd  `cmd:"" help:"List the placement groups of sequenced topics: home, replicas, leader, log size."`
	Passwd  PasswdCmd  `cmd:"" help:"Add or change a user in a password file (bcrypt), or remove one."`
	Emulate EmulateCmd `cmd:"" help:"Geo emulator: evaluate placement policies on real latency data."`
	Health  HealthCmd  `cmd:"" help:"Check a node's readiness over its admin API (exit 0 when ready): the container health check."`
	Node    NodeCmd    `cmd:"" help:"Operate on one node: drain it before a restart or removal."`
	Version VersionCmd `cmd:"" help:"Print the version, commit and Go version, and exit."`
}

// env is what every command's Run receives: where to read and write, and a
// context cancelled on SIGINT/SIGTERM.
type env struct {
	ctx    context.Context
	stdin  io.Reader // nil: nothing to read
	stdout io.Writer
	stderr io.Writer
}

// exitError carries a specific exit status out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run parses args and runs the chosen command; it returns the exit status.
// Errors are printed as one line on stderr.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	var cli CLI
	exit := -1
	parser, err := kong.New(&cli,
		kong.Name("sextant"),
		kong.Description("Sextant: a geo-distributed MQTT 3.1.1/5.0 broker cluster, its client tools, benchmark and emulator."),
		kong.Writers(stdout, stderr),
		kong.Exit(func(c int) { exit = c; panic(exitSignal{}) }),
		kong.ConfigureHelp(kong.HelpOptions{Compact: true}),
		kong.ValueFormatter(helpValue),
		kong.Help(helpPrinter),
		cliVars(),
	)
	if err != nil {
		fmt.Fprintf(stderr, "sextant: %v\n", err)
		return 2
	}
	code := func() (code int) {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(exitSignal); !ok {
					panic(r)
				}
				code = exit
			}
		}()
		kctx, err := parser.Parse(helpArgs(args))
		if err != nil {
			fmt.Fprintf(stderr, "sextant: %v\n", withSuggestion(err))
			return 2
		}
		if err := kctx.Run(&env{ctx: ctx, stdin: stdin, stdout: stdout, stderr: stderr}); err != nil {
			fmt.Fprintf(stderr, "sextant: %v\n", err)
			var ee *exitError
			if errors.As(err, &ee) {
				return ee.code
			}
			return 1
		}
		return 0
	}()
	return code
}

// helpArgs turns the ways of asking for help into kong's: no arguments at
// all prints the usage, and "help [command...]" is "command... --help".
func helpArgs(args []string) []string {
	switch {
	case len(args) == 0:
		return []string{"--help"}
	case args[0] == "help":
		return append(append([]string(nil), args[1:]...), "--help")
	}
	return args
}

// exitSignal unwinds kong's help/exit handling back into run.
type exitSignal struct{}

// cliVars are the variables the commands' tags refer to; every parser of
// CLI needs them.
func cliVars() kong.Vars {
	return kong.Vars{"version": strings.TrimSuffix(buildinfo.Read().String(), "\n"), "read_help": readHelp}
}
