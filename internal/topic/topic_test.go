package topic

import (
	"errors"
	"strings"
	"testing"
)

func TestValidateName(t *testing.T) {
	cases := []struct {
		name string
		want error
	}{
		{"a", nil},
		{"a/b/c", nil},
		{"/", nil},
		{"a//b", nil},
		{"$SYS/broker/uptime", nil},
		{"sport/tennis/player1", nil},
		{"ünïcode/топик", nil},
		{strings.Repeat("a", MaxLength), nil},
		{"", ErrInvalidName},
		{"a/+", ErrInvalidName},
		{"a/#", ErrInvalidName},
		{"a+b", ErrInvalidName},
		{"a\x00b", ErrInvalidName},
		{"a\xffb", ErrInvalidName},
		{"\xed\xa0\x80", ErrInvalidName}, // UTF-16 surrogate encoded in UTF-8
		{strings.Repeat("a", MaxLength+1), ErrInvalidName},
	}
	for _, c := range cases {
		if err := ValidateName(c.name); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("ValidateName(%.40q) = %v, want %v", c.name, err, c.want)
		}
	}
}

func TestValidateFilter(t *testing.T) {
	cases := []struct {
		filter string
		want   error
	}{
		{"a", nil},
		{"#", nil},
		{"+", nil},
		{"a/#", nil},
		{"+/+", nil},
		{"+/#", nil},
		{"/+", nil},
		{"a//+/#", nil},
		{"$SYS/#", nil},
		{"$share/g/a/+", nil},
		{"$share/g/#", nil},
		{"$share/g//", nil},
		{"$sharex/a", nil},  // not a shared filter
		{"a/$share/g", nil}, // nor is this
		{"", ErrInvalidFilter},
		{"a#", ErrInvalidFilter},
		{"#a", ErrInvalidFilter},
		{"a/#/b", ErrInvalidFilter},
		{"#/", ErrInvalidFilter},
		{"a+", ErrInvalidFilter},
		{"+a", ErrInvalidFilter},
		{"a/b+/c", ErrInvalidFilter},
		{"++", ErrInvalidFilter},
		{"a\x00", ErrInvalidFilter},
		{"\xc3", ErrInvalidFilter},
		{strings.Repeat("a", MaxLength+1), ErrInvalidFilter},
		{"$share", ErrInvalidShare},
		{"$share/", ErrInvalidShare},
		{"$share/g", ErrInvalidShare},
		{"$share/g/", ErrInvalidShare},
		{"$share//a", ErrInvalidShare},
		{"$share/g+/a", ErrInvalidShare},
		{"$share/#/a", ErrInvalidShare},
		{"$share/g/a#", ErrInvalidShare},
		{"$share/g/a#", ErrInvalidFilter}, // the inner error is wrapped too
		{"$share/g/#/a", ErrInvalidShare},
	}
	for _, c := range cases {
		if err := ValidateFilter(c.filter); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("ValidateFilter(%.40q) = %v, want %v", c.filter, err, c.want)
		}
	}
}

func TestParseShared(t *testing.T) {
	cases := []struct {
		filter, group, inner string
		shared, bad          bool
	}{
		{"a/b", "", "a/b", false, false},
		{"$SYS/x", "", "$SYS/x", false, false},
		{"$share/g/a/b", "g", "a/b", true, false},
		{"$share/g/$share/h/x", "g", "$share/h/x", true, false},
		{"$share/group-1/#", "group-1", "#", true, false},
		{"$share", "", "", true, true},
		{"$share/g", "", "", true, true},
		{"$share//x", "", "", true, true},
		{"$share/g/", "", "", true, true},
		{"$share/+/x", "", "", true, true},
	}
	for _, c := range cases {
		g, in, sh, err := ParseShared(c.filter)
		if g != c.group || in != c.inner || sh != c.shared || (err != nil) != c.bad {
			t.Errorf("ParseShared(%q) = %q, %q, %v, %v; want %q, %q, %v, bad=%v", c.filter, g, in, sh, err, c.group, c.inner, c.shared, c.bad)
		}
		if err != nil && !errors.Is(err, ErrInvalidShare) {
			t.Errorf("ParseShared(%q) error %v does not wrap ErrInvalidShare", c.filter, err)
		}
	}
}

func TestLimits(t *testing.T) {
	l := Limits{MaxLength: 10, MaxLevels: 3}
	cases := []struct {
		s    string
		want error
	}{
		{"a/b/c", nil},
		{"a/b/c/d", ErrTooDeep},
		{"//", nil},
		{"///", ErrTooDeep},
		{"0123456789", nil},
		{"0123456789a", ErrTooLong},
	}
	for _, c := range cases {
		if err := l.Check(c.s); !errors.Is(err, c.want) || (c.want == nil) != (err == nil) {
			t.Errorf("Check(%q) = %v, want %v", c.s, err, c.want)
		}
	}
	if err := (Limits{}).Check(strings.Repeat("a/", 1000)); err != nil {
		t.Errorf("zero Limits rejected: %v", err)
	}
	// Shared filters count the levels of the inner filter only.
	if err := (Limits{MaxLevels: 2}).Check("$share/g/a/b"); err != nil {
		t.Errorf("shared filter with 2 inner levels: %v", err)
	}
	if err := (Limits{MaxLevels: 2}).Check("$share/g/a/b/c"); !errors.Is(err, ErrTooDeep) {
		t.Errorf("shared filter with 3 inner levels: %v", err)
	}
}

