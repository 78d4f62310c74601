package node

import (
	"net"
	"testing"

	"github.com/sextantmq/sextant/internal/config"
)

// TestSysAccessByAddress: without an ACL, sys-access loopback lets only
// clients on loopback read $SYS/, all lets everyone, none nobody; nobody
// may publish into it.
func TestSysAccessByAddress(t *testing.T) {
	loop := &net.TCPAddr{IP: net.ParseIP("127.0.0.2"), Port: 5000}
	lan := &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5000}
	for _, c := range []struct {
		access  string
		addr    net.Addr
		canRead bool
	}{
		{"loopback", loop, true}, {"loopback", lan, false}, {"all", lan, true}, {"none", loop, false},
	} {
		cfg := config.Default()
		cfg.SysAccess = c.access
		sa := newSessionAuth(nil, cfg, nil, nil)
		r := sa.withoutACL(c.addr)
		got := r != nil && r.CanSubscribe("$SYS/#")
		if got != c.canRead {
			t.Errorf("sys-access %s, client %v: reads $SYS/ %v, want %v", c.access, c.addr, got, c.canRead)
		}
		if r != nil && (r.CanPublish("$SYS/broker/uptime") || !r.CanPublish("a/b") || !r.CanSubscribe("#") || !r.CanReceive("a")) {
			t.Errorf("sys-access %s: rights beyond $SYS/ reading changed", c.access)
		}
	}
}
