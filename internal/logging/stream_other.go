//go:build !unix

package logging

// Stderr reports that the stream cannot be identified here (no journal).
func Stderr() (dev, ino uint64, ok bool) { return 0, 0, false }
