package packettest

import (
	"testing"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func TestVectorsParse(t *testing.T) {
	names := map[string]bool{}
	for _, v := range All() {
		if names[v.Name] {
			t.Errorf("duplicate vector name %q", v.Name)
		}
		names[v.Name] = true
		if _, err := ParseHex(v.Hex); err != nil {
			t.Errorf("%s: %v", v.Name, err)
		}
		if (v.Packet == nil) == v.Valid() {
			t.Errorf("%s: a vector has either a Packet or an Err", v.Name)
		}
	}
	if n := len(Invalid()); n < 60 {
		t.Errorf("%d invalid vectors, want at least 60", n)
	}
}

func TestParseHex(t *testing.T) {
	got, err := ParseHex("10 0f // comment \"x\"\n\"a\\x00b\" 0a0B // end")
	if err != nil {
		t.Fatal(err)
	}
	want := []byte{0x10, 0x0f, 'a', 0, 'b', 0x0a, 0x0b}
	if string(got) != string(want) {
		t.Fatalf("got % x, want % x", got, want)
	}
	for _, bad := range []string{"1", "zz", `"open`, "0g"} {
		if _, err := ParseHex(bad); err == nil {
			t.Errorf("ParseHex(%q) succeeded", bad)
		}
	}
}

// TestCoverage checks that the valid vectors cover every packet type in
// both versions and every property.
func TestCoverage(t *testing.T) {
	types := map[packet.Version]map[packet.Type]bool{packet.V311: {}, packet.V5: {}}
	var props packet.PropSet
	add := func(p *packet.Properties) {
		props |= p.Present
		if len(p.User) > 0 {
			props |= 1 << packet.PropUser
		}
		if len(p.SubscriptionIDs) > 0 {
			props |= 1 << packet.PropSubscriptionID
		}
	}
	for _, v := range Valid() {
		ver := v.Version
		if ver == packet.V31 {
			ver = packet.V311
		}
		types[ver][v.Packet.Type()] = true
		switch p := v.Packet.(type) {
		case *packet.Connect:
			add(&p.Props)
			add(&p.WillProps)
		case *packet.Connack:
			add(&p.Props)
		case *packet.Publish:
			add(&p.Props)
		case *packet.Ack:
			add(&p.Props)
		case *packet.Subscribe:
			add(&p.Props)
		case *packet.Suback:
			add(&p.Props)
		case *packet.Unsubscribe:
			add(&p.Props)
		case *packet.Unsuback:
			add(&p.Props)
		case *packet.Disconnect:
			add(&p.Props)
		case *packet.Auth:
			add(&p.Props)
		}
	}
	for ty := packet.CONNECT; ty <= packet.AUTH; ty++ {
		if !types[packet.V5][ty] {
			t.Errorf("no valid MQTT 5 vector of %v", ty)
		}
		if ty != packet.AUTH && !types[packet.V311][ty] {
			t.Errorf("no valid 3.1.1 vector of %v", ty)
		}
	}
	for id := packet.PropPayloadFormat; id <= packet.PropSharedSubAvailable; id++ {
		if id.Known() && props&(1<<id) == 0 {
			t.Errorf("no valid vector carries property %v", id)
		}
	}
}
