package main

import (
	"fmt"

	"github.com/sextantmq/sextant/internal/buildinfo"
)

// VersionCmd prints the build: version, commit (and whether the tree was
// modified) and Go version, from what Go embedded in the binary.
type VersionCmd struct {
	Short bool `name:"short" help:"Print only the one-word version (as in logs and the admin API)."`
}

func (c VersionCmd) Run(e *env) error {
	in := buildinfo.Read()
	if c.Short {
		fmt.Fprintln(e.stdout, in.Short())
		return nil
	}
	fmt.Fprint(e.stdout, in.String())
	return nil
}
