package packet_test

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	. "github.com/sextantmq/sextant/internal/mqtt/packet"
)

func withProps(set func(p *Properties)) Properties {
	var p Properties
	set(&p)
	return p
}

// TestAppendRejects lists packets Append must refuse, with the sentinel.
func TestAppendRejects(t *testing.T) {
	long := strings.Repeat("x", 65536)
	cases := []struct {
		name string
		v    Version
		p    Packet
		want error
	}{
		{"unknown version", 6, &Pingreq{}, ErrUnsupportedVersion},
		{"version 0", 0, &Publish{Topic: "t"}, ErrUnsupportedVersion},
		{"CONNECT Version field disagrees", V5, &Connect{Version: V311}, ErrProtocol},
		{"CONNECT protocol name disagrees", V31, &Connect{ProtocolName: "MQTT"}, ErrProtocol},
		{"CONNECT will QoS 3", V311, &Connect{WillFlag: true, WillQoS: 3, WillTopic: "t"}, ErrMalformed},
		{"CONNECT will topic wildcard", V311, &Connect{WillFlag: true, WillTopic: "a/+"}, ErrProtocol},
		{"CONNECT empty will topic", V5, &Connect{WillFlag: true}, ErrProtocol},
		{"CONNECT password without user name in 3.1.1", V311, &Connect{PasswordFlag: true}, ErrProtocol},
		{"CONNECT client id with U+0000", V311, &Connect{ClientID: "a\x00"}, ErrMalformed},
		{"CONNECT client id invalid UTF-8", V5, &Connect{ClientID: "\xff"}, ErrMalformed},
		{"CONNECT client id too long", V5, &Connect{ClientID: long}, ErrMalformed},
		{"CONNECT password too long", V5, &Connect{PasswordFlag: true, Password: []byte(long)}, ErrMalformed},
		{"CONNECT receive maximum 0", V5, &Connect{Props: withProps(func(p *Properties) { p.SetReceiveMaximum(0) })}, ErrProtocol},
		{"CONNECT topic alias", V5, &Connect{Props: withProps(func(p *Properties) { p.SetTopicAlias(1) })}, ErrProtocol},
		{"CONNECT will props with session expiry", V5, &Connect{WillFlag: true, WillTopic: "t",
			WillProps: withProps(func(p *Properties) { p.SetSessionExpiry(1) })}, ErrProtocol},
		{"CONNECT unknown property bit", V5, &Connect{Props: Properties{Present: 1 << 50}}, ErrMalformed},
		{"CONNACK session present with failure", V5, &Connack{SessionPresent: true, ReasonCode: NotAuthorized}, ErrProtocol},
		{"CONNACK reason code 0x10", V311, &Connack{ReasonCode: NoMatchingSubscribers}, ErrMalformed},
		{"CONNACK topic alias", V5, &Connack{Props: withProps(func(p *Properties) { p.SetTopicAlias(3) })}, ErrProtocol},
		{"CONNACK maximum QoS 2", V5, &Connack{Props: withProps(func(p *Properties) { p.SetMaximumQoS(2) })}, ErrProtocol},
		{"PUBLISH QoS 0 with packet id", V311, &Publish{Topic: "t", PacketID: 1}, ErrProtocol},
		{"PUBLISH QoS 1 without packet id", V311, &Publish{Topic: "t", QoS: 1}, ErrProtocol},
		{"PUBLISH QoS 3", V5, &Publish{Topic: "t", QoS: 3, PacketID: 1}, ErrMalformed},
		{"PUBLISH DUP at QoS 0", V5, &Publish{Topic: "t", Dup: true}, ErrMalformed},
		{"PUBLISH wildcard", V5, &Publish{Topic: "a/#"}, ErrProtocol},
		{"PUBLISH empty topic in 3.1.1", V311, &Publish{Props: withProps(func(p *Properties) { p.SetTopicAlias(1) })}, ErrProtocol},
		{"PUBLISH empty topic without alias", V5, &Publish{}, ErrProtocol},
		{"PUBLISH topic alias 0", V5, &Publish{Topic: "t", Props: withProps(func(p *Properties) { p.SetTopicAlias(0) })}, ErrTopicAlias},
		{"PUBLISH subscription id 0", V5, &Publish{Topic: "t", Props: Properties{SubscriptionIDs: []uint32{0}}}, ErrProtocol},
		{"PUBLISH subscription id too large", V5, &Publish{Topic: "t", Props: Properties{SubscriptionIDs: []uint32{1 << 28}}}, ErrProtocol},
		{"PUBLISH session expiry", V5, &Publish{Topic: "t", Props: withProps(func(p *Properties) { p.SetSessionExpiry(1) })}, ErrProtocol},
		{"PUBLISH payload format 2", V5, &Publish{Topic: "t", Props: withProps(func(p *Properties) { p.SetPayloadFormat(2) })}, ErrProtocol},
		{"PUBLISH response topic wildcard", V5, &Publish{Topic: "t", Props: withProps(func(p *Properties) { p.SetResponseTopic("r/+") })}, ErrProtocol},
		{"PUBLISH content type invalid UTF-8", V5, &Publish{Topic: "t", Props: withProps(func(p *Properties) { p.SetContentType("\xc0\xaf") })}, ErrMalformed},
		{"PUBLISH user property key U+0000", V5, &Publish{Topic: "t", Props: Properties{User: []UserProperty{{Key: "\x00"}}}}, ErrMalformed},
		{"PUBLISH correlation data too long", V5, &Publish{Topic: "t", Props: withProps(func(p *Properties) { p.SetCorrelationData([]byte(long)) })}, ErrMalformed},
		{"Ack kind PUBLISH", V5, &Ack{Kind: PUBLISH, PacketID: 1}, ErrProtocol},
		{"Ack packet id 0", V311, &Ack{Kind: PUBACK}, ErrProtocol},
		{"PUBREL reason 0x10", V5, &Ack{Kind: PUBREL, PacketID: 1, ReasonCode: NoMatchingSubscribers}, ErrMalformed},
		{"PUBACK reason 0x92 in 3.1.1", V311, &Ack{Kind: PUBACK, PacketID: 1, ReasonCode: PacketIdentifierNotFound}, ErrMalformed},
		{"PUBACK subscription id", V5, &Ack{Kind: PUBACK, PacketID: 1, Props: Properties{SubscriptionIDs: []uint32{1}}}, ErrProtocol},
		{"SUBSCRIBE no filters", V5, &Subscribe{PacketID: 1}, ErrProtocol},
		{"SUBSCRIBE packet id 0", V5, &Subscribe{Subs: []Subscription{{Filter: "a"}}}, ErrProtocol},
		{"SUBSCRIBE QoS 3", V5, &Subscribe{PacketID: 1, Subs: []Subscription{{Filter: "a", QoS: 3}}}, ErrMalformed},
		{"SUBSCRIBE retain handling 3", V5, &Subscribe{PacketID: 1, Subs: []Subscription{{Filter: "a", RetainHandling: 3}}}, ErrProtocol},
		{"SUBSCRIBE no local in 3.1.1", V311, &Subscribe{PacketID: 1, Subs: []Subscription{{Filter: "a", NoLocal: true}}}, ErrProtocol},
		{"SUBSCRIBE two subscription ids", V5, &Subscribe{PacketID: 1, Subs: []Subscription{{Filter: "a"}},
			Props: Properties{SubscriptionIDs: []uint32{1, 2}}}, ErrProtocol},
		{"SUBSCRIBE filter invalid UTF-8", V5, &Subscribe{PacketID: 1, Subs: []Subscription{{Filter: "\xed\xa0\x80"}}}, ErrMalformed},
		{"SUBACK no codes", V5, &Suback{PacketID: 1}, ErrProtocol},
		{"SUBACK code 0x11", V311, &Suback{PacketID: 1, Codes: []ReasonCode{NoSubscriptionExisted}}, ErrMalformed},
		{"UNSUBSCRIBE no filters", V311, &Unsubscribe{PacketID: 1}, ErrProtocol},
		{"UNSUBSCRIBE filter too long", V311, &Unsubscribe{PacketID: 1, Filters: []string{long}}, ErrMalformed},
		{"UNSUBACK no codes", V5, &Unsuback{PacketID: 1}, ErrProtocol},
		{"UNSUBACK code 0x01", V5, &Unsuback{PacketID: 1, Codes: []ReasonCode{GrantedQoS1}}, ErrMalformed},
		{"UNSUBACK packet id 0", V311, &Unsuback{}, ErrProtocol},
		{"DISCONNECT code 0x84", V5, &Disconnect{ReasonCode: UnsupportedProtocolVersion}, ErrMalformed},
		{"DISCONNECT receive maximum", V5, &Disconnect{Props: withProps(func(p *Properties) { p.SetReceiveMaximum(1) })}, ErrProtocol},
		{"AUTH in 3.1.1", V311, &Auth{}, ErrProtocol},
		{"AUTH code 0x87", V5, &Auth{ReasonCode: NotAuthorized}, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dst := []byte("prefix")
			out, err := c.p.Append(dst, c.v)
			if !errors.Is(err, c.want) {
				t.Fatalf("Append: %v, want %v", err, c.want)
			}
			if string(out) != "prefix" {
				t.Fatalf("Append changed dst on error: %q", out)
			}
		})
	}
}

