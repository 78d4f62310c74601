package mqttclient

import (
	"context"
	"fmt"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// PublishAsync queues p for sending and returns once it is encoded (the
// caller may then reuse p and its payload). At QoS 1 and 2 it first waits,
// with ctx, for a slot in the in-flight window, and done (if not nil) is
// called exactly once: with nil when the broker has acknowledged the
// message, with a *ReasonError if it refused it, or with the connection's
// error if the connection ended first. At QoS 0 done is never called.
//
// The client sets the packet identifier (and a topic alias when
// Options.TopicAliases is on); Dup, Retain, Props and Payload are sent as
// given.
func (c *Client) PublishAsync(ctx context.Context, p *packet.Publish, done func(error)) error {
	if p.QoS > c.info.MaximumQoS {
		return fmt.Errorf("%w: QoS %d exceeds the broker's maximum QoS %d", ErrNotAllowed, p.QoS, c.info.MaximumQoS)
	}
	if p.Retain && !c.info.RetainAvailable {
		return fmt.Errorf("%w: the broker does not support retained messages", ErrNotAllowed)
	}
	if p.QoS > 0 {
		select {
		case c.window <- struct{}{}:
		case <-ctx.Done():
			return ctx.Err()
		case <-c.done:
			return c.Err()
		}
	}
	err := c.enqueuePublish(ctx, p, done)
	if err != nil && p.QoS > 0 {
		<-c.window
	}
	return err
}

// Publish sends p and, at QoS 1 and 2, waits for its acknowledgement. At
// QoS 0 it returns once p is queued.
func (c *Client) Publish(ctx context.Context, p *packet.Publish) error {
	if p.QoS == 0 {
		return c.PublishAsync(ctx, p, nil)
	}
	res := make(chan error, 1)
	if err := c.PublishAsync(ctx, p, func(err error) { res <- err }); err != nil {
		return err
	}
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (c *Client) enqueuePublish(ctx context.Context, p *packet.Publish, done func(error)) error {
	c.mu.Lock()
	for c.mu.err == nil && !c.mu.final && len(c.mu.out) >= c.maxPending {
		sp := c.mu.space
		if sp == nil {
			sp = make(chan struct{})
			c.mu.space = sp
		}
		c.mu.Unlock()
		select {
		case <-sp:
		case <-ctx.Done():
			return ctx.Err()
		}
		c.mu.Lock()
	}
	defer c.mu.Unlock()
	if err := c.closedErrLocked(); err != nil {
		return err
	}
	pub := &c.mu.pub
	*pub = *p
	if p.QoS > 0 {
		if pub.PacketID = c.nextIDLocked(); pub.PacketID == 0 {
			return fmt.Errorf("%w: no free packet identifier", ErrNotAllowed)
		}
	} else {
		pub.PacketID = 0
	}
	newAlias := c.aliasLocked(pub)
	start := len(c.mu.out)
	out, err := pub.Append(c.mu.out, c.version)
	if err == nil && c.info.MaximumPacketSize > 0 && uint32(len(out)-start) > c.info.MaximumPacketSize {
		err = fmt.Errorf("%w: %d-byte PUBLISH exceeds the broker's maximum packet size %d",
			ErrNotAllowed, len(out)-start, c.info.MaximumPacketSize)
	}
	if err != nil {
		c.mu.out = out[:start]
		if newAlias {
			delete(c.mu.aliasOut, p.Topic)
		}
		return fmt.Errorf("mqttclient: publish to %q: %w", p.Topic, err)
	}
	c.mu.out = out
	if p.QoS > 0 {
		c.mu.inflight[pub.PacketID] = outbound{qos: p.QoS, done: done}
	}
	c.trace(true, pub)
	if start == 0 {
		c.kick()
	}
	return nil
}

// aliasLocked replaces pub's topic by an alias when aliases are on. It
// reports whether it assigned a new alias.
func (c *Client) aliasLocked(pub *packet.Publish) bool {
	max := c.info.TopicAliasMaximum
	if !c.opts.TopicAliases || c.version != packet.V5 || max == 0 || pub.Props.Has(packet.PropTopicAlias) {
		return false
	}
	if a, ok := c.mu.aliasOut[pub.Topic]; ok {
		pub.Props.SetTopicAlias(a)
		pub.Topic = ""
		return false
	}
	if len(c.mu.aliasOut) >= int(max) {
		return false
	}
	if c.mu.aliasOut == nil {
		c.mu.aliasOut = make(map[string]uint16)
	}
	a := uint16(len(c.mu.aliasOut) + 1)
	c.mu.aliasOut[pub.Topic] = a
	pub.Props.SetTopicAlias(a)
	return true
}

// onAck completes an outbound QoS 1/2 exchange step (reader goroutine).
func (c *Client) onAck(a *packet.Ack) {
	switch a.Kind {
	case packet.PUBACK, packet.PUBCOMP:
		c.mu.Lock()
		o, ok := c.mu.inflight[a.PacketID]
		if !ok || (a.Kind == packet.PUBACK) != (o.qos == 1) || (a.Kind == packet.PUBCOMP && !o.rel) {
			// Not ours (a leftover of an earlier connection of the session).
			c.mu.Unlock()
			return
		}
		delete(c.mu.inflight, a.PacketID)
		c.mu.Unlock()
		c.complete(o, a)
	case packet.PUBREC:
		c.mu.Lock()
		o, ok := c.mu.inflight[a.PacketID]
		switch {
		case ok && o.qos == 2 && a.ReasonCode.IsError():
			delete(c.mu.inflight, a.PacketID)
			c.mu.Unlock()
			c.complete(o, a)
			return
		case ok && o.qos == 2:
			o.rel = true
			c.mu.inflight[a.PacketID] = o
			c.mu.Unlock()
			c.queueAck(packet.PUBREL, a.PacketID, packet.Success)
		default:
			c.mu.Unlock()
			c.queueAck(packet.PUBREL, a.PacketID, packet.PacketIdentifierNotFound)
		}
	case packet.PUBREL:
		code := packet.Success
		if _, ok := c.qos2In[a.PacketID]; ok {
			delete(c.qos2In, a.PacketID)
		} else {
			code = packet.PacketIdentifierNotFound
		}
		c.queueAck(packet.PUBCOMP, a.PacketID, code)
	}
}

// complete releases o's window slot and tells its owner how it ended.
func (c *Client) complete(o outbound, a *packet.Ack) {
	<-c.window
	if o.done == nil {
		return
	}
	var err error
	if a.ReasonCode.IsError() {
		err = &ReasonError{Packet: a.Kind, Code: a.ReasonCode, Reason: a.Props.ReasonString}
	}
	o.done(err)
}

// queueAck encodes an acknowledgement into the reader's pending acks.
func (c *Client) queueAck(kind packet.Type, id uint16, code packet.ReasonCode) {
	if c.version != packet.V5 {
		code = packet.Success
	}
	c.ack = packet.Ack{Kind: kind, PacketID: id, ReasonCode: code}
	if b, err := c.ack.Append(c.acks, c.version); err == nil {
		c.acks = b
		c.trace(true, &c.ack)
	}
}

// flushAcks hands the pending acknowledgements to the writer. They are not
// bounded by MaxPending: the reader must never wait for the writer.
func (c *Client) flushAcks() {
	if len(c.acks) == 0 {
		return
	}
	c.mu.Lock()
	wasEmpty := len(c.mu.out) == 0
	if c.mu.err == nil && !c.mu.final {
		c.mu.out = append(c.mu.out, c.acks...)
	}
	c.mu.Unlock()
	c.acks = c.acks[:0]
	if wasEmpty {
		c.kick()
	}
}
