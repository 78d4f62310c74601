// Package buildinfo owns what a sextant binary knows about its own build:
// the release version (set with -ldflags "-X ...buildinfo.version=v1.2.3"
// by scripts/image.sh, else the module version Go recorded), the commit and
// whether the tree was dirty (from the VCS stamp `go build` embeds), and the
// Go version. `sextant version`, the admin API's status and the
// sextant_build_info metric read it from here.
//
// It is pure apart from reading runtime/debug.ReadBuildInfo once; Parse
// takes that input so that tests can feed it any build. Anyone may import it.
package buildinfo
