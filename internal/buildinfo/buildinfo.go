package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// Stamped by the build with -ldflags "-X github.com/sextantmq/sextant/internal/buildinfo.version=..."
// (scripts/image.sh does): the release version, and the commit and dirty
// flag for builds where Go cannot read them itself (a git worktree, or
// GOFLAGS=-buildvcs=false). What Go recorded wins over commit and dirty.
var (
	version = ""
	commit  = ""
	dirty   = ""
)

// Info describes one build of sextant.
type Info struct {
	Version   string // release version, "devel" when none was stamped
	Commit    string // VCS revision, "" when Go recorded none (go run, go test, -buildvcs=false)
	Dirty     bool   // the tree had uncommitted changes when built
	Time      string // commit time (RFC 3339), "" when unknown
	GoVersion string // toolchain that built the binary
}

// Read returns this binary's build information.
func Read() Info {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		bi = &debug.BuildInfo{GoVersion: "unknown"}
	}
	in := Parse(bi, version)
	if in.Commit == "" && commit != "" {
		in.Commit, in.Dirty = commit, dirty == "true"
	}
	return in
}

// Parse extracts Info from Go's embedded build information; stamped, if
// not empty, overrides the module version.
func Parse(bi *debug.BuildInfo, stamped string) Info {
	in := Info{Version: stamped, GoVersion: bi.GoVersion}
	if in.Version == "" && bi.Main.Version != "(devel)" {
		in.Version = bi.Main.Version // go install module@version
	}
	in.Version = orDevel(in.Version)
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			in.Commit = s.Value
		case "vcs.modified":
			in.Dirty = s.Value == "true"
		case "vcs.time":
			in.Time = s.Value
		}
	}
	return in
}

func orDevel(v string) string {
	if v == "" {
		return "devel"
	}
	return v
}

// Short is the one-word form used in logs, $SYS and the admin API:
// "v1.2.3", "devel+3f2a9c1b0d4e" or "devel+3f2a9c1b0d4e-dirty".
func (in Info) Short() string {
	s := in.Version
	// git describe names the commit already (v1.2.3-4-g3f2a9c1-dirty).
	if in.Commit != "" && !strings.Contains(s, in.Commit[:min(7, len(in.Commit))]) {
		s += "+" + shortCommit(in.Commit)
	}
	if in.Dirty && !strings.HasSuffix(s, "-dirty") {
		s += "-dirty"
	}
	return s
}

// String is the multi-line form printed by `sextant version`.
func (in Info) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sextant %s\n", in.Version)
	switch {
	case in.Commit == "":
		b.WriteString("commit:  unknown (built without VCS information, e.g. go run)\n")
	case in.Dirty:
		fmt.Fprintf(&b, "commit:  %s (modified tree)\n", in.Commit)
	default:
		fmt.Fprintf(&b, "commit:  %s\n", in.Commit)
	}
	if in.Time != "" {
		fmt.Fprintf(&b, "date:    %s\n", in.Time)
	}
	fmt.Fprintf(&b, "go:      %s\n", in.GoVersion)
	return b.String()
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
