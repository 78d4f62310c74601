package mqttclient

import (
	"context"
	"fmt"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// Subscribe sends s (the client sets its packet identifier) and waits for
// the SUBACK. If the broker refused a filter, it returns the SUBACK together
// with a *ReasonError naming the first refused filter.
func (c *Client) Subscribe(ctx context.Context, s *packet.Subscribe) (*packet.Suback, error) {
	cp := *s
	resp, err := c.request(ctx, func(id uint16) packet.Packet { cp.PacketID = id; return &cp })
	if err != nil {
		return nil, err
	}
	sa, ok := resp.(*packet.Suback)
	if !ok {
		return nil, fmt.Errorf("%w: %s answers SUBSCRIBE", ErrProtocol, resp.Type())
	}
	if len(sa.Codes) != len(s.Subs) {
		return sa, fmt.Errorf("%w: SUBACK has %d codes for %d filters", ErrProtocol, len(sa.Codes), len(s.Subs))
	}
	for i, code := range sa.Codes {
		if code.IsError() {
			return sa, &ReasonError{Packet: packet.SUBACK, Code: code,
				Reason: fmt.Sprintf("filter %q%s", s.Subs[i].Filter, withReason(sa.Props.ReasonString))}
		}
	}
	return sa, nil
}

// Unsubscribe sends u and waits for the UNSUBACK (MQTT 5 reports a code per
// filter; an error code for a filter is returned as a *ReasonError).
func (c *Client) Unsubscribe(ctx context.Context, u *packet.Unsubscribe) (*packet.Unsuback, error) {
	cp := *u
	resp, err := c.request(ctx, func(id uint16) packet.Packet { cp.PacketID = id; return &cp })
	if err != nil {
		return nil, err
	}
	ua, ok := resp.(*packet.Unsuback)
	if !ok {
		return nil, fmt.Errorf("%w: %s answers UNSUBSCRIBE", ErrProtocol, resp.Type())
	}
	for i, code := range ua.Codes {
		if code.IsError() && i < len(u.Filters) {
			return ua, &ReasonError{Packet: packet.UNSUBACK, Code: code,
				Reason: fmt.Sprintf("filter %q%s", u.Filters[i], withReason(ua.Props.ReasonString))}
		}
	}
	return ua, nil
}

func withReason(s string) string {
	if s == "" {
		return ""
	}
	return ": " + s
}

// request sends the packet build makes for a fresh packet identifier and
// waits for the acknowledgement carrying that identifier.
func (c *Client) request(ctx context.Context, build func(id uint16) packet.Packet) (packet.Packet, error) {
	ch := make(chan packet.Packet, 1)
	c.mu.Lock()
	if err := c.closedErrLocked(); err != nil {
		c.mu.Unlock()
		return nil, err
	}
	id := c.nextIDLocked()
	if id == 0 {
		c.mu.Unlock()
		return nil, fmt.Errorf("%w: no free packet identifier", ErrNotAllowed)
	}
	p := build(id)
	wasEmpty := len(c.mu.out) == 0
	out, err := p.Append(c.mu.out, c.version)
	if err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("mqttclient: %s: %w", p.Type(), err)
	}
	c.mu.out = out
	c.mu.reqs[id] = ch
	c.trace(true, p)
	c.mu.Unlock()
	if wasEmpty {
		c.kick()
	}
	select {
	case resp := <-ch:
		return resp, nil
	case <-ctx.Done():
		c.mu.Lock()
		if c.mu.reqs != nil {
			delete(c.mu.reqs, id)
		}
		c.mu.Unlock()
		return nil, ctx.Err()
	case <-c.done:
		return nil, c.Err()
	}
}
