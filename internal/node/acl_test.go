package node_test

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/clock/clocktest"
	"github.com/sextantmq/sextant/internal/config"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

const testACL = `
users:
  admin:
    - {allow: subscribe, topic: $SYS/#}
    - {allow: both, topic: "#"}
authenticated:
  - {deny: publish, topic: devices/%u/config}
  - {allow: both, topic: devices/%u/#}
  - {allow: publish, topic: clients/%c/status}
  - {allow: subscribe, topic: public/#}
  - {allow: publish, topic: will/%u}
  - {allow: both, topic: own/%c}
anonymous:
  - {allow: subscribe, topic: public/#}
  - {allow: both, topic: own/%c}
`

// aclNode starts a node with users admin, alice, bob and carol (password
// "pw"), the ACL text and anonymous clients allowed (loopback).
func aclNode(t *testing.T, acl string, edit func(*config.Config)) *brokertest.Node {
	t.Helper()
	cfg := brokertest.Config(t)
	cfg.PasswordFile = writeFile(t, "passwd", passwords(t, "admin", "pw", "alice", "pw", "bob", "pw", "carol", "pw"))
	cfg.ACLFile = writeFile(t, "acl.yaml", acl)
	cfg.AuthFailDelay = 0
	if edit != nil {
		edit(&cfg)
	}
	return brokertest.Start(t, cfg)
}

func as(t *testing.T, n *brokertest.Node, v packet.Version, id, user string) *brokertest.Raw {
	t.Helper()
	pw := "pw"
	if user == "" {
		pw = ""
	}
	return connectOK(t, n.Raw(v), login(v, id, user, pw))
}

func denied(n *brokertest.Node, action string) float64 {
	return brokertest.Value(n.Metrics().AccessDenied.WithLabelValues(action))
}

// TestACLPublish: MQTT 5 publishes refused by the ACL get PUBACK/PUBREC
// 0x87; 3.1.1 ones are acknowledged as usual and dropped (the protocol has
// no way to say no); QoS 0 ones are dropped silently. %u and %c are
// substituted; the first matching rule wins. Nothing refused reaches a
// subscriber, and the connections stay up.
func TestACLPublish(t *testing.T) {
	n := aclNode(t, testACL, nil)
	watch := as(t, n, packet.V5, "watch", "admin")
	watch.Subscribe(1, sub("#", 2))

	a := as(t, n, packet.V5, "a-1", "alice")
	for _, c := range []struct {
		p    *packet.Publish
		want packet.ReasonCode
	}{
		{pub("devices/alice/temp", 1, 1, "ok"), packet.Success},
		{pub("devices/alice/config", 1, 2, "denied first"), packet.NotAuthorized}, // the deny rule comes first
		{pub("devices/bob/temp", 1, 3, "not hers"), packet.NotAuthorized},
		{pub("clients/a-1/status", 1, 4, "ok"), packet.Success},
		{pub("clients/b-1/status", 1, 5, "not her id"), packet.NotAuthorized},
	} {
		a.Send(c.p)
		if got := a.ExpectAck(packet.PUBACK, c.p.PacketID).ReasonCode; got != c.want {
			t.Errorf("alice PUBLISH %s: PUBACK %v, want %v", c.p.Topic, got, c.want)
		}
	}
	a.Send(pub("devices/bob/temp", 2, 6, "qos 2"))
	if got := a.ExpectAck(packet.PUBREC, 6).ReasonCode; got != packet.NotAuthorized {
		t.Errorf("QoS 2: PUBREC %v, want 0x87", got)
	}
	a.Send(pub("devices/bob/temp", 0, 0, "qos 0"))

	a3 := as(t, n, packet.V311, "a-3", "alice")
	a3.Send(pub("devices/bob/temp", 1, 1, "3.1.1 qos 1"))
	if got := a3.ExpectAck(packet.PUBACK, 1).ReasonCode; got != packet.Success {
		t.Errorf("3.1.1 refusal must look like a success, got %v", got)
	}
	a3.Send(pub("devices/bob/temp", 2, 2, "3.1.1 qos 2"))
	a3.ExpectAck(packet.PUBREC, 2)
	a3.Send(&packet.Ack{Kind: packet.PUBREL, PacketID: 2})
	a3.ExpectAck(packet.PUBCOMP, 2)
	a3.Send(pub("devices/alice/t", 1, 3, "3.1.1 allowed"))
	a3.ExpectAck(packet.PUBACK, 3)

	// Only the allowed messages reached the watcher, in order.
	for _, want := range []string{"devices/alice/temp", "clients/a-1/status", "devices/alice/t"} {
		p := brokertest.Expect[*packet.Publish](watch)
		if p.Topic != want {
			t.Fatalf("watcher got %s, want %s", packet.Describe(p), want)
		}
		if p.QoS > 0 {
			watch.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: p.PacketID})
		}
	}
	expectNothing(t, watch, "own/watch", "a refused publish was delivered")
	if got := denied(n, "publish"); got != 7 {
		t.Errorf("publish refusals counted %v, want 7", got)
	}
	if got := a.Ping(); len(got) != 0 {
		t.Fatalf("alice got %s", packet.Describe(got[0]))
	}
}

