package adminapi

import (
	"net/http"
	"sort"
)

// ClientInfo is one entry of GET /v1/clients.
type ClientInfo struct {
	ID       string `json:"client_id"`
	Remote   string `json:"remote"`
	Protocol string `json:"protocol"`
	// RTTms is the client's round trip: with source tcp_info the smallest
	// the kernel measured on the connection (the network's delay, stable;
	// placement uses it), with puback the smoothed PUBLISH->PUBACK time.
	RTTms         float64 `json:"rtt_ms,omitempty"`
	RTTSource     string  `json:"rtt_source,omitempty"` // tcp_info or puback
	Subscriptions int     `json:"subscriptions"`
	Persistent    bool    `json:"persistent"`
	// Coordinate is the client's network coordinate for placement: its
	// access node's Vivaldi coordinate with the client's RTT added to the
	// height (nodes that run alone have none).
	Coordinate *Coordinate `json:"coordinate,omitempty"`
}

// Clients lists connected clients.
type Clients interface {
	Clients() []ClientInfo
}

// WithClients adds GET /v1/clients.
func (s *Server) WithClients(c Clients) *Server {
	s.mux.HandleFunc("GET /v1/clients", func(w http.ResponseWriter, r *http.Request) {
		cs := c.Clients()
		sort.Slice(cs, func(i, j int) bool { return cs[i].ID < cs[j].ID })
		writeJSON(w, http.StatusOK, nonNil(cs))
	})
	return s
}