func TestDollarAndSys(t *testing.T) {
	for name, want := range map[string][2]bool{
		"$SYS":           {true, true},
		"$SYS/uptime":    {true, true},
		"$SYSTEM/x":      {true, false},
		"$share/g/x":     {true, false},
		"a/$SYS":         {false, false},
		"SYS/x":          {false, false},
		"":               {false, false},
		"$":              {true, false},
		"$SYS/":          {true, true},
		"$sys/lowercase": {true, false},
	} {
		if got := [2]bool{IsDollar(name), IsSys(name)}; got != want {
			t.Errorf("%q: IsDollar, IsSys = %v, want %v", name, got, want)
		}
	}
}

// matchCases are the MQTT specification's examples (4.7) and the edge cases
// the router and retained index must agree on.
var matchCases = []struct {
	filter, name string
	want         bool
}{
	{"sport/tennis/player1/#", "sport/tennis/player1", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/ranking", true},
	{"sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", true},
	{"sport/#", "sport", true},
	{"#", "sport/tennis", true},
	{"#", "/", true},
	{"sport/tennis/#", "sport/tennis", true},
	{"sport/tennis/#", "sport/tennisx", false},
	{"sport/tennis/+", "sport/tennis/player1", true},
	{"sport/tennis/+", "sport/tennis/player1/ranking", false},
	{"sport/+", "sport", false},
	{"sport/+", "sport/", true},
	{"+", "sport", true},
	{"+", "", true},
	{"+", "/", false},
	{"+/+", "/finance", true},
	{"/+", "/finance", true},
	{"+", "/finance", false},
	{"+/+/+", "a//c", true},
	{"a/+/c", "a//c", true},
	{"a/+/#", "a/b", true},
	{"a/+/#", "a", false},
	{"a/b", "a/b", true},
	{"a/b", "a/b/", false},
	{"a/b/", "a/b", false},
	{"a/b", "a", false},
	{"a", "a/b", false},
	{"#", "$SYS/uptime", false},
	{"+/uptime", "$SYS/uptime", false},
	{"+", "$SYS", false},
	{"#", "$SYS", false},
	{"$SYS/#", "$SYS/uptime", true},
	{"$SYS/#", "$SYS", true},
	{"$SYS/+", "$SYS/uptime", true},
	{"$SYS", "$SYS", true},
	{"a/#", "$a", false},
	{"$a/+", "$a/b", true},
	{"a/+", "a/$b", true}, // only the first level is special
	{"a/#", "a/$b/c", true},
}

func TestMatch(t *testing.T) {
	for _, c := range matchCases {
		if got := Match(c.filter, c.name); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.filter, c.name, got, c.want)
		}
		if got := regexpMatch(c.filter, c.name); got != c.want {
			t.Errorf("regexpMatch(%q, %q) = %v, want %v (the fuzz oracle is wrong)", c.filter, c.name, got, c.want)
		}
	}
}

// TestOverlapAgainstNames: Overlap(a, b) holds exactly when some name of a
// small alphabet (levels "", "x", "y", "$s"; up to three levels) matches
// both filters, for every pair of filters over those levels and "+", "#".
func TestOverlapAgainstNames(t *testing.T) {
	levels := []string{"", "x", "y", "$s"}
	var names []string
	var grow func(prefix string, depth int)
	grow = func(prefix string, depth int) {
		if depth == 3 {
			return
		}
		for _, l := range levels {
			n := l
			if depth > 0 {
				n = prefix + "/" + l
			}
			names = append(names, n)
			grow(n, depth+1)
		}
	}
	grow("", 0)
	var filters []string
	var growF func(prefix string, depth int)
	growF = func(prefix string, depth int) {
		if depth == 3 {
			return
		}
		for _, l := range []string{"x", "y", "$s", "", "+", "#"} {
			f := l
			if depth > 0 {
				f = prefix + "/" + l
			}
			if ValidateFilter(f) != nil {
				continue
			}
			filters = append(filters, f)
			if l != "#" {
				growF(f, depth+1)
			}
		}
	}
	growF("", 0)
	for _, a := range filters {
		for _, b := range filters {
			want := false
			for _, n := range names {
				if Match(a, n) && Match(b, n) {
					want = true
					break
				}
			}
			if got := Overlap(a, b); got != want {
				t.Fatalf("Overlap(%q, %q) = %v, want %v", a, b, got, want)
			}
		}
	}
}
