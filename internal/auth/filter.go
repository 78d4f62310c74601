package auth

import (
	"strings"

	"github.com/sextantmq/sextant/internal/topic"
)

// covers reports whether every topic name matched by filter f is also
// matched by filter r: a subscription to f receives nothing that r does not
// allow. Both are valid, non-shared filters.
func covers(r, f string) bool {
	// A name starting with '$' is matched only by filters whose first level
	// is that literal; a rule starting with a wildcard covers none of them.
	if topic.IsDollar(f) && startsWithWildcard(r) {
		return false
	}
	for root := true; ; root = false {
		rl, rrest, rmore := strings.Cut(r, "/")
		fl, frest, fmore := strings.Cut(f, "/")
		if rl == "#" {
			return true
		}
		if fl == "#" {
			// f matches the parent level and everything below it. Only
			// "#" matches all that, and at the root, where there is no
			// parent name, "+/#" too.
			return root && rl == "+" && rmore && rrest == "#"
		}
		if rl != "+" && (fl == "+" || rl != fl) {
			return false
		}
		switch {
		case rmore && fmore:
			r, f = rrest, frest
		case !rmore && !fmore:
			return true
		case rmore: // f ends here: r still matches its names only through a trailing "#"
			return rrest == "#"
		default: // f goes deeper than r
			return false
		}
	}
}

func startsWithWildcard(f string) bool { return f != "" && (f[0] == '+' || f[0] == '#') }
