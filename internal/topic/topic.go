package topic

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Sentinel errors; every error this package returns wraps one of them.
var (
	ErrInvalidName   = errors.New("topic: invalid topic name")
	ErrInvalidFilter = errors.New("topic: invalid topic filter")
	ErrInvalidShare  = errors.New("topic: invalid shared subscription")
	ErrTooLong       = errors.New("topic: too long")
	ErrTooDeep       = errors.New("topic: too many levels")
)

// MaxLength is the longest topic name or filter MQTT can carry: a UTF-8
// string is prefixed by a two-byte length.
const MaxLength = 65535

// SharePrefix starts every shared subscription filter.
const SharePrefix = "$share/"

// ValidateName checks a topic name as a PUBLISH carries it: non-empty, at
// most MaxLength bytes, valid UTF-8, no U+0000 and no wildcard characters.
func ValidateName(name string) error {
	if err := checkString(name); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidName, err)
	}
	if i := strings.IndexAny(name, "+#"); i >= 0 {
		return fmt.Errorf("%w: wildcard %q at byte %d", ErrInvalidName, name[i], i)
	}
	return nil
}

// ValidateFilter checks a topic filter as a SUBSCRIBE or UNSUBSCRIBE carries
// it: non-empty, at most MaxLength bytes, valid UTF-8, no U+0000; '+' only as
// a whole level; '#' only as the whole last level. A filter starting with
// "$share/" (or equal to "$share") must be a well-formed shared subscription
// (see ParseShared) whose inner filter is valid by the same rules.
func ValidateFilter(filter string) error {
	if err := checkString(filter); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidFilter, err)
	}
	_, inner, shared, err := ParseShared(filter)
	if err != nil {
		return err
	}
	if err := checkWildcards(inner); err != nil {
		if shared {
			return fmt.Errorf("%w: inner filter: %w", ErrInvalidShare, err)
		}
		return err
	}
	return nil
}

// checkString applies the rules common to names and filters.
func checkString(s string) error {
	switch {
	case s == "":
		return errors.New("empty")
	case len(s) > MaxLength:
		return fmt.Errorf("%d bytes (max %d)", len(s), MaxLength)
	case strings.IndexByte(s, 0) >= 0:
		return errors.New("contains U+0000")
	case !utf8.ValidString(s):
		return errors.New("not valid UTF-8")
	}
	return nil
}

// checkWildcards checks wildcard placement in a non-shared filter.
func checkWildcards(f string) error {
	if f == "" {
		return fmt.Errorf("%w: empty", ErrInvalidFilter)
	}
	for i := 0; i < len(f); i++ {
		c := f[i]
		if c != '+' && c != '#' {
			continue
		}
		if i > 0 && f[i-1] != '/' || i+1 < len(f) && f[i+1] != '/' {
			return fmt.Errorf("%w: %q at byte %d is not a whole level", ErrInvalidFilter, c, i)
		}
		if c == '#' && i+1 != len(f) {
			return fmt.Errorf("%w: '#' at byte %d is not the last level", ErrInvalidFilter, i)
		}
	}
	return nil
}

// ParseShared splits a shared subscription filter "$share/{group}/{filter}"
// into its group and inner filter. A filter that does not start with
// "$share/" (and is not exactly "$share") is not shared: it is returned as
// inner with shared false and no error. A shared filter whose group is empty
// or contains '+' or '#', or whose inner filter is empty, is an error
// wrapping ErrInvalidShare. ParseShared checks only this structure; use
// ValidateFilter for the inner filter's wildcards and encoding.
func ParseShared(filter string) (group, inner string, shared bool, err error) {
	if !strings.HasPrefix(filter, SharePrefix) {
		if filter == "$share" {
			return "", "", true, fmt.Errorf("%w: no share name", ErrInvalidShare)
		}
		return "", filter, false, nil
	}
	rest := filter[len(SharePrefix):]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return "", "", true, fmt.Errorf("%w: no filter after the share name", ErrInvalidShare)
	}
	group, inner = rest[:slash], rest[slash+1:]
	switch {
	case group == "":
		return "", "", true, fmt.Errorf("%w: empty share name", ErrInvalidShare)
	case strings.ContainsAny(group, "+#"):
		return "", "", true, fmt.Errorf("%w: wildcard in share name %q", ErrInvalidShare, group)
	case inner == "":
		return "", "", true, fmt.Errorf("%w: empty filter", ErrInvalidShare)
	}
	return group, inner, true, nil
}

// JoinShared builds the shared subscription filter
// "$share/{group}/{filter}" that ParseShared splits: the form a shared group
// is subscribed, announced to other nodes and named in forwarded messages.
func JoinShared(group, filter string) string { return SharePrefix + group + "/" + filter }

// Limits bounds topic names and filters beyond what MQTT allows. A zero
// field means no limit.
type Limits struct {
	MaxLength int // bytes
	MaxLevels int // levels; for a shared filter, levels of the inner filter
}

// Check returns an error wrapping ErrTooLong or ErrTooDeep if s (a name or a
// filter) exceeds l.
func (l Limits) Check(s string) error {
	if l.MaxLength > 0 && len(s) > l.MaxLength {
		return fmt.Errorf("%w: %d bytes (max %d)", ErrTooLong, len(s), l.MaxLength)
	}
	if l.MaxLevels > 0 {
		if _, inner, shared, err := ParseShared(s); shared && err == nil {
			s = inner
		}
		if n := Levels(s); n > l.MaxLevels {
			return fmt.Errorf("%w: %d levels (max %d)", ErrTooDeep, n, l.MaxLevels)
		}
	}
	return nil
}

// Levels returns the number of levels in a topic name or filter: one more
// than the number of '/'.
func Levels(s string) int { return strings.Count(s, "/") + 1 }

// IsDollar reports whether name starts with '$'. Such names are the broker's
// own (for example "$SYS/...") and are not matched by filters starting with
// a wildcard.
func IsDollar(name string) bool { return name != "" && name[0] == '$' }

// IsSys reports whether name is "$SYS" or lies under "$SYS/".
func IsSys(name string) bool { return name == "$SYS" || strings.HasPrefix(name, "$SYS/") }
