package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestFromEnvTyped(t *testing.T) {
	c := Default()
	unknown, err := FromEnv([]string{
		"PATH=/bin",
		"SEXTANT_MQTT_ADDR=0.0.0.0:1883",
		"SEXTANT_WS_ADDR=",
		"SEXTANT_JOIN=10.0.0.1:7946, 10.0.0.2:7946,",
		"SEXTANT_DRAIN_TIMEOUT=20s",
		"SEXTANT_MAX_INFLIGHT=64",
		"SEXTANT_CLUSTER_TLS=true",
		"SEXTANT_TOKEN=for-the-client",
		"SEXTANT_MQTT_ADR=typo:1",
	}, &c)
	if err != nil {
		t.Fatal(err)
	}
	if c.MQTTAddr != "0.0.0.0:1883" || c.WSAddr != "" || c.DrainTimeout != 20*time.Second || c.MaxInflight != 64 || !c.ClusterTLS {
		t.Fatalf("not applied: %+v", c)
	}
	if !reflect.DeepEqual(c.Join, []string{"10.0.0.1:7946", "10.0.0.2:7946"}) {
		t.Fatalf("join %q", c.Join)
	}
	if !reflect.DeepEqual(unknown, []string{"SEXTANT_MQTT_ADR"}) {
		t.Fatalf("unknown %q (SEXTANT_TOKEN belongs to the client commands)", unknown)
	}
	if c.AdminAddr != "127.0.0.1:8088" {
		t.Fatal("a key absent from the environment changed")
	}
}

func TestFromEnvRejectsBadValues(t *testing.T) {
	c := Default()
	_, err := FromEnv([]string{"SEXTANT_MAX_INFLIGHT=lots", "SEXTANT_CONNECT_TIMEOUT=3", "SEXTANT_LIMIT_LOOPBACK=", "SEXTANT_MAX_KEEPALIVE=70000"}, &c)
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("err %v", err)
	}
	for _, want := range []string{"SEXTANT_MAX_INFLIGHT", "SEXTANT_CONNECT_TIMEOUT", "SEXTANT_LIMIT_LOOPBACK", "SEXTANT_MAX_KEEPALIVE"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not name %s: %v", want, err)
		}
	}
}

// Every key has a variable, and no two keys share one.
func TestEnvNamesAreDistinct(t *testing.T) {
	seen := map[string]string{}
	typ := reflect.TypeOf(Config{})
	for i := 0; i < typ.NumField(); i++ {
		name := typ.Field(i).Tag.Get("name")
		e := EnvName(name)
		if prev, dup := seen[e]; dup {
			t.Errorf("%s and %s both map to %s", prev, name, e)
		}
		seen[e] = name
	}
	if EnvName("mqtt-addr") != "SEXTANT_MQTT_ADDR" {
		t.Fatal(EnvName("mqtt-addr"))
	}
}
