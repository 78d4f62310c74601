package mqttclient

import "testing"

// FuzzParseURL checks that ParseURL never panics and that an endpoint it
// accepts renders to a URL that parses back to itself.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"localhost", "mqtt://h:1883", "mqtts://[::1]:8883", "ws://h/mqtt", "wss://h:9/a%20b", "tcp://h:0", "h:x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseURL(string(b))
		if err != nil {
			return
		}
		back, err := ParseURL(e.String())
		if err != nil || back != e {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", b, e, e.String(), back, err)
		}
	})
}
