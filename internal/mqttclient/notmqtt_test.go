package mqttclient_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/mqttclient"
)

// TestHTTPServerIsNamed: a client pointed at an HTTP port (a node's admin
// API, say) is told it reached HTTP and where MQTT is, not only that the
// answer was malformed.
func TestHTTPServerIsNamed(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	_, err := mqttclient.Dial(ctx, srv.Listener.Addr().String(), mqttclient.Options{ClientID: "x"})
	if !errors.Is(err, mqttclient.ErrNotMQTT) || !strings.Contains(err.Error(), "HTTP") || !strings.Contains(err.Error(), "1883") {
		t.Fatalf("got %v; want ErrNotMQTT naming HTTP and the MQTT port", err)
	}
}
