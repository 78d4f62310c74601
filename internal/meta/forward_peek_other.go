//go:build !unix

package meta

import "net"

// peekOpen cannot ask the socket on this platform: the caller's deadline
// probe decides.
func peekOpen(net.Conn) (alive, ok bool) { return false, false }
