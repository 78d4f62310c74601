package buildinfo

import (
	"runtime/debug"
	"strings"
	"testing"
)

func TestParseStampedRelease(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "3f2a9c1b0d4e5f60718293a4b5c6d7e8f9012345"},
		{Key: "vcs.modified", Value: "false"},
		{Key: "vcs.time", Value: "2025-01-02T03:04:05Z"},
	}}
	in := Parse(bi, "v1.2.3")
	if in.Version != "v1.2.3" || in.Commit != "3f2a9c1b0d4e5f60718293a4b5c6d7e8f9012345" || in.Dirty || in.GoVersion != "go1.26.0" {
		t.Fatalf("%+v", in)
	}
	if got := in.Short(); got != "v1.2.3+3f2a9c1b0d4e" {
		t.Fatalf("Short = %q", got)
	}
	s := in.String()
	for _, want := range []string{"sextant v1.2.3\n", "commit:  3f2a9c1b0d4e5f60718293a4b5c6d7e8f9012345\n", "go:      go1.26.0\n", "date:    2025-01-02T03:04:05Z"} {
		if !strings.Contains(s, want) {
			t.Errorf("String() lacks %q:\n%s", want, s)
		}
	}
}

func TestParseDirtyDevelBuild(t *testing.T) {
	bi := &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc"}, {Key: "vcs.modified", Value: "true"},
	}}
	in := Parse(bi, "")
	if in.Version != "devel" || !in.Dirty || in.Short() != "devel+abc-dirty" {
		t.Fatalf("%+v %q", in, in.Short())
	}
	if !strings.Contains(in.String(), "abc (modified tree)") {
		t.Fatal(in.String())
	}
}

// Under go run (and go test) Go records no VCS stamp: the output says so
// instead of printing an empty commit.
func TestParseGoRun(t *testing.T) {
	in := Parse(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}}, "")
	if in.Version != "devel" || in.Commit != "" || in.Short() != "devel" {
		t.Fatalf("%+v", in)
	}
	if !strings.Contains(in.String(), "commit:  unknown") {
		t.Fatal(in.String())
	}
}

func TestShortWithGitDescribe(t *testing.T) {
	in := Info{Version: "v1.2.3-4-g3f2a9c1-dirty", Commit: "3f2a9c1b0d4e5f60718293a4b5c6d7e8f9012345", Dirty: true}
	if got := in.Short(); got != "v1.2.3-4-g3f2a9c1-dirty" {
		t.Fatalf("Short = %q", got)
	}
}

func TestParseModuleVersion(t *testing.T) {
	in := Parse(&debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.4.0"}}, "")
	if in.Version != "v0.4.0" {
		t.Fatalf("%+v", in)
	}
}

func TestReadInThisTestBinary(t *testing.T) {
	in := Read()
	if in.GoVersion == "" || in.Version == "" {
		t.Fatalf("%+v", in)
	}
}