// TestACLSubscribe: refused filters get SUBACK 0x87 (3.1.1: 0x80) while the
// others in the same SUBSCRIBE are granted; a filter is granted when it
// shares a topic with an allow rule (the rest is withheld per message) and
// refused when nothing allows it; shared subscriptions are checked by their
// inner filter; anonymous clients get only their rules.
func TestACLSubscribe(t *testing.T) {
	n := aclNode(t, testACL, nil)
	a := as(t, n, packet.V5, "a", "alice")
	sa := a.Subscribe(1, sub("devices/alice/#", 1), sub("devices/#", 1), sub("public/news", 0),
		sub("$SYS/#", 0), sub("$share/g/devices/alice/x", 1), sub("$share/g/devices/bob/x", 1), sub("#", 0))
	want := []packet.ReasonCode{packet.GrantedQoS1, packet.GrantedQoS1, packet.GrantedQoS0,
		packet.NotAuthorized, packet.GrantedQoS1, packet.NotAuthorized, packet.GrantedQoS0}
	if !slices.Equal(sa.Codes, want) {
		t.Fatalf("alice SUBACK %v, want %v", sa.Codes, want)
	}
	b3 := as(t, n, packet.V311, "b3", "bob")
	if sa := b3.Subscribe(1, sub("devices/bob/#", 1), sub("devices/alice/#", 1)); !slices.Equal(sa.Codes, []packet.ReasonCode{packet.GrantedQoS1, packet.UnspecifiedError}) {
		t.Fatalf("3.1.1 SUBACK %v, want [1 0x80]", sa.Codes)
	}
	anon := as(t, n, packet.V5, "anon", "")
	if sa := anon.Subscribe(1, sub("public/#", 0), sub("devices/alice/#", 0)); !slices.Equal(sa.Codes, []packet.ReasonCode{packet.GrantedQoS0, packet.NotAuthorized}) {
		t.Fatalf("anonymous SUBACK %v", sa.Codes)
	}
	if got := denied(n, "subscribe"); got != 4 {
		t.Errorf("subscription refusals counted %v, want 4", got)
	}
	// The granted subscription works.
	b := as(t, n, packet.V5, "b", "bob")
	b.Send(pub("devices/bob/x", 1, 1, "to bob3"))
	b.ExpectAck(packet.PUBACK, 1)
	b3.ExpectPublish("devices/bob/x", "to bob3")
}

