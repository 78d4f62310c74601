package packet_test

import (
	"testing"

	. "github.com/sextantmq/sextant/internal/mqtt/packet"
)

func TestDescribe(t *testing.T) {
	pub := &Publish{Dup: true, QoS: 1, Retain: true, PacketID: 3, Topic: "a/b", Payload: make([]byte, 12)}
	pub.Props.SetMessageExpiry(10)
	conn := &Connect{Version: V5, ClientID: "c1", CleanStart: true, KeepAlive: 30, UsernameFlag: true, Username: "u",
		PasswordFlag: true, Password: []byte("secret"), WillFlag: true, WillQoS: 1, WillTopic: "w", WillPayload: []byte("x")}
	conn.Props.SetSessionExpiry(60)
	conn.WillProps.SetWillDelay(5)
	connack := &Connack{SessionPresent: true}
	connack.Props.SetAssignedClientID("gen-1")
	connack.Props.SetMaximumQoS(1)
	auth := &Auth{ReasonCode: ContinueAuthentication}
	auth.Props.SetAuthMethod("SCRAM")
	auth.Props.SetAuthData([]byte{1, 2, 3})
	cases := []struct {
		p    Packet
		want string
	}{
		{pub, `PUBLISH id=3 qos=1 dup retain topic="a/b" len=12 props=[expiry=10]`},
		{&Publish{Topic: "t"}, `PUBLISH qos=0 topic="t" len=0`},
		{conn, `CONNECT v5 client="c1" clean keepalive=30 user="u" password=6B props=[session-expiry=60] will=[qos=1 topic="w" len=1 props=[will-delay=5]]`},
		{connack, `CONNACK rc=0x00 session-present props=[assigned-id="gen-1" max-qos=1]`},
		{&Ack{Kind: PUBREC, PacketID: 9, ReasonCode: QuotaExceeded}, `PUBREC id=9 rc=0x97`},
		{&Subscribe{PacketID: 2, Subs: []Subscription{{Filter: "a/#", QoS: 2, NoLocal: true, RetainHandling: 1}, {Filter: "b"}},
			Props: Properties{SubscriptionIDs: []uint32{4}}}, `SUBSCRIBE id=2 subs=["a/#" qos=2 no-local rh=1, "b" qos=0] props=[subid=4]`},
		{&Suback{PacketID: 2, Codes: []ReasonCode{GrantedQoS2, NotAuthorized}}, `SUBACK id=2 codes=[0x02 0x87]`},
		{&Unsubscribe{PacketID: 5, Filters: []string{"a", "b"}, Props: Properties{User: []UserProperty{{"k", "v"}}}},
			`UNSUBSCRIBE id=5 filters=["a" "b"] props=[user="k":"v"]`},
		{&Unsuback{PacketID: 5}, `UNSUBACK id=5`},
		{&Pingreq{}, `PINGREQ`},
		{&Pingresp{}, `PINGRESP`},
		{&Disconnect{ReasonCode: SessionTakenOver}, `DISCONNECT rc=0x8E`},
		{auth, `AUTH rc=0x18 props=[auth-method="SCRAM" auth-data=3B]`},
		{nil, `<nil>`},
		{(*Publish)(nil), `<nil>`},
	}
	for _, c := range cases {
		if got := Describe(c.p); got != c.want {
			t.Errorf("Describe\n  got  %s\n  want %s", got, c.want)
		}
	}
	if got := pub.String(); got != cases[0].want {
		t.Errorf("String() = %s", got)
	}
}
