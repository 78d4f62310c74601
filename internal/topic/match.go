package topic

import "strings"

// Match reports whether the topic filter matches the topic name. It is the
// reference matcher: plain, level by level, with no index.
//
//   - '+' matches exactly one level, including an empty one ("a/+" matches "a/").
//   - '#' matches its parent level and any number of levels below it
//     ("a/#" matches "a", "a/b" and "a/b/c"; "#" matches every name).
//   - A filter whose first level is '+' or '#' does not match a name starting
//     with '$' (MQTT 4.7.2), so "#" does not match "$SYS/uptime".
//
// Neither argument is validated, and a shared filter is not unwrapped: pass
// the inner filter from ParseShared. A '#' that is not the last level (an
// invalid filter) matches everything below it.
func Match(filter, name string) bool {
	if IsDollar(name) && filter != "" && (filter[0] == '+' || filter[0] == '#') {
		return false
	}
	for {
		flevel, frest, fmore := strings.Cut(filter, "/")
		if flevel == "#" {
			return true
		}
		nlevel, nrest, nmore := strings.Cut(name, "/")
		if flevel != "+" && flevel != nlevel {
			return false
		}
		switch {
		case fmore && nmore:
			filter, name = frest, nrest
		case !fmore && !nmore:
			return true
		case fmore: // name exhausted: only a trailing "#" still matches
			return frest == "#"
		default: // filter exhausted, name continues
			return false
		}
	}
}

// Overlap reports whether some topic name matches both filters: whether a
// subscription to one can receive messages of a topic the other selects
// (a placement group's rule and a local subscription). As Match, it does
// not unwrap shared filters, and wildcards in the first level do not
// reach names starting with '$'.
func Overlap(a, b string) bool {
	if a != "" && b != "" {
		aw, bw := a[0] == '+' || a[0] == '#', b[0] == '+' || b[0] == '#'
		if (aw && IsDollar(b)) || (bw && IsDollar(a)) {
			return false
		}
	}
	for {
		al, arest, amore := strings.Cut(a, "/")
		bl, brest, bmore := strings.Cut(b, "/")
		if al == "#" || bl == "#" {
			return true
		}
		if al != "+" && bl != "+" && al != bl {
			return false
		}
		switch {
		case amore && bmore:
			a, b = arest, brest
		case !amore && !bmore:
			return true
		case amore: // b exhausted: only a trailing "#" of a still matches
			return arest == "#"
		default:
			return brest == "#"
		}
	}
}
