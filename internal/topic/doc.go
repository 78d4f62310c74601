// Package topic owns the rules for MQTT topic names and topic filters:
// validation (wildcard placement, length, UTF-8, NUL), the shared
// subscription form "$share/{group}/{filter}", the '$' and "$SYS" topic
// space, optional depth and length limits, and Match, a deliberately naive
// level-by-level matcher. Match is the reference the subscription trie
// (internal/router) and the retained index (internal/retained) are tested
// against, and is fast enough for one-off checks such as ACL rules.
//
// Everything here is a pure function of its arguments: safe for concurrent
// use, no I/O, no clock, no package-level mutable state. It depends on
// nothing else in Sextant.
package topic
