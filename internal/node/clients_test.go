package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/eclipse/paho.golang/paho"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
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

// TestClientCoordinate checks that a clustered node gives each client a
// coordinate: its own Vivaldi coordinate with the client's RTT in the height.
func TestClientCoordinate(t *testing.T) {
	n := brokertest.Start(t, clusterConfig(t, "cc1"))
	c := n.ConnectV5(&paho.Connect{ClientID: "game-server-3", CleanStart: true, KeepAlive: 30})
	c.Sub("avatar/#", 0)
	cs := clientList(t, n)
	if len(cs) != 1 || cs[0].Coordinate == nil {
		t.Fatalf("no client coordinate: %+v", cs)
	}
	var self *adminapi.Coordinate
	for _, m := range n.Nodes() {
		if m.ID == "cc1" {
			self = m.Coordinate
		}
	}
	if self == nil {
		t.Fatal("node has no coordinate")
	}
	// The RTT is added to the height, in seconds; the vector is the node's.
	want := self.Height + cs[0].RTTms/1000
	if d := cs[0].Coordinate.Height - want; d < -1e-6 || d > 1e-3 {
		t.Fatalf("client height %v, want node height %v + rtt %v ms", cs[0].Coordinate.Height, self.Height, cs[0].RTTms)
	}
}

func clientList(t *testing.T, n *brokertest.Node) []adminapi.ClientInfo {
	t.Helper()
	var cs []adminapi.ClientInfo
	if err := getJSON("http://"+n.Addr("admin")+"/v1/clients", &cs); err != nil {
		t.Fatal(err)
	}
	return cs
}

func adminDo(t *testing.T, n *brokertest.Node, method, path string) int {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), method, "http://"+n.Addr("admin")+path, nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestKickAndDiscardSession: an operator's disconnect reaches an MQTT 5
// client as DISCONNECT 0x98 and leaves its persistent session for its
// return; discarding the session ends it, offline or not.
func TestKickAndDiscardSession(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	cp := login(packet.V5, "kicked", "", "")
	cp.CleanStart = false
	cp.Props.SetSessionExpiry(3600)
	r := connectOK(t, n.Raw(packet.V5), cp)
	r.Subscribe(1, sub("k/#", 1))
	if code := adminDo(t, n, "DELETE", "/v1/clients/kicked"); code != 200 {
		t.Fatalf("kick: HTTP %d", code)
	}
	r.ExpectDisconnect(packet.AdministrativeAction)
	n.WaitSessions(0, 1)
	var d adminapi.ClientDetail
	if err := getJSON("http://"+n.Addr("admin")+"/v1/clients/kicked", &d); err != nil || d.Online || len(d.Subscriptions) != 1 {
		t.Fatalf("after the kick: %+v %v", d, err)
	}
	if code := adminDo(t, n, "DELETE", "/v1/sessions/kicked"); code != 200 {
		t.Fatalf("discard: HTTP %d", code)
	}
	n.WaitSessions(0, 0)
	if code := adminDo(t, n, "GET", "/v1/clients/kicked"); code != 404 {
		t.Fatalf("the discarded session still answers: HTTP %d", code)
	}
	if code := adminDo(t, n, "DELETE", "/v1/sessions/kicked"); code != 404 {
		t.Fatalf("discarding it again: HTTP %d", code)
	}
}
