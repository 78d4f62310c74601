package replication

import (
	"context"
	"io"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// hclogFor returns the hclog.Logger that Raft, its transport and raft-wal
// take, forwarding their records to l with their key-value pairs intact.
// Raft narrates every election, pipeline start and configuration change at
// INFO and reports every failed heartbeat to an unreachable peer at ERROR;
// with hundreds of groups per node that is routine chatter, so INFO and
// below arrive at debug level and ERROR at warn level. This package logs
// the events an operator needs (leadership, failures) itself.
func hclogFor(l *slog.Logger, name string) hclog.Logger {
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:   name,
		Level:  hclog.Off, // the base logger writes nothing; the sink below does
		Output: io.Discard,
	})
	il.RegisterSink(slogSink{l})
	return il
}

// slogSink receives every record of an intercept logger, whatever its
// level.
type slogSink struct{ l *slog.Logger }

var _ hclog.SinkAdapter = slogSink{}

func (s slogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lv := slog.LevelDebug
	if level >= hclog.Warn {
		lv = slog.LevelWarn
	}
	ctx := context.Background()
	if !s.l.Enabled(ctx, lv) {
		return
	}
	s.l.Log(ctx, lv, msg, append(args, "component", name)...)
}
