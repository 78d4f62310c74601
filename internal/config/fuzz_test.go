package config

import (
	"bytes"
	"testing"
)

// FuzzDecode feeds arbitrary YAML to the config decoder: it must return a
// config or an error, never panic, and a decoded config either validates or
// reports ErrInvalid.
func FuzzDecode(f *testing.F) {
	f.Add([]byte("mqtt-addr: 0.0.0.0:1883\nfsync: batch\nfsync-interval: 50ms\n"))
	f.Add([]byte("join: [127.0.0.1:7946, 127.0.0.2:7946]\ntier: edge\n"))
	f.Add([]byte("max-packet-size: -1\n"))
	f.Add([]byte("{}"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Default()
		if err := Decode(bytes.NewReader(b), &c); err != nil {
			return
		}
		_ = c.Validate()
	})
}
