package topic

import (
	"regexp"
	"strings"
	"testing"
)

// regexpMatch is a second, independent matcher: it compiles the filter to a
// regular expression. The fuzz targets check Match against it.
func regexpMatch(filter, name string) bool {
	if strings.HasPrefix(name, "$") && (strings.HasPrefix(filter, "+") || strings.HasPrefix(filter, "#")) {
		return false
	}
	var b strings.Builder
	b.WriteString(`(?s)^`)
	levels := strings.Split(filter, "/")
	for i, l := range levels {
		switch {
		case l == "#" && i == 0:
			b.WriteString(`.*`)
		case l == "#":
			// "a/#": the parent alone, or the parent and a '/' and anything.
			b.WriteString(`(?:/.*)?`)
		default:
			if i > 0 {
				b.WriteString(`/`)
			}
			if l == "+" {
				b.WriteString(`[^/]*`)
			} else {
				b.WriteString(regexp.QuoteMeta(l))
			}
		}
	}
	b.WriteString(`$`)
	return regexp.MustCompile(b.String()).MatchString(name)
}

// FuzzValidateFilter checks that validation never panics and that what it
// accepts has the shape it promises.
func FuzzValidateFilter(f *testing.F) {
	for _, c := range matchCases {
		f.Add([]byte(c.filter))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		filter := string(b)
		err := ValidateFilter(filter)
		if err != nil {
			return
		}
		group, inner, shared, perr := ParseShared(filter)
		if perr != nil {
			t.Fatalf("ValidateFilter accepted %q but ParseShared says %v", filter, perr)
		}
		if shared && (group == "" || strings.ContainsAny(group, "+#/")) {
			t.Fatalf("accepted share name %q in %q", group, filter)
		}
		for i, l := range strings.Split(inner, "/") {
			if strings.ContainsAny(l, "+#") && l != "+" && l != "#" {
				t.Fatalf("accepted level %q in %q", l, filter)
			}
			if l == "#" && i != Levels(inner)-1 {
				t.Fatalf("accepted '#' before the last level in %q", filter)
			}
		}
		if !strings.ContainsAny(inner, "+#") {
			// A filter without wildcards is a valid name and matches itself.
			if err := ValidateName(inner); err != nil {
				t.Fatalf("wildcard-free filter %q is not a valid name: %v", inner, err)
			}
			if !Match(inner, inner) {
				t.Fatalf("%q does not match itself", inner)
			}
		}
	})
}

// FuzzParseShared checks that a shared filter splits into parts that
// reassemble into it.
func FuzzParseShared(f *testing.F) {
	f.Add([]byte("$share/g/a/b"))
	f.Add([]byte("$share//a"))
	f.Fuzz(func(t *testing.T, b []byte) {
		filter := string(b)
		group, inner, shared, err := ParseShared(filter)
		switch {
		case err != nil:
			if !shared {
				t.Fatalf("error %v for a filter reported not shared", err)
			}
		case shared:
			if SharePrefix+group+"/"+inner != filter {
				t.Fatalf("ParseShared(%q) = %q, %q: does not reassemble", filter, group, inner)
			}
			if group == "" || inner == "" || strings.ContainsAny(group, "+#/") {
				t.Fatalf("ParseShared(%q) = %q, %q: bad parts accepted", filter, group, inner)
			}
		default:
			if inner != filter || strings.HasPrefix(filter, SharePrefix) {
				t.Fatalf("ParseShared(%q) = not shared, inner %q", filter, inner)
			}
		}
	})
}

// FuzzMatch checks Match against regexpMatch on valid filter/name pairs.
func FuzzMatch(f *testing.F) {
	for _, c := range matchCases {
		f.Add(c.filter, c.name)
	}
	f.Fuzz(func(t *testing.T, filter, name string) {
		if ValidateFilter(filter) != nil || ValidateName(name) != nil {
			return
		}
		if _, _, shared, _ := ParseShared(filter); shared {
			return
		}
		if got, want := Match(filter, name), regexpMatch(filter, name); got != want {
			t.Fatalf("Match(%q, %q) = %v, regexp oracle says %v", filter, name, got, want)
		}
	})
}
