package client_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/sextantmq/sextant/internal/adminapi/client"
	"github.com/sextantmq/sextant/internal/brokertest"
)

// TestMQTTPortIsNamed: the admin client pointed at a node's MQTT port
// says it reached MQTT and where the admin API is.
func TestMQTTPortIsNamed(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	_, err := client.New(n.MQTT(), "").Nodes(context.Background())
	if !errors.Is(err, client.ErrNotAdminAPI) || !strings.Contains(err.Error(), "answers MQTT") || !strings.Contains(err.Error(), "admin-addr") {
		t.Fatalf("got %v; want ErrNotAdminAPI naming MQTT and admin-addr", err)
	}
	if _, err := client.New(n.Addr("admin"), "").Nodes(context.Background()); err != nil {
		t.Fatalf("the admin address: %v", err)
	}
}
