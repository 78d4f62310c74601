//go:build !linux

package main

import (
	"errors"
	"os"
)

// Elsewhere than Linux the password is read from standard input as a line
// (pipe it in) or given with --password.
func isTTY(*os.File) bool { return false }

func echoOff(*os.File) (func(), error) {
	return nil, errors.New("reading a password without echo is supported on Linux only")
}
