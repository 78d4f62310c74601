package packet_test

import (
	"bytes"
	"testing"

	. "github.com/sextantmq/sextant/internal/mqtt/packet"
)

type benchCase struct {
	name string
	v    Version
	p    Packet
}

func benchCases() []benchCase {
	payload := bytes.Repeat([]byte{0x5a}, 64)
	props := Properties{User: []UserProperty{{Key: "trace", Value: "0af7651916cd43dd"}}}
	props.SetPayloadFormat(1)
	props.SetMessageExpiry(3600)
	props.SetContentType("application/json")
	props.SetResponseTopic("replies/client-42")
	props.SetCorrelationData([]byte("req-0001"))
	connect := &Connect{Version: V5, CleanStart: true, KeepAlive: 60, ClientID: "client-42",
		UsernameFlag: true, Username: "alice", PasswordFlag: true, Password: []byte("s3cret")}
	connect.Props.SetSessionExpiry(3600)
	connect.Props.SetReceiveMaximum(100)
	return []benchCase{
		{"CONNECT/v5", V5, connect},
		{"CONNECT/v311", V311, &Connect{Version: V311, CleanStart: true, KeepAlive: 60, ClientID: "client-42"}},
		{"PUBLISH-QoS0-64B/v311", V311, &Publish{Topic: "sensors/1/temp", Payload: payload}},
		{"PUBLISH-QoS0-64B/v5", V5, &Publish{Topic: "sensors/1/temp", Payload: payload}},
		{"PUBLISH-QoS1-64B/v5", V5, &Publish{QoS: 1, PacketID: 7, Topic: "sensors/1/temp", Payload: payload}},
		{"PUBLISH-QoS1-64B-props/v5", V5, &Publish{QoS: 1, PacketID: 7, Topic: "sensors/1/temp", Payload: payload, Props: props}},
		{"PUBACK/v5", V5, &Ack{Kind: PUBACK, PacketID: 7}},
		{"SUBSCRIBE/v5", V5, &Subscribe{PacketID: 3, Subs: []Subscription{
			{Filter: "sensors/+/temp", QoS: 1}, {Filter: "alerts/#", QoS: 2, NoLocal: true}}}},
	}
}

func BenchmarkDecode(b *testing.B) {
	for _, c := range benchCases() {
		enc, err := c.p.Append(nil, c.v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, _, err := Decode(enc, c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkEncode(b *testing.B) {
	for _, c := range benchCases() {
		buf := make([]byte, 0, 1024)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			enc, _ := c.p.Append(buf[:0], c.v)
			b.SetBytes(int64(len(enc)))
			for b.Loop() {
				if _, err := c.p.Append(buf[:0], c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// loopReader serves data over and over, as a busy socket would.
type loopReader struct {
	data []byte
	off  int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.data[l.off:])
	l.off = (l.off + n) % len(l.data)
	return n, nil
}

// BenchmarkReaderNext reads a stream of small packets; one op is one packet.
func BenchmarkReaderNext(b *testing.B) {
	streams := []struct {
		name   string
		v      Version
		topics int
		p      func(topic string) Packet
	}{
		{"PUBLISH-QoS0-64B/one-topic", V311, 1, func(t string) Packet { return &Publish{Topic: t, Payload: make([]byte, 64)} }},
		{"PUBLISH-QoS0-64B/16-topics", V311, 16, func(t string) Packet { return &Publish{Topic: t, Payload: make([]byte, 64)} }},
		{"PUBLISH-QoS1-64B-props/v5", V5, 16, func(t string) Packet {
			p := &Publish{QoS: 1, PacketID: 9, Topic: t, Payload: make([]byte, 64)}
			p.Props.SetMessageExpiry(60)
			p.Props.SetContentType("application/json")
			return p
		}},
		{"PUBACK/v5", V5, 1, func(string) Packet { return &Ack{Kind: PUBACK, PacketID: 9} }},
	}
	for _, s := range streams {
		var data []byte
		for i := range 256 {
			topic := "sensors/" + string(rune('a'+i%s.topics)) + "/temp"
			enc, err := s.p(topic).Append(nil, s.v)
			if err != nil {
				b.Fatal(err)
			}
			data = append(data, enc...)
		}
		b.Run(s.name, func(b *testing.B) {
			r := NewReader(&loopReader{data: data}, 0)
			r.SetVersion(s.v)
			b.ReportAllocs()
			b.SetBytes(int64(len(data) / 256))
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
