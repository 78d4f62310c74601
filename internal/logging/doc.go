// Package logging builds the node's slog.Logger from the log-level and
// log-format settings: text, json, or journal (for the systemd journal:
// no timestamp, since the journal stamps every line itself, and each line
// prefixed with its syslog priority, <3> to <7>, which journald turns into
// the entry's PRIORITY so that `journalctl -p warning` works). Format auto
// picks journal when stderr is the journal's stream (systemd sets
// JOURNAL_STREAM to its device and inode) and text otherwise.
//
// It holds no state beyond the handler it returns; the handler's writes are
// serialised by slog. Imported by cmd/sextant.
package logging
