package logging

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
)

// Env is what New reads from the process: an environment lookup and the
// device and inode of the stream it writes to (ok false when unknown).
type Env struct {
	Getenv func(string) string
	Stream func() (dev, ino uint64, ok bool)
}

// New returns a logger writing to w at level ("debug", "info", "warn",
// "error") in format ("auto", "text", "json", "journal"). It also returns
// the format chosen, for auto.
func New(w io.Writer, level, format string, env Env) (*slog.Logger, string) {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level)) // validated by config; the zero value is info
	if format == "auto" || format == "" {
		format = "text"
		if underJournal(env) {
			format = "journal"
		}
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), format
	case "journal":
		opts.ReplaceAttr = dropTime
		return slog.New(slog.NewTextHandler(&priorityWriter{w: w}, opts)), format
	}
	return slog.New(slog.NewTextHandler(w, opts)), "text"
}

// underJournal reports whether the stream is the one systemd connected to
// the journal: JOURNAL_STREAM is "DEV:INODE" of that stream, and a child
// whose stderr was redirected elsewhere inherits the variable but not the
// stream, hence the comparison.
func underJournal(env Env) bool {
	if env.Getenv == nil || env.Stream == nil {
		return false
	}
	js := env.Getenv("JOURNAL_STREAM")
	if js == "" {
		return false
	}
	var jdev, jino uint64
	if _, err := fmt.Sscanf(js, "%d:%d", &jdev, &jino); err != nil {
		return false
	}
	dev, ino, ok := env.Stream()
	return ok && dev == jdev && ino == jino
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}

// priorityWriter prefixes each record (one Write per record, as slog's
// handlers do) with the syslog priority of its level, which is at the start
// of the line once the time is dropped.
type priorityWriter struct{ w io.Writer }

var priorities = []struct {
	level  string
	prefix string
}{
	{"level=ERROR", "<3>"},
	{"level=WARN", "<4>"},
	{"level=INFO", "<6>"},
	{"level=DEBUG", "<7>"},
}

func (p *priorityWriter) Write(b []byte) (int, error) {
	prefix := "<6>"
	for _, pr := range priorities {
		if bytes.HasPrefix(b, []byte(pr.level)) {
			prefix = pr.prefix
			break
		}
	}
	// Levels between the named ones print as "WARN+2" and the like; the
	// prefix match above takes the named level they start with.
	out := make([]byte, 0, len(prefix)+len(b))
	out = append(append(out, prefix...), b...)
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

var _ io.Writer = (*priorityWriter)(nil)
