package clustertest

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Timeout bounds every wait of a client helper. In a synctest bubble it is
// fake time, so it only needs to exceed what the cluster may legitimately
// take (failure detection, reconnection backoff).
const Timeout = 2 * time.Minute

// Message is a PUBLISH a client received.
type Message struct {
	Topic   string
	Payload string
	QoS     byte
	Retain  bool
	Dup     bool
	// Index is the sx-index user property of a sequenced topic's message
	// (0: none).
	Index uint64
}

func (m Message) String() string {
	return fmt.Sprintf("%s q%d r%v %q", m.Topic, m.QoS, m.Retain, m.Payload)
}

// Will is a CONNECT's will message.
type Will struct {
	Topic   string
	Payload string
	QoS     byte
	Retain  bool
	Delay   uint32 // seconds
}

// ConnectOptions are a client's CONNECT settings.
type ConnectOptions struct {
	// Resume asks for the existing session (clean start 0); the default is a
	// clean start.
	Resume bool
	// SessionExpiry in seconds (0: the session ends with the connection).
	SessionExpiry uint32
	Will          *Will
	// ReceiveMaximum (default 65535).
	ReceiveMaximum uint16
	// Receiver is the QoS 2 receiving state to use, kept by the caller
	// across the connections of one session (nil: a new one, as a client
	// that forgot it). It is cleared when the server has no session.
	Receiver *Receiver
}

// Receiver is a client's QoS 2 receiving state (MQTT's method B, 4.3.3):
// the packet ids it answered with PUBREC and has had no PUBREL for. A
// PUBLISH with such an id is a resend of a message the application has
// already (the DUP after a reconnection, or the same id again): it is
// answered with PUBREC and not handed on a second time. The state belongs
// to the session, not the connection: a client resuming its session keeps
// it, and only then does the server's resend after a reconnection (or its
// node's crash) stay exactly once.
type Receiver struct {
	mu   sync.Mutex
	held map[uint16]bool
	// resends counts the PUBLISHes recognised as resends.
	resends int
}

// NewReceiver returns an empty QoS 2 receiving state.
func NewReceiver() *Receiver { return &Receiver{held: map[uint16]bool{}} }

// received records a QoS 2 PUBLISH with id and reports whether it is new
// (to be handed to the application).
func (r *Receiver) received(id uint16) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.held[id] {
		r.resends++
		return false
	}
	r.held[id] = true
	return true
}

// released forgets id (PUBREL).
func (r *Receiver) released(id uint16) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.held, id)
}

// reset forgets every id: the server started a new session.
func (r *Receiver) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.held)
}

// Resends returns how many PUBLISHes were recognised as resends.
func (r *Receiver) Resends() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.resends
}

// Client is a small MQTT 5 client on Sextant's packet codec. It
// acknowledges every QoS 1/2 message it receives and collects them in
// Msgs; a QoS 2 message goes into Msgs once per packet id until its
// PUBREL (a correct QoS 2 receiver, through its Receiver).
type Client struct {
	T       testing.TB
	ID      string
	Connack *packet.Connack
	// Msgs receives every application message, in arrival order.
	Msgs chan Message
	// Done is closed when the connection has ended.
	Done chan struct{}

	conn net.Conn
	wmu  sync.Mutex
	recv *Receiver

	mu struct {
		sync.Mutex
		nextID     uint16
		pending    map[uint16]chan packet.Packet
		disconnect *packet.Disconnect
		err        error
	}
}