// TestACLRetained: retained messages are delivered only where the ACL
// allows: a refused subscription brings none, and a granted wildcard only
// the topics the client may receive.
func TestACLRetained(t *testing.T) {
	n := aclNode(t, testACL, nil)
	admin := as(t, n, packet.V5, "admin", "admin")
	for i, tp := range []string{"public/news", "devices/alice/cfg", "devices/bob/cfg"} {
		p := pub(tp, 1, uint16(i+1), "retained "+tp)
		p.Retain = true
		admin.Send(p)
		admin.ExpectAck(packet.PUBACK, uint16(i+1))
	}
	a := as(t, n, packet.V5, "a", "alice")
	if sa := a.Subscribe(1, sub("devices/#", 0)); sa.Codes[0] != packet.GrantedQoS0 {
		t.Fatalf("devices/#: %v", sa.Codes)
	}
	if p := a.ExpectPublish("devices/alice/cfg", "retained devices/alice/cfg"); !p.Retain {
		t.Fatal("not flagged retained")
	}
	expectNothing(t, a, "own/a", "devices/# brought another device's retained message")
	a.Subscribe(3, sub("public/#", 0))
	a.ExpectPublish("public/news", "retained public/news")
	expectNothing(t, a, "own/a", "another retained message was delivered")

	anon := as(t, n, packet.V5, "anon", "")
	if sa := anon.Subscribe(1, sub("devices/bob/cfg", 0)); sa.Codes[0] != packet.NotAuthorized {
		t.Fatalf("anonymous SUBACK %v", sa.Codes)
	}
	expectNothing(t, anon, "own/anon", "a refused subscription brought a retained message")
	if sa := anon.Subscribe(2, sub("#", 0)); sa.Codes[0] != packet.GrantedQoS0 {
		t.Fatalf("anonymous # : %v", sa.Codes)
	}
	anon.ExpectPublish("public/news", "retained public/news")
	expectNothing(t, anon, "own/anon", "# brought a retained message anonymous clients may not read")
}

// TestACLWildcardWithOneDenyRule: with "deny subscribe test/nosubscribe"
// before "allow both #", a subscriber to "#" is granted and receives every
// topic but the denied one, live and retained; subscribing to the denied
// topic itself is refused.
func TestACLWildcardWithOneDenyRule(t *testing.T) {
	n := aclNode(t, `
anonymous:
  - {deny: subscribe, topic: test/nosubscribe}
  - {allow: both, topic: "#"}
`, nil)
	p := as(t, n, packet.V5, "p", "")
	retained := pub("test/nosubscribe", 1, 1, "retained secret")
	retained.Retain = true
	p.Send(retained)
	p.ExpectAck(packet.PUBACK, 1)

	s := as(t, n, packet.V5, "s", "")
	if sa := s.Subscribe(1, sub("#", 1), sub("test/nosubscribe", 1)); !slices.Equal(sa.Codes, []packet.ReasonCode{packet.GrantedQoS1, packet.NotAuthorized}) {
		t.Fatalf("SUBACK %v; want # granted, test/nosubscribe refused", sa.Codes)
	}
	p.Send(pub("test/nosubscribe", 1, 2, "secret"))
	p.ExpectAck(packet.PUBACK, 2)
	p.Send(pub("test/open", 1, 3, "open"))
	p.ExpectAck(packet.PUBACK, 3)
	got := s.ExpectPublish("test/open", "open")
	s.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: got.PacketID})
	expectNothing(t, s, "own/s", "a message on the denied topic reached the # subscriber")
}

