package client

import (
	"context"
	"errors"
	"net"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// ErrNotAdminAPI: what answered at the address is not an admin API.
var ErrNotAdminAPI = errors.New("client: not an admin API")

// probeTimeout bounds the MQTT probe after a failed request.
const probeTimeout = 2 * time.Second

// speaksMQTT reports whether an MQTT broker answers at hostport, after a
// request there failed (a broker closes the connection on an HTTP request
// without an answer, which alone would say nothing): it sends a CONNECT
// and looks for a CONNACK.
func speaksMQTT(ctx context.Context, hostport string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", hostport)
	if err != nil {
		return false
	}
	defer conn.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, CleanStart: true, KeepAlive: 10, ClientID: "sextant-probe"}
	b, err := cp.Append(nil, packet.V311)
	if err != nil {
		return false
	}
	if _, err := conn.Write(b); err != nil {
		return false
	}
	r := packet.NewReader(conn, 0)
	r.SetVersion(packet.V311)
	p, err := r.Next()
	if err != nil {
		return false
	}
	if _, ok := p.(*packet.Connack); !ok {
		return false
	}
	if d, err := (&packet.Disconnect{}).Append(nil, packet.V311); err == nil {
		_, _ = conn.Write(d)
	}
	return true
}
