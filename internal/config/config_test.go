package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultIsValidAndLoopbackOnly(t *testing.T) {
	c := Default()
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
	for _, a := range []string{c.MQTTAddr, c.WSAddr, c.AdminAddr} {
		if !strings.HasPrefix(a, "127.0.0.1:") {
			t.Errorf("default listener %q is not on loopback", a)
		}
	}
	if c.MQTTAddr != "127.0.0.1:1883" || c.DataDir != "./sextant-data" {
		t.Errorf("zero-config start must be 127.0.0.1:1883 with ./sextant-data, got %s %s", c.MQTTAddr, c.DataDir)
	}
}

func TestYAMLKeysEqualFlagNames(t *testing.T) {
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		f := typ.Field(i)
		if f.Tag.Get("name") == "" || f.Tag.Get("name") != f.Tag.Get("yaml") {
			t.Errorf("field %s: name %q and yaml %q must be equal and set", f.Name, f.Tag.Get("name"), f.Tag.Get("yaml"))
		}
		if _, ok := f.Tag.Lookup("default"); !ok {
			t.Errorf("field %s has no default tag", f.Name)
		}
		if f.Tag.Get("help") == "" {
			t.Errorf("field %s has no help", f.Name)
		}
	}
}

func TestDecodeOverlaysAndRejectsUnknownKeys(t *testing.T) {
	c := Default()
	err := Decode(strings.NewReader("mqtt-addr: 0.0.0.0:1884\nconnect-timeout: 3s\nmax-inflight: 10\n"), &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTTAddr != "0.0.0.0:1884" || c.ConnectTimeout != 3*time.Second || c.MaxInflight != 10 {
		t.Fatalf("not applied: %+v", c)
	}
	if c.AdminAddr != "127.0.0.1:8088" {
		t.Fatal("a key absent from the file changed")
	}
	if err := Decode(strings.NewReader("mqtt_addr: x\n"), &c); err == nil {
		t.Fatal("unknown key accepted")
	}
}

func TestValidateReportsEachProblem(t *testing.T) {
	c := Default()
	c.MQTTAddr = "nonsense"
	c.Fsync = "sometimes"
	c.MaxPacketSize = 5
	c.ReceiveMaximum = 0
	err := c.Validate()
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v does not wrap ErrInvalid", err)
	}
	for _, want := range []string{"mqtt-addr", "fsync", "max-packet-size", "receive-maximum"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %s: %v", want, err)
		}
	}
}

func TestEmptyAddressDisablesListener(t *testing.T) {
	c := Default()
	c.WSAddr, c.AdminAddr = "", ""
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	c.MQTTAddr = ""
	if err := c.Validate(); err == nil {
		t.Fatal("a node with no client listener validated")
	}
}

func TestCopyField(t *testing.T) {
	dst, src := Default(), Default()
	src.MaxKeepAlive = 30
	if !CopyField(&dst, &src, "max-keepalive") || dst.MaxKeepAlive != 30 {
		t.Fatal("CopyField did not copy")
	}
	if CopyField(&dst, &src, "no-such") {
		t.Fatal("CopyField invented a field")
	}
}

// TestDecodeErrorsNameKeyAndForm: each bad value is reported with its line,
// its key and the form it must take, all of them at once, and every error
// matches ErrInvalid; a list may be one comma-separated value.
func TestDecodeErrorsNameKeyAndForm(t *testing.T) {
	c := Default()
	err := Decode(strings.NewReader("max-inflight: many\nadmin-tls: maybe\nmqtt-adr: x\nsys-interval: 5\n"), &c)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v does not match ErrInvalid", err)
	}
	for _, want := range []string{
		`line 1: max-inflight: "many" is not a whole number from 0 to 65535`,
		`line 2: admin-tls: "maybe" is not true or false`,
		`line 3: unknown key "mqtt-adr"; did you mean mqtt-addr?`,
		`line 4: sys-interval: "5" is not a duration`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	c = Default()
	if err := Decode(strings.NewReader("join: 10.0.0.1:7946, 10.0.0.2:7946\n"), &c); err != nil || len(c.Join) != 2 || c.Join[1] != "10.0.0.2:7946" {
		t.Fatalf("join as one value: %q %v", c.Join, err)
	}
	if err := Decode(strings.NewReader("join: [10.0.0.3:7946]\nnode-id:\n"), &c); err != nil || len(c.Join) != 1 || c.NodeID != "" {
		t.Fatalf("join as a list, an empty node-id: %q %q %v", c.Join, c.NodeID, err)
	}
}

func TestPlacementKeys(t *testing.T) {
	c := Default()
	if c.PlacementPolicy != "center" || c.PlacementInterval != 5*time.Second || c.PlacementOverload != 85 ||
		c.PlacementConfirm != 3 || c.PlacementCooldown != 30*time.Second || c.PlacementMargin != 2*time.Millisecond {
		t.Fatalf("defaults: %+v", c)
	}
	for key, mutate := range map[string]func(*Config){
		"placement-policy":           func(c *Config) { c.PlacementPolicy = "oracle" },
		"placement-interval":         func(c *Config) { c.PlacementInterval = time.Millisecond },
		"placement-overload-percent": func(c *Config) { c.PlacementOverload = 120 },
		"placement-margin-percent":   func(c *Config) { c.PlacementMarginPc = -1 },
		"placement-confirm":          func(c *Config) { c.PlacementConfirm = 0 },
		"placement-executors":        func(c *Config) { c.PlacementExecutors = 0 },
		"placement-cooldown":         func(c *Config) { c.PlacementCooldown = -time.Second },
		"placement-network-capacity": func(c *Config) { c.PlacementNetwork = -1 },
	} {
		c := Default()
		mutate(&c)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), key) {
			t.Errorf("%s: %v", key, err)
		}
	}
	if err := Decode(strings.NewReader("placement-policy: allpairs\nplacement-network-capacity: 125000000\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.PlacementPolicy != "allpairs" || c.PlacementNetwork != 125_000_000 {
		t.Fatalf("not applied: %+v", c)
	}
}

func TestReplicationPipelineKey(t *testing.T) {
	if c := Default(); c.ReplicationPipeline != 4 {
		t.Fatalf("default replication-pipeline %d, want 4 (the engine's own default)", c.ReplicationPipeline)
	}
	for _, n := range []int{0, -1, 65} {
		c := Default()
		c.ReplicationPipeline = n
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "replication-pipeline") {
			t.Errorf("replication-pipeline %d: %v", n, err)
		}
	}
	c := Default()
	if err := Decode(strings.NewReader("replication-pipeline: 64\n"), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil || c.ReplicationPipeline != 64 {
		t.Fatalf("replication-pipeline 64: %d, %v", c.ReplicationPipeline, err)
	}
}

func TestGroupRecentBytesKey(t *testing.T) {
	if c := Default(); c.GroupRecentBytes != 1<<20 {
		t.Fatalf("default group-recent-bytes %d, want 1 MiB (the sequencer's own default)", c.GroupRecentBytes)
	}
	for _, n := range []int64{-1, 1<<30 + 1} {
		c := Default()
		c.GroupRecentBytes = n
		if err := c.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "group-recent-bytes") {
			t.Errorf("group-recent-bytes %d: %v", n, err)
		}
	}
	c := Default()
	c.GroupRecentBytes = 0
	if err := c.Validate(); err != nil {
		t.Fatalf("group-recent-bytes 0 (keep none): %v", err)
	}
}
