package packettest

import . "github.com/sextantmq/sextant/internal/mqtt/packet"

// valid5 returns valid MQTT 5 vectors: every packet type and, across them,
// every property in every kind of place it may appear.
func valid5() []Vector {
	return []Vector{
		{
			Name: "v5/CONNECT minimal", Version: V5, Spec: "MQTT 5 §3.1",
			Hex: `
				10 0f         // CONNECT, remaining length 15
				00 04 "MQTT"  // protocol name
				05            // protocol level 5
				02            // connect flags: clean start
				00 3c         // keep alive 60 s
				00            // property length 0
				00 02 "c5"    // client identifier`,
			Packet: &Connect{ProtocolName: "MQTT", Version: V5, CleanStart: true, KeepAlive: 60, ClientID: "c5"},
		},
		{
			Name: "v5/CONNECT every CONNECT and will property", Version: V5, Spec: "MQTT 5 §3.1.2.11, §3.1.3.2",
			Hex: `
				10 6e                   // CONNECT, remaining length 110
				00 04 "MQTT" 05         // protocol name and level
				d6                      // flags: user name, password, will QoS 2, will, clean start
				00 1e                   // keep alive 30 s
				27                      // property length 39
				  11 00 00 00 78        //   session expiry interval 120
				  15 00 04 "SCRM"       //   authentication method
				  16 00 02 01 02        //   authentication data
				  17 01                 //   request problem information 1
				  19 01                 //   request response information 1
				  21 00 0a              //   receive maximum 10
				  22 00 05              //   topic alias maximum 5
				  26 00 01 "k" 00 01 "v" //  user property k=v
				  27 00 00 10 00        //   maximum packet size 4096
				00 02 "c5"              // client identifier
				27                      // will property length 39
				  01 01                 //   payload format indicator: UTF-8
				  02 00 00 00 3c        //   message expiry interval 60
				  03 00 04 "text"       //   content type
				  08 00 05 "reply"      //   response topic
				  09 00 02 ab cd        //   correlation data
				  18 00 00 00 05        //   will delay interval 5
				  26 00 01 "a" 00 01 "b" //  user property a=b
				00 03 "w/t"             // will topic
				00 02 "hi"              // will payload
				00 01 "u"               // user name
				00 02 "pw"              // password`,
			Packet: &Connect{ProtocolName: "MQTT", Version: V5, CleanStart: true, KeepAlive: 30, ClientID: "c5",
				Props: props(func(p *Properties) {
					p.SetSessionExpiry(120)
					p.SetAuthMethod("SCRM")
					p.SetAuthData([]byte{1, 2})
					p.SetRequestProblemInfo(1)
					p.SetRequestResponseInfo(1)
					p.SetReceiveMaximum(10)
					p.SetTopicAliasMaximum(5)
					p.User = []UserProperty{{Key: "k", Value: "v"}}
					p.SetMaximumPacketSize(4096)
				}),
				WillFlag: true, WillQoS: 2, WillTopic: "w/t", WillPayload: []byte("hi"),
				WillProps: props(func(p *Properties) {
					p.SetPayloadFormat(1)
					p.SetMessageExpiry(60)
					p.SetContentType("text")
					p.SetResponseTopic("reply")
					p.SetCorrelationData([]byte{0xab, 0xcd})
					p.SetWillDelay(5)
					p.User = []UserProperty{{Key: "a", Value: "b"}}
				}),
				UsernameFlag: true, Username: "u", PasswordFlag: true, Password: []byte("pw")},
		},
		{
			Name: "v5/CONNECT password without user name", Version: V5, Spec: "MQTT 5 §3.1.2.9",
			Hex: `
				10 13             // CONNECT, remaining length 19
				00 04 "MQTT" 05   // protocol name and level
				42                // flags: password, clean start (allowed without user name in 5)
				00 00             // keep alive off
				00                // property length 0
				00 02 "c5"        // client identifier
				00 02 "pw"        // password`,
			Packet: &Connect{ProtocolName: "MQTT", Version: V5, CleanStart: true, ClientID: "c5",
				PasswordFlag: true, Password: []byte("pw")},
		},
		{
			Name: "v5/CONNACK success", Version: V5, Spec: "MQTT 5 §3.2",
			Hex: `
				20 03   // CONNACK, remaining length 3
				00      // acknowledge flags
				00      // reason code: success
				00      // property length 0`,
			Packet: &Connack{},
		},
		{
			Name: "v5/CONNACK not authorized with reason string", Version: V5, Spec: "MQTT 5 §3.2.2.2",
			Hex: `
				20 0b             // CONNACK, remaining length 11
				00                // acknowledge flags
				87                // reason code: not authorized
				08                // property length 8
				  1f 00 05 "nope!" // reason string`,
			Packet: &Connack{ReasonCode: NotAuthorized, Props: props(func(p *Properties) { p.SetReasonString("nope!") })},
		},
		{
			Name: "v5/CONNACK every CONNACK property", Version: V5, Spec: "MQTT 5 §3.2.2.3",
			Hex: `
				20 4a                    // CONNACK, remaining length 74
				01                       // session present
				00                       // success
				47                       // property length 71
				  11 00 00 00 3c         //   session expiry interval 60
				  12 00 03 "gen"         //   assigned client identifier
				  13 00 1e               //   server keep alive 30
				  15 00 04 "SCRM"        //   authentication method
				  16 00 01 ff            //   authentication data
				  1a 00 04 "resp"        //   response information
				  1c 00 03 "srv"         //   server reference
				  1f 00 02 "ok"          //   reason string
				  21 00 14               //   receive maximum 20
				  22 00 0a               //   topic alias maximum 10
				  24 01                  //   maximum QoS 1
				  25 00                  //   retain available: no
				  26 00 01 "x" 00 01 "y" //   user property x=y
				  27 00 01 00 00         //   maximum packet size 65536
				  28 01                  //   wildcard subscription available
				  29 00                  //   subscription identifiers available: no
				  2a 01                  //   shared subscription available`,
			Packet: &Connack{SessionPresent: true, Props: props(func(p *Properties) {
				p.SetSessionExpiry(60)
				p.SetAssignedClientID("gen")
				p.SetServerKeepAlive(30)
				p.SetAuthMethod("SCRM")
				p.SetAuthData([]byte{0xff})
				p.SetResponseInfo("resp")
				p.SetServerReference("srv")
				p.SetReasonString("ok")
				p.SetReceiveMaximum(20)
				p.SetTopicAliasMaximum(10)
				p.SetMaximumQoS(1)
				p.SetRetainAvailable(0)
				p.User = []UserProperty{{Key: "x", Value: "y"}}
				p.SetMaximumPacketSize(65536)
				p.SetWildcardSubAvailable(1)
				p.SetSubIDAvailable(0)
				p.SetSharedSubAvailable(1)
			})},
		},
		{
			Name: "v5/PUBLISH QoS 0", Version: V5, Spec: "MQTT 5 §3.3",
			Hex: `
				30 0b         // PUBLISH, QoS 0, remaining length 11
				00 03 "a/b"   // topic name
				00            // property length 0
				"hello"       // payload`,
			Packet: &Publish{Topic: "a/b", Payload: []byte("hello")},
		},
		{
			Name: "v5/PUBLISH every PUBLISH property", Version: V5, Spec: "MQTT 5 §3.3.2.3",
			Hex: `
				32 35                    // PUBLISH, QoS 1, remaining length 53
				00 03 "a/b"              // topic name
				00 09                    // packet identifier 9
				2b                       // property length 43
				  01 01                  //   payload format indicator: UTF-8
				  02 00 00 00 0a         //   message expiry interval 10
				  03 00 04 "json"        //   content type
				  08 00 05 "reply"       //   response topic
				  09 00 03 01 02 03      //   correlation data
				  0b 05                  //   subscription identifier 5
				  0b 80 01               //   subscription identifier 128 (two-byte variable byte integer)
				  23 00 02               //   topic alias 2
				  26 00 01 "k" 00 01 "v" //   user property k=v
				"{}"                     // payload`,
			Packet: &Publish{QoS: 1, PacketID: 9, Topic: "a/b", Payload: []byte("{}"), Props: props(func(p *Properties) {
				p.SetPayloadFormat(1)
				p.SetMessageExpiry(10)
				p.SetContentType("json")
				p.SetResponseTopic("reply")
				p.SetCorrelationData([]byte{1, 2, 3})
				p.SubscriptionIDs = []uint32{5, 128}
				p.SetTopicAlias(2)
				p.User = []UserProperty{{Key: "k", Value: "v"}}
			})},
		},
		{
			Name: "v5/PUBLISH empty topic with topic alias", Version: V5, Spec: "MQTT 5 §3.3.2.3.4",
			Hex: `
				30 07        // PUBLISH, QoS 0, remaining length 7
				00 00        // topic name: empty, the alias stands for it
				03           // property length 3
				  23 00 02   //   topic alias 2
				"x"          // payload`,
			Packet: &Publish{Payload: []byte("x"), Props: props(func(p *Properties) { p.SetTopicAlias(2) })},
		},
		{
			Name: "v5/PUBLISH QoS 2 largest subscription identifier", Version: V5, Spec: "MQTT 5 §1.5.5",
			Hex: `
				34 0b             // PUBLISH, QoS 2, remaining length 11
				00 01 "t"         // topic name
				00 01             // packet identifier 1
				05                // property length 5
				  0b ff ff ff 7f  //   subscription identifier 268435455 (four-byte maximum)`,
			Packet: &Publish{QoS: 2, PacketID: 1, Topic: "t", Props: Properties{SubscriptionIDs: []uint32{268435455}}},
		},
		{
			Name: "v5/PUBACK success omits reason code", Version: V5, Spec: "MQTT 5 §3.4.2.1",
			Hex:    `40 02  00 01  // PUBACK, remaining length 2, packet identifier 1`,
			Packet: &Ack{Kind: PUBACK, PacketID: 1},
		},
		{
			Name: "v5/PUBACK reason code without properties", Version: V5, Spec: "MQTT 5 §3.4.2.2.1",
			Hex: `
				40 03   // PUBACK, remaining length 3
				00 01   // packet identifier 1
				10      // no matching subscribers; property length omitted`,
			Packet: &Ack{Kind: PUBACK, PacketID: 1, ReasonCode: NoMatchingSubscribers},
		},
		{
			Name: "v5/PUBACK reason string and user property", Version: V5, Spec: "MQTT 5 §3.4.2.2",
			Hex: `
				40 10                    // PUBACK, remaining length 16
				00 01                    // packet identifier 1
				10                       // no matching subscribers
				0c                       // property length 12
				  1f 00 02 "no"          //   reason string
				  26 00 01 "k" 00 01 "v" //   user property`,
			Packet: &Ack{Kind: PUBACK, PacketID: 1, ReasonCode: NoMatchingSubscribers, Props: props(func(p *Properties) {
				p.SetReasonString("no")
				p.User = []UserProperty{{Key: "k", Value: "v"}}
			})},
		},
		{
			Name: "v5/PUBACK explicit success and empty properties", Version: V5, Spec: "MQTT 5 §3.4.2.1",
			NonCanonical: true,
			Hex: `
				40 04   // PUBACK, remaining length 4
				00 01   // packet identifier 1
				00      // success, written out
				00      // property length 0`,
			Packet: &Ack{Kind: PUBACK, PacketID: 1},
		},
		{
			Name: "v5/PUBACK reason code and empty properties", Version: V5, Spec: "MQTT 5 §3.4.2.2.1",
			NonCanonical: true,
			Hex:          `40 04  00 01  10  00  // PUBACK, id 1, no matching subscribers, property length 0`,
			Packet:       &Ack{Kind: PUBACK, PacketID: 1, ReasonCode: NoMatchingSubscribers},
		},
		{
			Name: "v5/PUBREC unspecified error", Version: V5, Spec: "MQTT 5 §3.5",
			Hex:    `50 03  00 02  80  // PUBREC, remaining length 3, packet identifier 2, unspecified error`,
			Packet: &Ack{Kind: PUBREC, PacketID: 2, ReasonCode: UnspecifiedError},
		},
		{
			Name: "v5/PUBREL packet identifier not found, reason string", Version: V5, Spec: "MQTT 5 §3.6",
			Hex: `
				62 08           // PUBREL (flags 0010), remaining length 8
				00 03           // packet identifier 3
				92              // packet identifier not found
				04              // property length 4
				  1f 00 01 "x"  //   reason string`,
			Packet: &Ack{Kind: PUBREL, PacketID: 3, ReasonCode: PacketIdentifierNotFound,
				Props: props(func(p *Properties) { p.SetReasonString("x") })},
		},
		{
			Name: "v5/PUBCOMP", Version: V5, Spec: "MQTT 5 §3.7",
			Hex:    `70 02  00 04  // PUBCOMP, remaining length 2, packet identifier 4`,
			Packet: &Ack{Kind: PUBCOMP, PacketID: 4},
		},
		{
			Name: "v5/SUBSCRIBE options, subscription identifier, user property", Version: V5, Spec: "MQTT 5 §3.8",
			Hex: `
				82 15                  // SUBSCRIBE (flags 0010), remaining length 21
				00 01                  // packet identifier 1
				08                     // property length 8
				  0b 07                //   subscription identifier 7
				  26 00 01 "k" 00 00   //   user property k="" (empty value)
				00 03 "a/b"            // topic filter
				2d                     // options: QoS 1, no local, retain as published, retain handling 2
				00 01 "c"              // topic filter
				00                     // options: QoS 0`,
			Packet: &Subscribe{PacketID: 1, Props: Properties{SubscriptionIDs: []uint32{7}, User: []UserProperty{{Key: "k"}}},
				Subs: []Subscription{{Filter: "a/b", QoS: 1, NoLocal: true, RetainAsPublished: true, RetainHandling: 2},
					{Filter: "c"}}},
		},
		{
			Name: "v5/SUBACK codes and reason string", Version: V5, Spec: "MQTT 5 §3.9",
			Hex: `
				90 0d            // SUBACK, remaining length 13
				00 01            // packet identifier 1
				05               // property length 5
				  1f 00 02 "ok"  //   reason string
				00 01 02         // granted QoS 0, 1, 2
				87               // not authorized
				a2               // wildcard subscriptions not supported`,
			Packet: &Suback{PacketID: 1, Props: props(func(p *Properties) { p.SetReasonString("ok") }),
				Codes: []ReasonCode{GrantedQoS0, GrantedQoS1, GrantedQoS2, NotAuthorized, WildcardSubscriptionsNotSupported}},
		},
		{
			Name: "v5/UNSUBSCRIBE with user property", Version: V5, Spec: "MQTT 5 §3.10",
			Hex: `
				a2 12                    // UNSUBSCRIBE (flags 0010), remaining length 18
				00 02                    // packet identifier 2
				07                       // property length 7
				  26 00 01 "k" 00 01 "v" //   user property
				00 03 "a/b"              // topic filter
				00 01 "c"                // topic filter`,
			Packet: &Unsubscribe{PacketID: 2, Props: Properties{User: []UserProperty{{Key: "k", Value: "v"}}},
				Filters: []string{"a/b", "c"}},
		},
		{
			Name: "v5/UNSUBACK", Version: V5, Spec: "MQTT 5 §3.11",
			Hex: `
				b0 05   // UNSUBACK, remaining length 5
				00 02   // packet identifier 2
				00      // property length 0
				00 11   // success, no subscription existed`,
			Packet: &Unsuback{PacketID: 2, Codes: []ReasonCode{Success, NoSubscriptionExisted}},
		},
		{
			Name: "v5/UNSUBACK reason string", Version: V5, Spec: "MQTT 5 §3.11.2.1",
			Hex: `
				b0 08           // UNSUBACK, remaining length 8
				00 02           // packet identifier 2
				04              // property length 4
				  1f 00 01 "x"  //   reason string
				87              // not authorized`,
			Packet: &Unsuback{PacketID: 2, Props: props(func(p *Properties) { p.SetReasonString("x") }),
				Codes: []ReasonCode{NotAuthorized}},
		},
		{
			Name: "v5/PINGREQ", Version: V5, Spec: "MQTT 5 §3.12",
			Hex:    `c0 00  // PINGREQ`,
			Packet: &Pingreq{},
		},
		{
			Name: "v5/PINGRESP", Version: V5, Spec: "MQTT 5 §3.13",
			Hex:    `d0 00  // PINGRESP`,
			Packet: &Pingresp{},
		},
		{
			Name: "v5/DISCONNECT normal omits reason code", Version: V5, Spec: "MQTT 5 §3.14.2.1",
			Hex:    `e0 00  // DISCONNECT, remaining length 0: normal disconnection`,
			Packet: &Disconnect{},
		},
		{
			Name: "v5/DISCONNECT with will", Version: V5, Spec: "MQTT 5 §3.14.2.2.1",
			Hex:    `e0 01  04  // DISCONNECT, remaining length 1, disconnect with will message; no property length`,
			Packet: &Disconnect{ReasonCode: DisconnectWithWill},
		},
		{
			Name: "v5/DISCONNECT every DISCONNECT property", Version: V5, Spec: "MQTT 5 §3.14.2.2",
			Hex: `
				e0 1b                    // DISCONNECT, remaining length 27
				9c                       // use another server
				19                       // property length 25
				  11 00 00 00 00         //   session expiry interval 0
				  1c 00 03 "srv"         //   server reference
				  1f 00 04 "move"        //   reason string
				  26 00 01 "k" 00 01 "v" //   user property`,
			Packet: &Disconnect{ReasonCode: UseAnotherServer, Props: props(func(p *Properties) {
				p.SetSessionExpiry(0)
				p.SetServerReference("srv")
				p.SetReasonString("move")
				p.User = []UserProperty{{Key: "k", Value: "v"}}
			})},
		},
		{
			Name: "v5/DISCONNECT explicit normal", Version: V5, Spec: "MQTT 5 §3.14.2.1", NonCanonical: true,
			Hex:    `e0 02  00  00  // DISCONNECT, normal disconnection, property length 0`,
			Packet: &Disconnect{},
		},
		{
			Name: "v5/AUTH success omits reason code", Version: V5, Spec: "MQTT 5 §3.15.2.1",
			Hex:    `f0 00  // AUTH, remaining length 0: success`,
			Packet: &Auth{},
		},
		{
			Name: "v5/AUTH every AUTH property", Version: V5, Spec: "MQTT 5 §3.15.2.2",
			Hex: `
				f0 1a                    // AUTH, remaining length 26
				18                       // continue authentication
				18                       // property length 24
				  15 00 04 "SCRM"        //   authentication method
				  16 00 03 01 02 03      //   authentication data
				  1f 00 01 "x"           //   reason string
				  26 00 01 "k" 00 01 "v" //   user property`,
			Packet: &Auth{ReasonCode: ContinueAuthentication, Props: props(func(p *Properties) {
				p.SetAuthMethod("SCRM")
				p.SetAuthData([]byte{1, 2, 3})
				p.SetReasonString("x")
				p.User = []UserProperty{{Key: "k", Value: "v"}}
			})},
		},
		{
			Name: "v5/AUTH re-authenticate", Version: V5, Spec: "MQTT 5 §4.12.1",
			Hex: `
				f0 09              // AUTH, remaining length 9
				19                 // re-authenticate
				07                 // property length 7
				  15 00 04 "SCRM"  //   authentication method`,
			Packet: &Auth{ReasonCode: ReAuthenticate, Props: props(func(p *Properties) { p.SetAuthMethod("SCRM") })},
		},
		{
			Name: "v5/AUTH reason code without property length", Version: V5, Spec: "MQTT 5 §3.15.2.2.1",
			NonCanonical: true,
			Hex:          `f0 01  18  // AUTH, remaining length 1, continue authentication`,
			Packet:       &Auth{ReasonCode: ContinueAuthentication},
		},
	}
}

// props builds a Properties value with its setters.
func props(set func(p *Properties)) Properties {
	var p Properties
	set(&p)
	return p
}
