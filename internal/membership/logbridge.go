package membership

import (
	"context"
	"log"
	"log/slog"
	"strings"
)

// stdLogger adapts slog to the *log.Logger that Serf and memberlist take:
// their lines start with "[LEVEL]", which becomes the slog level.
func stdLogger(l *slog.Logger) *log.Logger {
	return log.New(levelWriter{l}, "", 0)
}

type levelWriter struct{ l *slog.Logger }

func (w levelWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	level := slog.LevelInfo
	for prefix, lv := range map[string]slog.Level{
		"[DEBUG]": slog.LevelDebug, "[TRACE]": slog.LevelDebug, "[INFO]": slog.LevelInfo,
		"[WARN]": slog.LevelWarn, "[ERR]": slog.LevelError, "[ERROR]": slog.LevelError,
	} {
		if strings.HasPrefix(msg, prefix) {
			level = lv
			msg = strings.TrimSpace(strings.TrimPrefix(msg, prefix))
			break
		}
	}
	w.l.Log(context.Background(), level, msg)
	return len(p), nil
}
