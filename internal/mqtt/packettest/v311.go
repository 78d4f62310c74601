package packettest

import . "github.com/sextantmq/sextant/internal/mqtt/packet"

// valid311 returns valid MQTT 3.1 and 3.1.1 vectors: every packet type.
func valid311() []Vector {
	return []Vector{
		{
			Name: "v311/CONNECT minimal", Version: V311, Spec: "3.1.1 §3.1",
			Hex: `
				10 0e           // CONNECT, remaining length 14
				00 04 "MQTT"    // protocol name
				04              // protocol level 4 (3.1.1)
				02              // connect flags: clean session
				00 3c           // keep alive 60 s
				00 02 "c1"      // client identifier`,
			Packet: &Connect{ProtocolName: "MQTT", Version: V311, CleanStart: true, KeepAlive: 60, ClientID: "c1"},
		},
		{
			Name: "v311/CONNECT will, user name and password", Version: V311, Spec: "3.1.1 §3.1.2.3",
			Hex: `
				10 23           // CONNECT, remaining length 35
				00 04 "MQTT"    // protocol name
				04              // protocol level 4
				ee              // flags: user name, password, will retain, will QoS 1, will, clean session
				00 0a           // keep alive 10 s
				00 02 "c1"      // client identifier
				00 03 "w/t"     // will topic
				00 03 "bye"     // will payload
				00 04 "user"    // user name
				00 03 70 00 77  // password: binary, may hold a zero byte`,
			Packet: &Connect{ProtocolName: "MQTT", Version: V311, CleanStart: true, KeepAlive: 10, ClientID: "c1",
				WillFlag: true, WillQoS: 1, WillRetain: true, WillTopic: "w/t", WillPayload: []byte("bye"),
				UsernameFlag: true, Username: "user", PasswordFlag: true, Password: []byte{'p', 0, 'w'}},
		},
		{
			Name: "v311/CONNECT empty client identifier", Version: V311, Spec: "MQTT-3.1.3-6",
			Hex: `
				10 0c           // CONNECT, remaining length 12
				00 04 "MQTT" 04 // protocol name and level
				02              // clean session
				00 00           // keep alive off
				00 00           // client identifier: empty (the server assigns one)`,
			Packet: &Connect{ProtocolName: "MQTT", Version: V311, CleanStart: true},
		},
		{
			Name: "v31/CONNECT MQIsdp", Version: V31, Spec: "MQTT 3.1 §3.1",
			Hex: `
				10 10            // CONNECT, remaining length 16
				00 06 "MQIsdp"   // protocol name of MQTT 3.1
				03               // protocol level 3
				02               // clean session
				00 1e            // keep alive 30 s
				00 02 "c3"       // client identifier`,
			Packet: &Connect{ProtocolName: "MQIsdp", Version: V31, CleanStart: true, KeepAlive: 30, ClientID: "c3"},
		},
		{
			Name: "v311/CONNACK accepted, session present", Version: V311, Spec: "3.1.1 §3.2",
			Hex: `
				20 02  // CONNACK, remaining length 2
				01     // acknowledge flags: session present
				00     // return code 0: accepted`,
			Packet: &Connack{SessionPresent: true},
		},
		connack311(1, UnsupportedProtocolVersion, "unacceptable protocol version"),
		connack311(2, ClientIdentifierNotValid, "identifier rejected"),
		connack311(3, ServerUnavailable, "server unavailable"),
		connack311(4, BadUserNameOrPassword, "bad user name or password"),
		connack311(5, NotAuthorized, "not authorized"),
		{
			Name: "v311/PUBLISH QoS 0", Version: V311, Spec: "3.1.1 §3.3",
			Hex: `
				30 0a         // PUBLISH, QoS 0, remaining length 10
				00 03 "a/b"   // topic name
				"hello"       // payload (no packet identifier at QoS 0)`,
			Packet: &Publish{Topic: "a/b", Payload: []byte("hello")},
		},
		{
			Name: "v311/PUBLISH QoS 1", Version: V311, Spec: "3.1.1 §3.3.2.2",
			Hex: `
				32 0c         // PUBLISH, QoS 1, remaining length 12
				00 03 "a/b"   // topic name
				00 07         // packet identifier 7
				"hello"       // payload`,
			Packet: &Publish{QoS: 1, PacketID: 7, Topic: "a/b", Payload: []byte("hello")},
		},
		{
			Name: "v311/PUBLISH QoS 2 DUP retain, empty payload", Version: V311, Spec: "3.1.1 §3.3.1",
			Hex: `
				3d 07         // PUBLISH, DUP, QoS 2, RETAIN; remaining length 7
				00 03 "a/b"   // topic name
				00 08         // packet identifier 8; zero-length payload`,
			Packet: &Publish{Dup: true, QoS: 2, Retain: true, PacketID: 8, Topic: "a/b"},
		},
		{
			Name: "v311/PUBLISH retained delete, UTF-8 topic", Version: V311, Spec: "MQTT-3.3.1-10",
			Hex: `
				31 04         // PUBLISH, QoS 0, RETAIN; remaining length 4
				00 02 c3 bc   // topic name "ü"; empty payload clears the retained message`,
			Packet: &Publish{Retain: true, Topic: "ü"},
		},
		{
			Name: "v31/PUBLISH QoS 1", Version: V31, Spec: "MQTT 3.1 §3.3",
			Hex: `
				32 06         // PUBLISH, QoS 1, remaining length 6
				00 01 "t"     // topic name
				01 00         // packet identifier 256
				"x"           // payload`,
			Packet: &Publish{QoS: 1, PacketID: 256, Topic: "t", Payload: []byte("x")},
		},
		{
			Name: "v311/PUBACK", Version: V311, Spec: "3.1.1 §3.4",
			Hex:    `40 02  00 07  // PUBACK, remaining length 2, packet identifier 7`,
			Packet: &Ack{Kind: PUBACK, PacketID: 7},
		},
		{
			Name: "v311/PUBREC", Version: V311, Spec: "3.1.1 §3.5",
			Hex:    `50 02  00 07  // PUBREC, remaining length 2, packet identifier 7`,
			Packet: &Ack{Kind: PUBREC, PacketID: 7},
		},
		{
			Name: "v311/PUBREL", Version: V311, Spec: "3.1.1 §3.6",
			Hex:    `62 02  00 07  // PUBREL (flags 0010), remaining length 2, packet identifier 7`,
			Packet: &Ack{Kind: PUBREL, PacketID: 7},
		},
		{
			Name: "v311/PUBCOMP", Version: V311, Spec: "3.1.1 §3.7",
			Hex:    `70 02  00 07  // PUBCOMP, remaining length 2, packet identifier 7`,
			Packet: &Ack{Kind: PUBCOMP, PacketID: 7},
		},
		{
			Name: "v311/SUBSCRIBE two filters", Version: V311, Spec: "3.1.1 §3.8",
			Hex: `
				82 0e         // SUBSCRIBE (flags 0010), remaining length 14
				00 0a         // packet identifier 10
				00 03 "a/+"   // topic filter
				01            // requested QoS 1
				00 03 "b/#"   // topic filter
				02            // requested QoS 2`,
			Packet: &Subscribe{PacketID: 10, Subs: []Subscription{{Filter: "a/+", QoS: 1}, {Filter: "b/#", QoS: 2}}},
		},
		{
			Name: "v311/SUBACK granted and failure", Version: V311, Spec: "3.1.1 §3.9.3",
			Hex: `
				90 06         // SUBACK, remaining length 6
				00 0a         // packet identifier 10
				00 01 02      // granted QoS 0, 1, 2
				80            // failure (maps to MQTT 5 unspecified error)`,
			Packet: &Suback{PacketID: 10, Codes: []ReasonCode{GrantedQoS0, GrantedQoS1, GrantedQoS2, UnspecifiedError}},
		},
		{
			Name: "v311/UNSUBSCRIBE", Version: V311, Spec: "3.1.1 §3.10",
			Hex: `
				a2 0c         // UNSUBSCRIBE (flags 0010), remaining length 12
				00 0b         // packet identifier 11
				00 03 "a/+"   // topic filter
				00 03 "b/#"   // topic filter`,
			Packet: &Unsubscribe{PacketID: 11, Filters: []string{"a/+", "b/#"}},
		},
		{
			Name: "v311/UNSUBACK", Version: V311, Spec: "3.1.1 §3.11",
			Hex:    `b0 02  00 0b  // UNSUBACK, remaining length 2, packet identifier 11; no payload in 3.1.1`,
			Packet: &Unsuback{PacketID: 11},
		},
		{
			Name: "v311/PINGREQ", Version: V311, Spec: "3.1.1 §3.12",
			Hex:    `c0 00  // PINGREQ, remaining length 0`,
			Packet: &Pingreq{},
		},
		{
			Name: "v311/PINGRESP", Version: V311, Spec: "3.1.1 §3.13",
			Hex:    `d0 00  // PINGRESP, remaining length 0`,
			Packet: &Pingresp{},
		},
		{
			Name: "v311/DISCONNECT", Version: V311, Spec: "3.1.1 §3.14",
			Hex:    `e0 00  // DISCONNECT, remaining length 0`,
			Packet: &Disconnect{},
		},
	}
}

func connack311(code byte, rc ReasonCode, what string) Vector {
	return Vector{
		Name: "v311/CONNACK " + what, Version: V311, Spec: "3.1.1 §3.2.2.3",
		Hex: `
			20 02  // CONNACK, remaining length 2
			00     // acknowledge flags: no session
			` + hexOf(code) + `     // 3.1.1 return code (mapped to the MQTT 5 reason code)`,
		Packet: &Connack{ReasonCode: rc},
	}
}

func hexOf(b byte) string {
	const digits = "0123456789abcdef"
	return string([]byte{digits[b>>4], digits[b&15]})
}
