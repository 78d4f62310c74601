//go:build unix

package logging

import (
	"os"
	"syscall"
)

// Stderr returns the device and inode of the process's stderr, to compare
// with JOURNAL_STREAM.
func Stderr() (dev, ino uint64, ok bool) {
	fi, err := os.Stderr.Stat()
	if err != nil {
		return 0, 0, false
	}
	st, isUnix := fi.Sys().(*syscall.Stat_t)
	if !isUnix {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true
}