// connect runs the CONNECT exchange on c and starts the reader.
func connect(t testing.TB, c net.Conn, id string, o ConnectOptions) (*Client, error) {
	cl := &Client{T: t, ID: id, conn: c, Msgs: make(chan Message, 1<<16), Done: make(chan struct{})}
	cl.mu.pending = map[uint16]chan packet.Packet{}
	cl.recv = o.Receiver
	if cl.recv == nil {
		cl.recv = NewReceiver()
	}
	cp := &packet.Connect{ProtocolName: "MQTT", Version: packet.V5, CleanStart: !o.Resume, ClientID: id}
	rm := o.ReceiveMaximum
	if rm == 0 {
		rm = 65535
	}
	cp.Props.SetReceiveMaximum(rm)
	if o.SessionExpiry > 0 {
		cp.Props.SetSessionExpiry(o.SessionExpiry)
	}
	if w := o.Will; w != nil {
		cp.WillFlag, cp.WillTopic, cp.WillPayload, cp.WillQoS, cp.WillRetain = true, w.Topic, []byte(w.Payload), w.QoS, w.Retain
		if w.Delay > 0 {
			cp.WillProps.SetWillDelay(w.Delay)
		}
	}
	if err := cl.send(cp); err != nil {
		_ = c.Close()
		return nil, err
	}
	r := packet.NewReader(c, 0)
	r.SetVersion(packet.V5)
	_ = c.SetReadDeadline(time.Now().Add(Timeout))
	p, err := r.Next()
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("clustertest: %s: reading CONNACK: %w", id, err)
	}
	_ = c.SetReadDeadline(time.Time{})
	ack, ok := p.(*packet.Connack)
	if !ok {
		_ = c.Close()
		return nil, fmt.Errorf("clustertest: %s: got %s, want CONNACK", id, packet.Describe(p))
	}
	cp2 := *ack
	cl.Connack = &cp2
	if !ack.SessionPresent {
		cl.recv.reset()
	}
	if ack.ReasonCode != packet.Success {
		_ = c.Close()
		return cl, fmt.Errorf("clustertest: %s: CONNACK %v", id, ack.ReasonCode)
	}
	go cl.read(r)
	return cl, nil
}

func (cl *Client) send(p packet.Packet) error {
	b, err := p.Append(nil, packet.V5)
	if err != nil {
		return err
	}
	cl.wmu.Lock()
	defer cl.wmu.Unlock()
	_ = cl.conn.SetWriteDeadline(time.Now().Add(Timeout))
	_, err = cl.conn.Write(b)
	return err
}

func (cl *Client) read(r *packet.Reader) {
	defer close(cl.Done)
	defer func() {
		cl.mu.Lock()
		for id, ch := range cl.mu.pending {
			close(ch)
			delete(cl.mu.pending, id)
		}
		cl.mu.Unlock()
	}()
	for {
		p, err := r.Next()
		if err != nil {
			cl.mu.Lock()
			cl.mu.err = err
			cl.mu.Unlock()
			_ = cl.conn.Close()
			return
		}
		switch p := p.(type) {
		case *packet.Publish:
			m := Message{Topic: p.Topic, Payload: string(p.Payload), QoS: p.QoS, Retain: p.Retain, Dup: p.Dup}
			for _, u := range p.Props.User {
				if u.Key == "sx-index" {
					m.Index, _ = strconv.ParseUint(u.Value, 10, 64)
				}
			}
			switch p.QoS {
			case 0:
				cl.Msgs <- m
			case 1:
				// Acknowledged before the test sees it: a test that
				// closes the connection once it has its messages does
				// not leave the last one unacknowledged (the broker
				// would send it again on resume, as MQTT says).
				_ = cl.send(&packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID})
				cl.Msgs <- m
			case 2:
				// Method B: the id is stored before the message is
				// handed on, and PUBREC follows.
				if cl.recv.received(p.PacketID) {
					cl.Msgs <- m
				}
				_ = cl.send(&packet.Ack{Kind: packet.PUBREC, PacketID: p.PacketID})
			}
		case *packet.Ack:
			a := *p // the reader reuses its packets; waiters may read theirs later
			p = &a
			switch p.Kind {
			case packet.PUBREL:
				cl.recv.released(p.PacketID)
				_ = cl.send(&packet.Ack{Kind: packet.PUBCOMP, PacketID: p.PacketID})
			case packet.PUBREC:
				if p.ReasonCode.IsError() {
					cl.complete(p.PacketID, p)
					continue
				}
				_ = cl.send(&packet.Ack{Kind: packet.PUBREL, PacketID: p.PacketID})
			default:
				cl.complete(p.PacketID, p)
			}
		case *packet.Suback:
			sa := *p
			sa.Codes = append([]packet.ReasonCode(nil), p.Codes...)
			cl.complete(p.PacketID, &sa)
		case *packet.Unsuback:
			cl.complete(p.PacketID, p)
		case *packet.Disconnect:
			d := *p
			cl.mu.Lock()
			cl.mu.disconnect = &d
			cl.mu.Unlock()
		}
	}
}