// TestAppend311Mapping checks how MQTT 5 values are written for 3.1.1.
func TestAppend311Mapping(t *testing.T) {
	connack := map[ReasonCode]byte{
		Success: 0, UnsupportedProtocolVersion: 1, ClientIdentifierNotValid: 2, ServerUnavailable: 3,
		ServerBusy: 3, UnspecifiedError: 3, MalformedPacket: 3, QuotaExceeded: 3, BadUserNameOrPassword: 4,
		NotAuthorized: 5, Banned: 5,
	}
	for rc, want := range connack {
		b, err := (&Connack{ReasonCode: rc}).Append(nil, V311)
		if err != nil || !bytes.Equal(b, []byte{0x20, 2, 0, want}) {
			t.Errorf("CONNACK %v for 3.1.1: % x, %v; want return code %d", rc, b, err, want)
		}
	}
	b, _ := (&Suback{PacketID: 1, Codes: []ReasonCode{GrantedQoS2, NotAuthorized, QuotaExceeded, GrantedQoS0}}).Append(nil, V311)
	if want := []byte{0x90, 6, 0, 1, 2, 0x80, 0x80, 0}; !bytes.Equal(b, want) {
		t.Errorf("SUBACK for 3.1.1: % x, want % x", b, want)
	}
	withReason := func(p *Properties) { p.SetReasonString("r") }
	same := []struct {
		p    Packet
		want []byte
	}{
		{&Unsuback{PacketID: 2, Codes: []ReasonCode{NoSubscriptionExisted}, Props: withProps(withReason)}, []byte{0xb0, 2, 0, 2}},
		{&Ack{Kind: PUBREC, PacketID: 3, ReasonCode: QuotaExceeded, Props: withProps(withReason)}, []byte{0x50, 2, 0, 3}},
		{&Ack{Kind: PUBREL, PacketID: 3, ReasonCode: PacketIdentifierNotFound}, []byte{0x62, 2, 0, 3}},
		{&Disconnect{ReasonCode: ServerShuttingDown, Props: withProps(withReason)}, []byte{0xe0, 0}},
		{&Publish{Topic: "t", Payload: []byte("p"), Props: withProps(func(p *Properties) { p.SetMessageExpiry(9) })},
			[]byte{0x30, 4, 0, 1, 't', 'p'}},
		{&Connect{ClientID: "c", Props: withProps(func(p *Properties) { p.SetSessionExpiry(9) }),
			WillFlag: true, WillTopic: "w", WillProps: withProps(func(p *Properties) { p.SetWillDelay(1) })},
			[]byte{0x10, 0x12, 0, 4, 'M', 'Q', 'T', 'T', 4, 0x04, 0, 0, 0, 1, 'c', 0, 1, 'w', 0, 0}},
		{&Connect{ClientID: "c"}, nil},
	}
	for _, c := range same {
		b, err := c.p.Append(nil, V311)
		if err != nil {
			t.Errorf("%v: %v", c.p, err)
			continue
		}
		if c.want != nil && !bytes.Equal(b, c.want) {
			t.Errorf("%v for 3.1.1: % x, want % x", c.p, b, c.want)
		}
	}
	// MQTT 3.1 CONNECT uses the old protocol name; other packets match 3.1.1.
	b, _ = (&Connect{ClientID: "c"}).Append(nil, V31)
	if !bytes.HasPrefix(b[2:], []byte("\x00\x06MQIsdp\x03")) {
		t.Errorf("CONNECT for 3.1: % x", b)
	}
	b31, _ := (&Publish{Topic: "t", QoS: 1, PacketID: 5}).Append(nil, V31)
	b311, _ := (&Publish{Topic: "t", QoS: 1, PacketID: 5}).Append(nil, V311)
	if !bytes.Equal(b31, b311) {
		t.Errorf("PUBLISH for 3.1 % x differs from 3.1.1 % x", b31, b311)
	}
}

// TestAppendDecodeLarge round-trips packets whose lengths need multi-byte
// variable byte integers and long strings.
func TestAppendDecodeLarge(t *testing.T) {
	topic := strings.Repeat("t", 65535)
	for _, n := range []int{0, 127, 128, 16383, 16384, 2097151, 2097152} {
		p := &Publish{QoS: 1, PacketID: 1, Topic: topic, Payload: bytes.Repeat([]byte{0xaa}, n)}
		p.Props.SetCorrelationData(bytes.Repeat([]byte{1}, 200))
		for _, v := range []Version{V311, V5} {
			b, err := p.Append(nil, v)
			if err != nil {
				t.Fatal(err)
			}
			got, m, err := Decode(b, v)
			if err != nil || m != len(b) {
				t.Fatalf("payload %d v%v: %v", n, v, err)
			}
			want := *p
			if v != V5 {
				want.Props = Properties{}
			}
			if n == 0 {
				want.Payload = nil
			}
			if !reflect.DeepEqual(got, &want) {
				t.Fatalf("payload %d v%v: round trip differs", n, v)
			}
		}
	}
}
