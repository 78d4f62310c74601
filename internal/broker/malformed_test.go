package broker_test

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
	"github.com/sextantmq/sextant/internal/mqtt/packettest"
)

var seedFlag = flag.Uint64("seed", 0, "seed for randomized tests (0: time-based, printed)")

func seed(t *testing.T) uint64 {
	s := *seedFlag
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	t.Logf("seed %d (rerun with -seed %d)", s, s)
	return s
}

// TestInvalidPacketVectors sends every invalid vector of packettest where it
// belongs (CONNECT vectors first on a fresh connection, the others after a
// valid CONNECT of the vector's version) and checks the answer: MQTT 5
// connections get DISCONNECT with the vector's reason code, then the close;
// 3.1.1 connections and connections before CONNECT are closed with no
// packet, except CONNACK for an unsupported protocol version.
func TestInvalidPacketVectors(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	for i, v := range packettest.Invalid() {
		if errors.Is(v.Err, io.ErrUnexpectedEOF) {
			continue // a truncated packet is not an error until the stream ends
		}
		b := v.Bytes()
		isConnect := packet.Type(b[0]>>4) == packet.CONNECT
		ver := v.Version
		if ver == 0 || isConnect {
			ver = packet.V311
			if len(b) > 8 && b[8] == 5 {
				ver = packet.V5
			}
		}
		r := n.Raw(ver)
		if !isConnect && v.Version != 0 {
			cp := connect5(fmt.Sprint("vec", i), true, 0)
			cp.Version = v.Version
			r.Send(cp)
			if ack := brokertest.Expect[*packet.Connack](r); ack.ReasonCode != packet.Success {
				t.Fatalf("%s: CONNACK %s", v.Name, packet.Describe(ack))
			}
		}
		if err := r.SendBytes(b); err != nil {
			t.Fatalf("%s: %v", v.Name, err)
		}
		got := r.Closed()
		switch {
		case !isConnect && v.Version == packet.V5:
			if len(got) != 1 {
				t.Errorf("%s: got %d packets before close, want DISCONNECT %v", v.Name, len(got), v.Code)
				continue
			}
			if d, ok := got[0].(*packet.Disconnect); !ok || d.ReasonCode != v.Code {
				t.Errorf("%s: got %s, want DISCONNECT %v", v.Name, packet.Describe(got[0]), v.Code)
			}
		case errors.Is(v.Err, packet.ErrUnsupportedVersion):
			if len(got) != 1 {
				t.Errorf("%s: got %d packets, want CONNACK unsupported protocol version", v.Name, len(got))
				continue
			}
			if a, ok := got[0].(*packet.Connack); !ok || a.ReasonCode != packet.UnsupportedProtocolVersion {
				t.Errorf("%s: got %s", v.Name, packet.Describe(got[0]))
			}
		default:
			for _, g := range got {
				if a, ok := g.(*packet.Connack); ok && a.ReasonCode.IsError() {
					continue // a v5 server may say why it refuses a CONNECT
				}
				t.Errorf("%s: got %s before close", v.Name, packet.Describe(g))
			}
		}
	}
	if p := brokertest.Value(n.Metrics().Panics); p != 0 {
		t.Fatalf("%v panics", p)
	}
}

// TestProtocolViolations covers violations only the session can see: MQTT 5
// connections get DISCONNECT with the reason code, 3.1.1 ones are closed.
func TestProtocolViolations(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	expiry := &packet.Disconnect{}
	expiry.Props.SetSessionExpiry(60)
	cases := []struct {
		name   string
		send   packet.Packet
		v5only bool
	}{
		{"second CONNECT", connect5("x", true, 0), false},
		{"AUTH without method", &packet.Auth{ReasonCode: packet.ContinueAuthentication}, true},
		{"CONNACK from a client", &packet.Connack{}, false},
		{"SUBACK from a client", &packet.Suback{PacketID: 1, Codes: []packet.ReasonCode{0}}, false},
		{"PINGRESP from a client", &packet.Pingresp{}, false},
		{"session expiry set on DISCONNECT after 0", expiry, true},
		{"wildcard in PUBLISH topic", wildcardPublish{}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, v := range []packet.Version{packet.V5, packet.V311} {
				if tc.v5only && v != packet.V5 {
					continue
				}
				cp := connect5("c", true, 0)
				cp.Version = v
				r, _ := rawConnect(t, n, cp)
				if cp, ok := tc.send.(*packet.Connect); ok {
					cp.Version = v
				}
				b, err := tc.send.Append(nil, v)
				if err != nil {
					t.Fatal(err)
				}
				_ = r.SendBytes(b)
				if v == packet.V5 {
					r.ExpectDisconnect(packet.ProtocolError)
				} else {
					r.ExpectClosedSilently()
				}
			}
		})
	}
}

