package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestClientRTTFromTCPInfo checks that the node measures a connected
// client's round-trip time without the client's help and serves it on
// /v1/clients.
func TestClientRTTFromTCPInfo(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	c := n.ConnectV5(&paho.Connect{ClientID: "drone-7", CleanStart: true, KeepAlive: 30})
	c.Sub("swarm/7/#", 1)
	req, _ := http.NewRequestWithContext(context.Background(), "GET", "http://"+n.Addr("admin")+"/v1/clients", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var cs []adminapi.ClientInfo
	if err := json.NewDecoder(res.Body).Decode(&cs); err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].ID != "drone-7" || cs[0].Subscriptions != 1 || cs[0].Protocol == "" {
		t.Fatalf("clients: %+v", cs)
	}
	if cs[0].RTTSource != "tcp_info" || cs[0].RTTms <= 0 {
		t.Fatalf("client RTT not measured from TCP_INFO: %+v", cs[0])
	}
}