// TestACLWill: a will is checked against the ACL when it is published,
// with the rights of the session's user at that time: a will to a topic
// the user may not publish to is dropped (and counted); a rule reloaded
// between CONNECT and the will's publication decides.
func TestACLWill(t *testing.T) {
	n := aclNode(t, testACL, nil)
	watch := as(t, n, packet.V5, "watch", "admin")
	watch.Subscribe(1, sub("will/#", 0))
	withWill := func(id, user, topic string) *brokertest.Raw {
		cp := login(packet.V5, id, user, "pw")
		cp.WillFlag, cp.WillTopic, cp.WillPayload = true, topic, []byte(id+" gone")
		return connectOK(t, n.Raw(packet.V5), cp)
	}
	withWill("a", "alice", "will/alice").Close()
	watch.ExpectPublish("will/alice", "a gone")

	withWill("b", "bob", "will/alice").Close() // bob may not publish there
	n.WaitSessions(1, 0)
	expectNothing(t, watch, "own/watch", "a will bob may not publish was published")
	if got := denied(n, "will"); got != 1 {
		t.Fatalf("will refusals counted %v, want 1", got)
	}

	// Rights change between CONNECT and the will: the rules at publication
	// time decide.
	c := withWill("c", "carol", "will/carol")
	d := withWill("d", "bob", "will/anyone")
	reloaded := strings.Replace(testACL, "{allow: publish, topic: will/%u}", "{allow: publish, topic: will/anyone}", 1)
	if err := os.WriteFile(n.Cfg.ACLFile, []byte(reloaded), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := n.Reload(); err != nil {
		t.Fatal(err)
	}
	c.Close()
	d.Close()
	watch.ExpectPublish("will/anyone", "d gone")
	n.WaitSessions(1, 0)
	expectNothing(t, watch, "own/watch", "carol's will was published after its rule was removed")
}

// TestSysAccess: without an ACL, $SYS/ is readable by clients on loopback
// (sys-access: loopback, the default) and refused, with a reason string
// that says how to open it, when sys-access is none; nobody publishes
// into it, and "#" never matches it. With an ACL, the user granted $SYS/#
// reads the statistics and others are refused.
func TestSysAccess(t *testing.T) {
	cfg := brokertest.Config(t)
	cfg.SysInterval = 20 * time.Millisecond
	local := brokertest.Start(t, cfg)
	l := connectOK(t, local.Raw(packet.V5), login(packet.V5, "l", "", ""))
	if sa := l.Subscribe(1, sub("$SYS/broker/version", 0), sub("$share/g/$SYS/broker/uptime", 0)); !slices.Equal(sa.Codes,
		[]packet.ReasonCode{packet.GrantedQoS0, packet.GrantedQoS0}) {
		t.Fatalf("SUBACK on loopback without ACL %v", sa.Codes)
	}
	if p := brokertest.Expect[*packet.Publish](l); !strings.HasPrefix(p.Topic, "$SYS/broker/") {
		t.Fatalf("loopback client got %s", packet.Describe(p))
	}
	l.Send(pub("$SYS/broker/uptime", 1, 1, "spoofed"))
	// Await: the statistics the client reads keep arriving every 20 ms,
	// before the PUBACK as often as not.
	if a := brokertest.Await[*packet.Ack](l); a.Kind != packet.PUBACK || a.PacketID != 1 || a.ReasonCode != packet.NotAuthorized {
		t.Fatalf("publishing into $SYS: %s, want PUBACK 1 NotAuthorized", packet.Describe(a))
	}

	cfg = brokertest.Config(t)
	cfg.SysInterval, cfg.SysAccess = 20*time.Millisecond, "none"
	closed := brokertest.Start(t, cfg)
	c := connectOK(t, closed.Raw(packet.V5), login(packet.V5, "c", "", ""))
	sa := c.Subscribe(1, sub("$SYS/#", 0), sub("$SYS/broker/uptime", 0), sub("$share/g/$SYS/#", 0), sub("#", 0))
	if !slices.Equal(sa.Codes, []packet.ReasonCode{packet.NotAuthorized, packet.NotAuthorized, packet.NotAuthorized, packet.GrantedQoS0}) {
		t.Fatalf("SUBACK with sys-access none %v", sa.Codes)
	}
	if r := sa.Props.ReasonString; !strings.Contains(r, "sys-access") || !strings.Contains(r, "acl-file") {
		t.Fatalf("SUBACK reason string %q does not say how to open $SYS/", r)
	}
	c.Send(pub("$SYS/broker/uptime", 1, 1, "spoofed"))
	if got := c.ExpectAck(packet.PUBACK, 1).ReasonCode; got != packet.NotAuthorized {
		t.Fatalf("publishing into $SYS: PUBACK %v", got)
	}
	if sa := c.Subscribe(2, sub("plain/#", 0)); sa.Props.ReasonString != "" {
		t.Fatalf("a SUBACK refusing nothing under $SYS/ says %q", sa.Props.ReasonString)
	}

	n := aclNode(t, testACL, func(c *config.Config) { c.SysInterval = cfg.SysInterval })
	admin := as(t, n, packet.V5, "admin", "admin")
	admin.Subscribe(1, sub("$SYS/broker/version", 0))
	if p := brokertest.Expect[*packet.Publish](admin); p.Topic != "$SYS/broker/version" {
		t.Fatalf("admin got %s", packet.Describe(p))
	}
	a := as(t, n, packet.V5, "a", "alice")
	if sa := a.Subscribe(1, sub("$SYS/#", 0)); sa.Codes[0] != packet.NotAuthorized {
		t.Fatalf("alice $SYS/#: %v", sa.Codes)
	}
}

// TestResumedSessionIsCheckedAgainstNewIdentity: after a restart the node
// no longer knows who owned a persistent session; another user resuming it
// gets none of the messages queued for it that this user may not read,
// and none of its subscriptions' later traffic either.
func TestResumedSessionIsCheckedAgainstNewIdentity(t *testing.T) {
	n := aclNode(t, testACL, nil)
	cp := login(packet.V5, "shared-dev", "alice", "pw")
	cp.CleanStart = false
	cp.Props.SetSessionExpiry(3600)
	a := connectOK(t, n.Raw(packet.V5), cp)
	a.Subscribe(1, sub("devices/alice/#", 1))
	a.Send(&packet.Disconnect{})
	a.Closed()
	n.WaitSessions(0, 1)
	admin := as(t, n, packet.V5, "admin", "admin")
	admin.Send(pub("devices/alice/queued", 1, 1, "for alice"))
	admin.ExpectAck(packet.PUBACK, 1)

	n = n.Restart()
	cp2 := login(packet.V5, "shared-dev", "bob", "pw")
	cp2.CleanStart = false
	cp2.Props.SetSessionExpiry(3600)
	r := n.Raw(packet.V5)
	r.Send(cp2)
	if ack := brokertest.Expect[*packet.Connack](r); ack.ReasonCode != packet.Success || !ack.SessionPresent {
		t.Fatalf("bob resuming: %s", packet.Describe(ack))
	}
	admin = as(t, n, packet.V5, "admin", "admin")
	admin.Send(pub("devices/alice/later", 1, 1, "also for alice"))
	admin.ExpectAck(packet.PUBACK, 1)
	expectNothing(t, r, "own/shared-dev", "bob received alice's messages")
	if got := n.Dropped("not_authorized"); got != 2 {
		t.Fatalf("dropped as not authorized: %v, want 2", got)
	}
}

// TestRestoredWillUsesAnonymousRules: a delayed will whose session was
// restored from the store after a restart (its client not connected since)
// is checked with the anonymous rules, since the node does not keep
// identities on disk: here they do not allow it, so it is dropped.
func TestRestoredWillUsesAnonymousRules(t *testing.T) {
	clk := clocktest.New(time.Now())
	cfg := brokertest.Config(t)
	cfg.PasswordFile = writeFile(t, "passwd", passwords(t, "admin", "pw", "alice", "pw"))
	cfg.ACLFile = writeFile(t, "acl.yaml", testACL)
	cfg.AuthFailDelay = 0
	n := brokertest.StartClock(t, cfg, clk)
	cp := login(packet.V5, "a", "alice", "pw")
	cp.CleanStart = false
	cp.Props.SetSessionExpiry(3600)
	cp.WillFlag, cp.WillTopic, cp.WillPayload = true, "will/alice", []byte("gone")
	cp.WillProps.SetWillDelay(10)
	connectOK(t, n.Raw(packet.V5), cp).Close()
	n.WaitSessions(0, 1)

	n = n.Restart()
	watch := as(t, n, packet.V5, "watch", "admin")
	watch.Subscribe(1, sub("will/#", 0))
	clk.Advance(11 * time.Second)
	brokertest.Eventually(t, 5*time.Second, func() bool { return denied(n, "will") == 1 }, "the restored will is refused")
	expectNothing(t, watch, "own/watch", "the restored will was published")
}
