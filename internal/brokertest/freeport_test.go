package brokertest

import "testing"

// FreePort never returns a port twice in one test binary, even though
// nothing binds the ports between the calls: a node's MQTT, cluster and
// admin ports must differ.
func TestFreePortNeverRepeatsAPort(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 { // without the record, two of 1,000 picks from 12,000 ports collide almost surely
		p := FreePort(t, false, "127.0.0.1")
		if seen[p] {
			t.Fatalf("port %s returned twice", p)
		}
		seen[p] = true
	}
}
