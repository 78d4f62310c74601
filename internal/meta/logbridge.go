package meta

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// hclogFor adapts slog to the hclog.Logger that Raft and raft-wal take.
func hclogFor(l *slog.Logger, name string) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return hclog.New(&hclog.LoggerOptions{
		Name:        name,
		Level:       hclog.Info,
		Output:      levelWriter{l},
		DisableTime: true,
	})
}

// levelWriter turns hclog's "[LEVEL] name: message" lines into slog records.
type levelWriter struct{ l *slog.Logger }

var _ io.Writer = levelWriter{}

func (w levelWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for _, lv := range []struct {
		prefix string
		level  slog.Level
	}{
		// Raft's INFO lines narrate every election and configuration
		// change; a node's operator sees them with --log-level debug.
		{"[TRACE]", slog.LevelDebug}, {"[DEBUG]", slog.LevelDebug}, {"[INFO]", slog.LevelDebug},
		{"[WARN]", slog.LevelWarn}, {"[ERROR]", slog.LevelError},
	} {
		if strings.HasPrefix(msg, lv.prefix) {
			level = lv.level
			msg = strings.TrimSpace(strings.TrimPrefix(msg, lv.prefix))
			break
		}
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}