func (cl *Client) complete(id uint16, p packet.Packet) {
	cl.mu.Lock()
	ch := cl.mu.pending[id]
	delete(cl.mu.pending, id)
	cl.mu.Unlock()
	if ch != nil {
		ch <- p
	}
}

// expect allocates a packet id and a channel for its answer.
func (cl *Client) expect() (uint16, chan packet.Packet) {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	for {
		cl.mu.nextID++
		if cl.mu.nextID == 0 {
			cl.mu.nextID = 1
		}
		if _, busy := cl.mu.pending[cl.mu.nextID]; !busy {
			break
		}
	}
	ch := make(chan packet.Packet, 1)
	cl.mu.pending[cl.mu.nextID] = ch
	return cl.mu.nextID, ch
}

func (cl *Client) wait(ch chan packet.Packet, what string) (packet.Packet, error) {
	t := time.NewTimer(Timeout)
	defer t.Stop()
	select {
	case p, ok := <-ch:
		if !ok {
			return nil, fmt.Errorf("clustertest: %s: %s: connection closed", cl.ID, what)
		}
		return p, nil
	case <-t.C:
		return nil, fmt.Errorf("clustertest: %s: %s: no answer within %v", cl.ID, what, Timeout)
	}
}

// Subscribe subscribes to filters at qos and fails the test unless every
// one is granted.
func (cl *Client) Subscribe(qos byte, filters ...string) {
	cl.T.Helper()
	cl.SubscribeWith(nil, qos, filters...)
}

// SubscribeWith is Subscribe with user properties on the SUBSCRIBE (such
// as sx-from).
func (cl *Client) SubscribeWith(user map[string]string, qos byte, filters ...string) {
	cl.T.Helper()
	for i, c := range cl.SubscribeCodes(user, qos, filters...) {
		if c.IsError() {
			cl.T.Fatalf("clustertest: %s: subscribe %q refused: %v", cl.ID, filters[i], c)
		}
	}
}

// SubscribeCodes subscribes and returns the SUBACK's reason codes.
func (cl *Client) SubscribeCodes(user map[string]string, qos byte, filters ...string) []packet.ReasonCode {
	cl.T.Helper()
	id, ch := cl.expect()
	sub := &packet.Subscribe{PacketID: id}
	for k, v := range user {
		sub.Props.User = append(sub.Props.User, packet.UserProperty{Key: k, Value: v})
	}
	for _, f := range filters {
		sub.Subs = append(sub.Subs, packet.Subscription{Filter: f, QoS: qos})
	}
	if err := cl.send(sub); err != nil {
		cl.T.Fatalf("clustertest: %s: subscribe: %v", cl.ID, err)
	}
	p, err := cl.wait(ch, "SUBACK")
	if err != nil {
		cl.T.Fatal(err)
	}
	return append([]packet.ReasonCode(nil), p.(*packet.Suback).Codes...)
}

// Unsubscribe removes subscriptions.
func (cl *Client) Unsubscribe(filters ...string) {
	cl.T.Helper()
	id, ch := cl.expect()
	if err := cl.send(&packet.Unsubscribe{PacketID: id, Filters: filters}); err != nil {
		cl.T.Fatalf("clustertest: %s: unsubscribe: %v", cl.ID, err)
	}
	if _, err := cl.wait(ch, "UNSUBACK"); err != nil {
		cl.T.Fatal(err)
	}
}

// Publish publishes and, for QoS 1/2, waits for the acknowledgement
// (PUBACK, or PUBCOMP after PUBREC/PUBREL) and returns its reason code.
func (cl *Client) Publish(topic string, qos byte, retain bool, payload string) packet.ReasonCode {
	cl.T.Helper()
	code, err := cl.TryPublish(topic, qos, retain, payload)
	if err != nil {
		cl.T.Fatal(err)
	}
	return code
}

