// Package logging builds the node's slog.Logger from the log-level and
// log-format settings: text, json, or journal (for the systemd journal:
// no timestamp, since the journal stamps every line itself, and each line
// prefixed with its syslog priority, <3> to <7>, which journald turns into
// the entry's PRIORITY so that `journalctl -p warning` works). Format auto
// picks journal when stderr is the journal's stream (systemd sets
// JOURNAL_STREAM to its device and inode) and text otherwise.
//
// It also owns what keeps that log readable: Repeats, a limit on how often
// one kind of record is written (a failing peer retried three times a
// second, clients failing to log in), and the bridges from the libraries'
// loggers to slog (Hclog for Raft and raft-wal, StdLog for Serf and
// memberlist), which put the libraries' routine narration at debug and
// pass their warnings and errors through a Repeats.
//
// The handler New returns holds no state; its writes are serialised by
// slog. A Repeats is safe for concurrent use (one mutex around its map of
// kinds). Imported by cmd/sextant, the node, and the packages that run the
// libraries (meta, replication, membership).
package logging
