package mqttclient

import (
	"fmt"
	"time"

	"github.com/sextantmq/sextant/internal/clock"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// flushAcksAt is the size of owed acknowledgements past which the reader
// hands them to the writer even though more input is buffered.
const flushAcksAt = 16 << 10

// readLoop is the reader goroutine: it decodes and handles packets until
// the connection ends.
func (c *Client) readLoop() {
	defer c.wg.Done()
	for {
		// Hand over owed acks before a read that may block; while input is
		// buffered, keep batching them.
		if c.r.Buffered() == 0 || len(c.acks) >= flushAcksAt {
			c.flushAcks()
		}
		p, err := c.r.Next()
		if err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrConnectionLost, err))
			return
		}
		c.trace(false, p)
		if err := c.handle(p); err != nil {
			c.fail(fmt.Errorf("%w: %w", ErrConnectionLost, err))
			return
		}
	}
}

func (c *Client) handle(p packet.Packet) error {
	switch p := p.(type) {
	case *packet.Publish:
		return c.onPublish(p)
	case *packet.Ack:
		c.onAck(p)
	case *packet.Suback:
		cp := &packet.Suback{PacketID: p.PacketID, Props: copyProps(&p.Props),
			Codes: append([]packet.ReasonCode(nil), p.Codes...)}
		c.answer(p.PacketID, cp)
	case *packet.Unsuback:
		cp := &packet.Unsuback{PacketID: p.PacketID, Props: copyProps(&p.Props),
			Codes: append([]packet.ReasonCode(nil), p.Codes...)}
		c.answer(p.PacketID, cp)
	case *packet.Pingresp:
		c.mu.Lock()
		var ch chan struct{}
		if len(c.mu.pings) > 0 {
			ch = c.mu.pings[0].ch
			c.mu.pings = c.mu.pings[1:]
		}
		c.mu.Unlock()
		if ch != nil {
			close(ch)
		}
	case *packet.Disconnect:
		return &ReasonError{Packet: packet.DISCONNECT, Code: p.ReasonCode,
			Reason: p.Props.ReasonString, ServerReference: p.Props.ServerReference}
	default:
		return fmt.Errorf("%w: unexpected %s", ErrProtocol, p.Type())
	}
	return nil
}

// answer hands a SUBACK or UNSUBACK to the request waiting for it.
func (c *Client) answer(id uint16, p packet.Packet) {
	c.mu.Lock()
	ch := c.mu.reqs[id]
	delete(c.mu.reqs, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- p // buffered; the waiter may have gone
	}
}

// onPublish resolves a topic alias, delivers p to the handler (once per
// QoS 2 packet id) and queues the acknowledgement.
func (c *Client) onPublish(p *packet.Publish) error {
	if c.version == packet.V5 && p.Props.Has(packet.PropTopicAlias) {
		a := p.Props.TopicAlias
		if a == 0 || a > c.aliasInMax {
			return fmt.Errorf("%w: topic alias %d over our maximum %d", ErrProtocol, a, c.aliasInMax)
		}
		if c.aliasIn == nil {
			c.aliasIn = make([]string, c.aliasInMax+1)
		}
		if p.Topic != "" {
			c.aliasIn[a] = p.Topic
		} else if p.Topic = c.aliasIn[a]; p.Topic == "" {
			return fmt.Errorf("%w: unknown topic alias %d", ErrProtocol, a)
		}
	}
	switch p.QoS {
	case 0:
		c.deliver(p)
	case 1:
		c.deliver(p)
		c.queueAck(packet.PUBACK, p.PacketID, packet.Success)
	case 2:
		if _, seen := c.qos2In[p.PacketID]; !seen {
			c.qos2In[p.PacketID] = struct{}{}
			c.deliver(p)
		}
		c.queueAck(packet.PUBREC, p.PacketID, packet.Success)
	}
	return nil
}

func (c *Client) deliver(p *packet.Publish) {
	if c.opts.OnPublish != nil {
		c.opts.OnPublish(p)
	}
}

// copyProps copies the slices of p that alias the read buffer.
func copyProps(p *packet.Properties) packet.Properties {
	cp := *p
	cp.User = append([]packet.UserProperty(nil), p.User...)
	cp.CorrelationData = append([]byte(nil), p.CorrelationData...)
	cp.AuthData = append([]byte(nil), p.AuthData...)
	cp.SubscriptionIDs = append([]uint32(nil), p.SubscriptionIDs...)
	return cp
}

// writeLoop is the writer goroutine: it writes whatever is queued, and
// keeps the connection alive.
func (c *Client) writeLoop() {
	defer c.wg.Done()
	var tick <-chan time.Time
	var timer clock.Timer
	if ka := c.info.KeepAlive; ka > 0 {
		timer = c.clk.NewTimer(ka * 3 / 4)
		defer timer.Stop()
		tick = timer.C()
	}
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		case <-tick:
			if err := c.keepAlive(timer); err != nil {
				c.fail(err)
				return
			}
		}
		if !c.flush() {
			return
		}
	}
}

// flush writes everything queued, one buffer per write. It reports false
// when the writer must stop.
func (c *Client) flush() bool {
	for {
		c.mu.Lock()
		if c.mu.err != nil {
			c.mu.Unlock()
			return false
		}
		if len(c.mu.out) == 0 {
			c.mu.Unlock()
			return true
		}
		buf := c.mu.out
		c.mu.out, c.mu.spare = c.mu.spare[:0], nil
		if c.mu.space != nil {
			close(c.mu.space)
			c.mu.space = nil
		}
		final := c.mu.final
		c.mu.Unlock()

		_, err := c.conn.Write(buf)
		now := c.clk.Now()
		c.mu.Lock()
		c.mu.lastWrite = now
		if cap(buf) <= 4*c.maxPending {
			c.mu.spare = buf[:0]
		}
		c.mu.Unlock()
		if err != nil {
			c.fail(fmt.Errorf("%w: write: %w", ErrConnectionLost, err))
			return false
		}
		if final {
			close(c.flushed)
			return false
		}
	}
}

// keepAlive runs when the keepalive timer fires: it fails the connection if
// the oldest ping is a whole interval old, queues a PINGREQ if nothing was
// written for three quarters of the interval, and re-arms the timer.
func (c *Client) keepAlive(timer clock.Timer) error {
	ka := c.info.KeepAlive
	now := c.clk.Now()
	c.mu.Lock()
	if len(c.mu.pings) > 0 && now.Sub(c.mu.pings[0].sent) >= ka {
		c.mu.Unlock()
		return fmt.Errorf("%w: %w: no PINGRESP within %v", ErrConnectionLost, ErrKeepAlive, ka)
	}
	next := ka*3/4 - now.Sub(c.mu.lastWrite)
	if next <= 0 && !c.mu.final {
		p := &packet.Pingreq{}
		c.mu.out, _ = p.Append(c.mu.out, c.version)
		c.mu.pings = append(c.mu.pings, pending{sent: now})
		c.trace(true, p)
		next = ka * 3 / 4
	}
	if len(c.mu.pings) > 0 {
		if d := ka - now.Sub(c.mu.pings[0].sent); d < next {
			next = d
		}
	}
	c.mu.Unlock()
	timer.Reset(max(next, time.Millisecond))
	return nil
}