// TryPublish is Publish returning errors instead of failing the test.
func (cl *Client) TryPublish(topic string, qos byte, retain bool, payload string) (packet.ReasonCode, error) {
	p := &packet.Publish{Topic: topic, QoS: qos, Retain: retain, Payload: []byte(payload)}
	if qos == 0 {
		return packet.Success, cl.send(p)
	}
	id, ch := cl.expect()
	p.PacketID = id
	if err := cl.send(p); err != nil {
		return 0, err
	}
	ack, err := cl.wait(ch, "publish acknowledgement")
	if err != nil {
		return 0, err
	}
	return ack.(*packet.Ack).ReasonCode, nil
}

// PublishAsync sends a QoS 1/2 PUBLISH without waiting for its
// acknowledgement (a publisher's in-flight window); the result receives the
// acknowledgement's reason code, or an error when the connection ends or
// Timeout passes first. dup sets the DUP flag with the given packet id (a
// retransmission; 0: a new packet id).
func (cl *Client) PublishAsync(topic string, qos byte, payload string, dupID uint16) (packetID uint16, result <-chan AckResult) {
	out := make(chan AckResult, 1)
	p := &packet.Publish{Topic: topic, QoS: qos, Payload: []byte(payload)}
	var ch chan packet.Packet
	if dupID != 0 {
		p.PacketID, p.Dup = dupID, true
		ch = make(chan packet.Packet, 1)
		cl.mu.Lock()
		cl.mu.pending[dupID] = ch
		cl.mu.Unlock()
	} else {
		p.PacketID, ch = cl.expect()
	}
	if err := cl.send(p); err != nil {
		out <- AckResult{Err: err}
		return p.PacketID, out
	}
	go func() {
		ack, err := cl.wait(ch, "publish acknowledgement")
		if err != nil {
			out <- AckResult{Err: err}
			return
		}
		out <- AckResult{Code: ack.(*packet.Ack).ReasonCode}
	}()
	return p.PacketID, out
}

// AckResult is the outcome of an asynchronous publish.
type AckResult struct {
	Code packet.ReasonCode
	Err  error
}

// Next waits for the next message.
func (cl *Client) Next() Message {
	cl.T.Helper()
	t := time.NewTimer(Timeout)
	defer t.Stop()
	select {
	case m := <-cl.Msgs:
		return m
	case <-t.C:
		cl.T.Fatalf("clustertest: %s: no message within %v", cl.ID, Timeout)
		return Message{}
	}
}

// Collect waits for n messages and returns them in arrival order.
func (cl *Client) Collect(n int) []Message {
	cl.T.Helper()
	out := make([]Message, 0, n)
	for len(out) < n {
		out = append(out, cl.Next())
	}
	return out
}

// Pending returns the messages received and not yet consumed, without
// waiting.
func (cl *Client) Pending() []Message {
	var out []Message
	for {
		select {
		case m := <-cl.Msgs:
			out = append(out, m)
		default:
			return out
		}
	}
}

// Disconnected returns the DISCONNECT the server sent, if any.
func (cl *Client) Disconnected() *packet.Disconnect {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	return cl.mu.disconnect
}

// WaitClosed waits until the server has closed the connection.
func (cl *Client) WaitClosed() {
	cl.T.Helper()
	t := time.NewTimer(Timeout)
	defer t.Stop()
	select {
	case <-cl.Done:
	case <-t.C:
		cl.T.Fatalf("clustertest: %s: connection still open after %v", cl.ID, Timeout)
	}
}

// Close sends DISCONNECT (normal: no will) and closes the connection.
func (cl *Client) Close() {
	_ = cl.send(&packet.Disconnect{ReasonCode: packet.Success})
	cl.Drop()
}

// Drop closes the connection without DISCONNECT, as a client that vanished
// (its will is published).
func (cl *Client) Drop() {
	_ = cl.conn.Close()
	<-cl.Done
}

// Err returns why the connection ended (nil while it is open).
func (cl *Client) Err() error {
	cl.mu.Lock()
	defer cl.mu.Unlock()
	if errors.Is(cl.mu.err, net.ErrClosed) {
		return nil
	}
	return cl.mu.err
}
