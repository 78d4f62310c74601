package node

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/sextantmq/sextant/internal/adminapi"
	"github.com/sextantmq/sextant/internal/delivery"
	"github.com/sextantmq/sextant/internal/message"
)

// newAdminAPI builds the admin API's handler on the node (open until
// SetTokens).
func (n *Node) newAdminAPI() *adminapi.Server {
	return adminapi.New(n, n.metrics.Registry, n.log).WithCluster(n).WithClients(clientList{n}).WithDrain(n).WithRemove(n).
		WithInspector(inspector{n}).WithKick(inspector{n}).WithHistory(historyAPI{n}).WithGroups(groupsAPI{n}).
		WithMigrations(migrator{n}).WithPlacement(n)
}

// AdminHandler returns a new admin API handler on the node, open (no
// tokens), for in-process tests, whose nodes run without an admin
// listener.
func (n *Node) AdminHandler() http.Handler { return n.newAdminAPI() }

// historyAPI adapts the delivery layer's history reader to the admin API.
type historyAPI struct{ n *Node }

var (
	_ adminapi.History      = historyAPI{}
	_ adminapi.LatestReader = historyAPI{}
)

// LatestRecords implements adminapi.LatestReader: a linearizable read of
// the latest record takes one barrier, not two.
func (h historyAPI) LatestRecords(ctx context.Context, topic string, w adminapi.Where) ([]adminapi.LogRecord, adminapi.TopicLog, error) {
	if w == adminapi.ReadLinearizable {
		tl, recs, err := h.n.readLinearReq(ctx, linearReadRequest{Topic: topic, Limit: 1, Latest: true})
		return recs, tl, err
	}
	tl, err := h.TopicLog(ctx, topic, w)
	if err != nil || tl.Count == 0 {
		return nil, tl, err // retention removed every record: none
	}
	return h.LogRecords(ctx, topic, tl.Latest, 1, w)
}

func (h historyAPI) reader() (*delivery.History, error) {
	hr := h.n.History()
	if hr == nil {
		return nil, fmt.Errorf("%w: the node is not serving yet", adminapi.ErrUnavailable)
	}
	return hr, nil
}

func where(w adminapi.Where) delivery.Read {
	if w == adminapi.ReadLocal {
		return delivery.ReadAny
	}
	return delivery.ReadHome
}

// TopicLog implements adminapi.History.
func (h historyAPI) TopicLog(ctx context.Context, topic string, w adminapi.Where) (adminapi.TopicLog, error) {
	if w == adminapi.ReadLinearizable {
		tl, _, err := h.n.readLinear(ctx, topic, 0, 0)
		return tl, err
	}
	hr, err := h.reader()
	if err != nil {
		return adminapi.TopicLog{}, err
	}
	info, err := hr.Topic(ctx, topic, where(w))
	if err != nil {
		return adminapi.TopicLog{}, historyErr(err)
	}
	return topicLog(info), nil
}

// LogRecords implements adminapi.History.
func (h historyAPI) LogRecords(ctx context.Context, topic string, from uint64, limit int, w adminapi.Where) ([]adminapi.LogRecord, adminapi.TopicLog, error) {
	if w == adminapi.ReadLinearizable {
		tl, recs, err := h.n.readLinear(ctx, topic, from, min(max(limit, 1), adminapi.MaxLogLimit))
		return recs, tl, err
	}
	hr, err := h.reader()
	if err != nil {
		return nil, adminapi.TopicLog{}, err
	}
	recs, info, err := hr.Messages(ctx, topic, from, limit, where(w))
	if err != nil {
		return nil, topicLog(info), historyErr(err)
	}
	out := make([]adminapi.LogRecord, 0, len(recs))
	for _, rec := range recs {
		out = append(out, logRecord(rec.Index, rec.Seq, rec.Retain, rec.Message))
	}
	return out, topicLog(info), nil
}

// logRecord is a record as the admin API shows it.
func logRecord(index, seq uint64, retain bool, m *message.Message) adminapi.LogRecord {
	lr := adminapi.LogRecord{Index: index, Seq: seq, QoS: m.QoS, Retain: retain,
		PayloadFormat: m.PayloadFormat, ContentType: m.ContentType, ResponseTopic: m.ResponseTopic,
		CorrelationData: m.CorrelationData, Publisher: m.Publisher, Time: m.Created}
	lr.SetPayload(m.Payload)
	for _, u := range m.User {
		lr.UserProperties = append(lr.UserProperties, adminapi.UserProperty{Key: u.Key, Value: u.Value})
	}
	if !m.Expiry.IsZero() {
		e := m.Expiry
		lr.Expiry = &e
	}
	return lr
}

func topicLog(i delivery.TopicInfo) adminapi.TopicLog {
	tl := adminapi.TopicLog{Topic: i.Topic, Group: i.Group, Rule: i.Rule, First: i.First, Latest: i.Latest,
		Retention: i.Retention, Home: i.Home, Replicas: i.Voters, Learners: i.Learners, Epoch: i.Epoch,
		Created: i.Created, ServedBy: i.ServedBy}
	if tl.Replicas == nil {
		tl.Replicas = []string{}
	}
	if i.Latest >= i.First && i.First > 0 {
		tl.Count = i.Latest - i.First + 1
	}
	return tl
}

// historyErr maps the delivery layer's errors to the API's.
func historyErr(err error) error {
	var ce *delivery.CompactedError
	switch {
	case errors.As(err, &ce):
		return &adminapi.CompactedError{Topic: ce.Topic, First: ce.First}
	case errors.Is(err, delivery.ErrNotSequenced):
		return fmt.Errorf("%w: %w", adminapi.ErrNotSequenced, err)
	case errors.Is(err, delivery.ErrUnknownTopic):
		return fmt.Errorf("%w: %w", adminapi.ErrUnknownTopic, err)
	case errors.Is(err, delivery.ErrUnavailable):
		return fmt.Errorf("%w (last: %s)", adminapi.ErrUnavailable, lastCause(err))
	}
	return err
}

// lastCause is the message of the last error err joins (the delivery
// layer's errors wrap their sentinel and then their cause), without the
// package prefix.
func lastCause(err error) string {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		if es := j.Unwrap(); len(es) > 0 {
			err = es[len(es)-1]
		}
	}
	return strings.TrimPrefix(err.Error(), "delivery: ")
}
