package logging

import (
	"context"
	"io"
	"log"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// The libraries Sextant runs (Raft for the metadata group and the
// replicated groups, Serf and memberlist for gossip) log in their own
// formats and at their own levels. The bridges below turn their records
// into slog records at levels that fit an operator's log:
//
//   - routine narration (elections, log catch-up, gossip refutations,
//     shutdown noise) at debug;
//   - failures to reach another node at warn: Sextant itself logs, once,
//     that the node failed or its link went down, so these are detail;
//   - everything else at the library's own level;
//
// and every record at warn or above passes through a Repeats, so that a
// dead peer retried three times a second costs one line a minute, with
// the count of those not written.

// raftRoutine are Raft messages that narrate normal operation, whatever
// level Raft gives them; matched by prefix.
var raftRoutine = []string{
	"heartbeat timeout reached", "no known peers, aborting election", "not part of stable configuration, aborting election",
	"Election timeout reached, restarting election", "new leader elected, stepping down",
	"appendEntries rejected, sending older logs", "failed to get previous log", "previous log term mis-match",
	"rejecting vote request since", "rejecting pre-vote request since", "duplicate requestVote from",
	"skipping application of old log", "peer has newer term, stopping replication", "clearing log suffix",
	"unable to get address for server, using fallback address", "pre-vote is disabled",
	"failed to decode incoming command", "failed to accept connection", "failed to flush response",
}

// raftUnreachable are Raft messages about a peer that does not answer.
var raftUnreachable = []string{
	"failed to heartbeat", "failed to appendEntries to", "failed to make requestVote RPC", "failed to contact",
	"failed to start pipeline replication to", "failed to pipeline appendEntries", "target does not support pre-vote RPC",
}

// gossipRoutine and gossipUnreachable are the same for Serf and memberlist
// (their lines start with the library's name).
var (
	gossipRoutine = []string{
		"memberlist: Refuting a dead message", "memberlist: Refuting a suspect message", "serf: timeout waiting for leave broadcast",
		"memberlist: Got ping for unexpected node",
	}
	gossipUnreachable = []string{
		"memberlist: Failed to send", "memberlist: Push/Pull with", "memberlist: Failed fallback TCP ping",
		"memberlist: Failed to forward ack", "serf: Failed to broadcast join intent",
	}
)

// libraryLevel maps a library record's level and message to Sextant's.
func libraryLevel(lv slog.Level, msg string, routine, unreachable []string) slog.Level {
	switch {
	case lv < slog.LevelWarn || hasAnyPrefix(msg, routine):
		return slog.LevelDebug
	case hasAnyPrefix(msg, unreachable):
		return slog.LevelWarn
	}
	return lv
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// Hclog returns the hclog.Logger that Raft, its transport and raft-wal
// take, forwarding their records to l with their key-value pairs intact
// (and the logger's name as component). Records at warn and above pass
// through rep (nil: a Repeats of this logger's own, with the defaults);
// share one among the loggers of many groups so that the same failure in
// each costs one line.
func Hclog(l *slog.Logger, name string, rep *Repeats) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	if rep == nil {
		rep = NewRepeats(nil, 0, 0)
	}
	il := hclog.NewInterceptLogger(&hclog.LoggerOptions{
		Name:   name,
		Level:  hclog.Off, // the base logger writes nothing; the sink below does
		Output: io.Discard,
	})
	il.RegisterSink(hclogSink{l: l, rep: rep})
	return il
}

// hclogSink receives every record of an intercept logger, whatever its
// level.
type hclogSink struct {
	l   *slog.Logger
	rep *Repeats
}

var _ hclog.SinkAdapter = hclogSink{}

func (s hclogSink) Accept(name string, level hclog.Level, msg string, args ...any) {
	lv := slog.LevelDebug
	switch {
	case level >= hclog.Error:
		lv = slog.LevelError
	case level == hclog.Warn:
		lv = slog.LevelWarn
	}
	lv = libraryLevel(lv, msg, raftRoutine, raftUnreachable)
	ctx := context.Background()
	if !s.l.Enabled(ctx, lv) {
		return
	}
	args = append(args, "component", name)
	if lv >= slog.LevelWarn {
		ok, suppressed := s.rep.Allow(name + "\x00" + msg)
		if !ok {
			return
		}
		if suppressed > 0 {
			args = append(args, "suppressed", suppressed)
		}
	}
	s.l.Log(ctx, lv, msg, args...)
}

// StdLog returns the *log.Logger that Serf and memberlist take: their
// lines start with "[LEVEL]", which becomes the slog level. Records at
// warn and above pass through rep (nil: one of its own), keyed by the line
// with its numbers (addresses, ports, counts) left out.
func StdLog(l *slog.Logger, rep *Repeats) *log.Logger {
	if rep == nil {
		rep = NewRepeats(nil, 0, 0)
	}
	return log.New(stdWriter{l: l, rep: rep}, "", 0)
}

type stdWriter struct {
	l   *slog.Logger
	rep *Repeats
}

var _ io.Writer = stdWriter{}

var stdLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug}, {"[TRACE]", slog.LevelDebug}, {"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn}, {"[ERR]", slog.LevelError}, {"[ERROR]", slog.LevelError},
}

func (w stdWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSpace(string(p))
	lv := slog.LevelInfo
	for _, s := range stdLevels {
		if rest, ok := strings.CutPrefix(msg, s.prefix); ok {
			lv, msg = s.level, strings.TrimSpace(rest)
			break
		}
	}
	lv = libraryLevel(lv, msg, gossipRoutine, gossipUnreachable)
	ctx := context.Background()
	if !w.l.Enabled(ctx, lv) {
		return len(p), nil
	}
	if lv >= slog.LevelWarn {
		ok, suppressed := w.rep.Allow(withoutDigits(msg))
		if !ok {
			return len(p), nil
		}
		if suppressed > 0 {
			w.l.Log(ctx, lv, msg, "suppressed", suppressed)
			return len(p), nil
		}
	}
	w.l.Log(ctx, lv, msg)
	return len(p), nil
}

// withoutDigits drops the digits of s, so that the same failure towards
// different addresses is one kind of record.
func withoutDigits(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= '0' && r <= '9' {
			return -1
		}
		return r
	}, s)
}
