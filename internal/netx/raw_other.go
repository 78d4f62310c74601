//go:build !linux

package netx

import "net"

// RawTCP returns c: raw system calls are used on Linux only.
func RawTCP(c net.Conn) net.Conn { return c }
