package config

import (
	"fmt"
	"strings"
)

// invalidError is one configuration problem: its text names the key and
// what is wrong, without a prefix (the caller says where the
// configuration came from), and it matches ErrInvalid.
type invalidError struct{ msg string }

func (e *invalidError) Error() string        { return e.msg }
func (e *invalidError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// problems is several configuration errors reported together: one line,
// each problem separated by "; ", every one matching ErrInvalid.
type problems []error

func (p problems) Error() string {
	parts := make([]string, len(p))
	for i, e := range p {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "; ")
}

func (p problems) Unwrap() []error { return p }

// joinProblems returns nil, the one error, or the problems together.
func joinProblems(errs []error) error {
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return errs[0]
	}
	return problems(errs)
}

// Suggest returns the name among names most like s, or "" when none is
// close: within a third of its length in edits, or sharing its first word
// (mqtt-port and mqtt-addr). Underscores count as dashes (mqtt_port).
func Suggest(s string, names []string) string {
	s = strings.ReplaceAll(s, "_", "-")
	first, _, _ := strings.Cut(s, "-")
	best, bestD := "", 1<<30
	for _, name := range names {
		n := strings.ReplaceAll(name, "_", "-")
		d := editDistance(s, n)
		nf, _, _ := strings.Cut(n, "-")
		if d > max(2, len(s)/3) && nf != first {
			continue
		}
		if d < bestD {
			best, bestD = name, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
