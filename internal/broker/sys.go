package broker

import (
	"context"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sextantmq/sextant/internal/message"
	"github.com/sextantmq/sextant/internal/metrics"
	"github.com/sextantmq/sextant/internal/run"
)

// sysLoop publishes broker statistics under $SYS/broker/ as retained QoS 0
// messages every SysInterval, until Close.
func (b *Broker) sysLoop(ctx context.Context) {
	run.Every(ctx, b.clock, 0, b.cfg.SysInterval, func(context.Context) { b.publishSys() })
}

func (b *Broker) publishSys() {
	st := b.Stats()
	m := b.metrics
	vals := []struct{ topic, value string }{
		{"version", "sextant " + b.cfg.Version},
		{"uptime", strconv.FormatInt(int64(st.Uptime.Seconds()), 10)},
		{"clients/connected", strconv.Itoa(st.Online)},
		{"clients/total", strconv.Itoa(st.Sessions)},
		{"clients/disconnected", strconv.Itoa(st.Sessions - st.Online)},
		{"subscriptions/count", strconv.Itoa(st.Subscriptions)},
		{"retained messages/count", strconv.Itoa(st.Retained)},
		{"messages/received", counter(m.MessagesIn[0], m.MessagesIn[1], m.MessagesIn[2])},
		{"messages/sent", counter(m.MessagesOut[0], m.MessagesOut[1], m.MessagesOut[2])},
		{"bytes/received", counter(m.BytesIn)},
		{"bytes/sent", counter(m.BytesOut)},
	}
	now := b.clock.Now()
	for _, v := range vals {
		b.Publish(nil, &message.Message{
			Topic: "$SYS/broker/" + v.topic, Payload: []byte(v.value), Retain: true, Created: now,
		}, nil)
	}
}

func counter(cs ...prometheus.Counter) string {
	return strconv.FormatFloat(metrics.Value(cs...), 'f', 0, 64)
}
