package client

import (
	"context"
	"errors"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/netx"
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
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V311, CleanStart: true, KeepAlive: 10, ClientID: "sextant-probe"}
	hello, err := cp.Append(nil, packet.V311)
	if err != nil {
		return false
	}
	head, err := netx.Probe(ctx, hostport, probeTimeout, hello, 1)
	return err == nil && packet.Type(head[0]>>4) == packet.CONNACK
}
