//go:build !linux

package session

import "net"

// rawSock is the fast socket path, available on Linux only: elsewhere every
// connection reads with net.Conn.Read and writes through its writer
// goroutine.
type rawSock struct{}

func newRawSock(net.Conn) *rawSock { return nil }

func (*rawSock) Read([]byte) (int, error) { panic("session: no raw socket off Linux") }

func (*rawSock) TryWrite([]byte) (int, error) { panic("session: no raw socket off Linux") }