// wildcardPublish is a QoS 0 PUBLISH to "a/+", which the encoder refuses
// to produce.
type wildcardPublish struct{}

func (wildcardPublish) Type() packet.Type { return packet.PUBLISH }

func (wildcardPublish) Append(dst []byte, v packet.Version) ([]byte, error) {
	body := []byte{0, 3, 'a', '/', '+'}
	if v == packet.V5 {
		body = append(body, 0) // no properties
	}
	body = append(body, 'x')
	return append(append(dst, 0x30, byte(len(body))), body...), nil
}

// TestAcknowledgementOfTheWrongFlow: PUBACK for a QoS 2 delivery is a
// protocol error.
func TestAcknowledgementOfTheWrongFlow(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	for _, v := range []packet.Version{packet.V5, packet.V311} {
		cp := connect5("s", true, 0)
		cp.Version = v
		s, _ := rawConnect(t, n, cp)
		s.Subscribe(1, sub("w", 2))
		p, _ := rawConnect(t, n, connect5("p", true, 0))
		publishAcked(t, p, 1, pub("w", 2, 0, "x"))
		m := brokertest.Expect[*packet.Publish](s)
		s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
		if v == packet.V5 {
			s.ExpectDisconnect(packet.ProtocolError)
		} else {
			s.ExpectClosedSilently()
		}
	}
}

// TestMalformedCorpusKeepsNodeServing throws the invalid vectors, mutated
// valid vectors and random garbage at the node on many connections at once,
// while a publisher and a subscriber exchange QoS 1 messages. The pair must
// get every message, the node must still accept clients afterwards, and
// sextant_panics_total must stay 0.
func TestMalformedCorpusKeepsNodeServing(t *testing.T) {
	rng := rand.New(rand.NewPCG(seed(t), 0x5ec7a47))
	cfg := brokertest.Config(t)
	cfg.ConnectTimeout = time.Second
	cfg.MaxPacketSize = 64 << 10
	n := brokertest.Start(t, cfg)

	// The corpus, built up front from the seeded generator.
	var corpus [][]byte
	for _, v := range packettest.Invalid() {
		corpus = append(corpus, v.Bytes())
	}
	valid := packettest.Valid()
	for i := 0; i < 300; i++ {
		b := append([]byte(nil), valid[rng.IntN(len(valid))].Bytes()...)
		for k := 0; k <= rng.IntN(4); k++ {
			b[rng.IntN(len(b))] = byte(rng.UintN(256))
		}
		corpus = append(corpus, b)
	}
	for i := 0; i < 100; i++ {
		b := make([]byte, 1+rng.IntN(300))
		for j := range b {
			b[j] = byte(rng.UintN(256))
		}
		corpus = append(corpus, b)
	}
	type job struct {
		preface []byte // a valid CONNECT, or nil
		body    []byte
	}
	var jobs []job
	c5, _ := connect5("", true, 0).Append(nil, packet.V5)
	c3, _ := connect3("", true).Append(nil, packet.V311)
	for _, b := range corpus {
		for _, pre := range [][]byte{nil, c5, c3} {
			jobs = append(jobs, job{pre, b})
		}
	}
	t.Logf("%d connections", len(jobs))

	// The pair that must keep working.
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.Subscribe(1, sub("alive", 1))
	p, _ := rawConnect(t, n, connect5("p", true, 0))
	next := 0
	exchange := func() {
		t.Helper()
		next++
		publishAcked(t, p, uint16(next), pub("alive", 1, 0, fmt.Sprint(next)))
		m := s.ExpectPublish("alive", fmt.Sprint(next))
		s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: m.PacketID})
	}

	work := make(chan job)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range work {
				if err := attack(n.MQTT(), j.preface, j.body); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	for i, j := range jobs {
		work <- j
		if i%50 == 0 {
			exchange()
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	exchange()
	rawConnect(t, n, connect5("after", true, 0))
	if got := brokertest.Value(n.Metrics().Panics); got != 0 {
		t.Fatalf("sextant_panics_total = %v", got)
	}
}

// attack sends preface and body on a new connection, half-closes it, and
// waits for the node to close its side.
func attack(addr string, preface, body []byte) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fmt.Errorf("dial: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	_, _ = c.Write(append(append([]byte(nil), preface...), body...))
	_ = c.(*net.TCPConn).CloseWrite()
	if _, err := io.Copy(io.Discard, c); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("node did not close a connection after % x", body)
		}
	}
	return nil
}
