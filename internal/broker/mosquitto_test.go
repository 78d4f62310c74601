package broker_test

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/brokertest"
	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

// mosquittoTool returns the path of a mosquitto client tool. Outside CI a
// missing tool skips the test; in CI (CI=true) it fails it.
func mosquittoTool(t *testing.T, name string) string {
	t.Helper()
	return brokertest.RequireTool(t, name, "mosquitto-clients")
}

type mosquitto struct {
	t        *testing.T
	pub, sub string
	host     string
	port     string
}

func newMosquitto(t *testing.T, n *brokertest.Node) *mosquitto {
	m := &mosquitto{t: t, pub: mosquittoTool(t, "mosquitto_pub"), sub: mosquittoTool(t, "mosquitto_sub")}
	addr := n.MQTT()
	i := strings.LastIndexByte(addr, ':')
	m.host, m.port = addr[:i], addr[i+1:]
	return m
}

// run runs mosquitto_pub with args and fails the test on error.
func (m *mosquitto) publish(args ...string) {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.pub, append([]string{"-h", m.host, "-p", m.port}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		m.t.Fatalf("mosquitto_pub %v: %v\n%s", args, err, out)
	}
}

// subscribeOnce runs mosquitto_sub to completion (it must exit by itself,
// with -C) and returns its output lines.
func (m *mosquitto) subscribeOnce(args ...string) []string {
	m.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, m.sub, append([]string{"-h", m.host, "-p", m.port}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		m.t.Fatalf("mosquitto_sub %v: %v\n%s", args, err, out)
	}
	return strings.Split(strings.TrimSpace(string(out)), "\n")
}

// subProc is a running mosquitto_sub.
type subProc struct {
	cmd  *exec.Cmd
	out  brokertest.LockedBuffer
	done chan error
}

// subscribe starts mosquitto_sub with args and waits until the node holds
// one subscription more than before. (mosquitto_sub's own output is block
// buffered when it is not a terminal, so it cannot tell us.) Callers make
// sure no other subscription comes or goes meanwhile.
func (m *mosquitto) subscribe(n *brokertest.Node, args ...string) *subProc {
	m.t.Helper()
	want := n.Broker().Stats().Subscriptions + 1
	sp := &subProc{done: make(chan error, 1)}
	sp.cmd = exec.Command(m.sub, append([]string{"-h", m.host, "-p", m.port}, args...)...)
	sp.cmd.Stdout, sp.cmd.Stderr = &sp.out, &sp.out
	if err := sp.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	go func() { sp.done <- sp.cmd.Wait() }()
	m.t.Cleanup(func() {
		_ = sp.cmd.Process.Kill()
		<-sp.done
	})
	brokertest.Eventually(m.t, 10*time.Second, func() bool { return n.Broker().Stats().Subscriptions == want },
		"mosquitto_sub subscribed")
	return sp
}

// wait waits for mosquitto_sub to exit (after -C messages) and returns its
// output lines.
func (sp *subProc) wait(t *testing.T) []string {
	t.Helper()
	select {
	case err := <-sp.done:
		sp.done <- err
		if err != nil {
			t.Fatalf("mosquitto_sub: %v\n%s", err, sp.out.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("mosquitto_sub did not finish; output so far:\n%s", sp.out.String())
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(sp.out.String()), "\n") {
		lines = append(lines, l)
	}
	return lines
}

var mosquittoVersions = []struct{ flag, name string }{{"mqttv311", "311"}, {"mqttv5", "5"}}

// TestMosquittoV31: MQTT 3.1 ("MQIsdp") clients are served with 3.1.1 rules.
func TestMosquittoV31(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	m := newMosquitto(t, n)
	sp := m.subscribe(n, "-V", "mqttv31", "-i", "sub31", "-t", "m31/#", "-q", "2", "-C", "2", "-F", "%t|%q|%p")
	m.publish("-V", "mqttv31", "-i", "pub31", "-t", "m31/a", "-q", "2", "-m", "old protocol")
	m.publish("-V", "mqttv5", "-t", "m31/b", "-q", "1", "-m", "new protocol")
	if got := sp.wait(t); strings.Join(got, ",") != "m31/a|2|old protocol,m31/b|1|new protocol" {
		t.Fatalf("mosquitto_sub -V mqttv31 got %q", got)
	}
}

// TestMosquittoPubSub: mosquitto_pub and mosquitto_sub, 3.1.1 and 5, at every
// QoS, with the QoS each message arrives at.
func TestMosquittoPubSub(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	m := newMosquitto(t, n)
	for _, v := range mosquittoVersions {
		prefix := "m/" + v.name
		sp := m.subscribe(n, "-V", v.flag, "-i", "msub"+v.name, "-t", prefix+"/#", "-q", "2", "-C", "3",
			"-F", "%t|%q|%p")
		for _, q := range []string{"0", "1", "2"} {
			m.publish("-V", v.flag, "-t", prefix+"/q"+q, "-q", q, "-m", "hello "+q)
		}
		got := sp.wait(t)
		want := []string{prefix + "/q0|0|hello 0", prefix + "/q1|1|hello 1", prefix + "/q2|2|hello 2"}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("mosquitto_sub -V %s got %q, want %q", v.flag, got, want)
		}
		n.WaitSessions(0, 0)
	}
}

// TestMosquittoCrossVersionAndRetained: a retained QoS 2 message from
// mosquitto_pub v5 reaches a later mosquitto_sub 3.1.1 with the retain flag,
// and the reverse.
func TestMosquittoCrossVersionAndRetained(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	m := newMosquitto(t, n)
	m.publish("-V", "mqttv5", "-t", "ret/5", "-q", "2", "-r", "-m", "from five")
	m.publish("-V", "mqttv311", "-t", "ret/3", "-q", "2", "-r", "-m", "from three")
	if got := m.subscribeOnce("-V", "mqttv311", "-t", "ret/5", "-q", "2", "-C", "1", "-F", "%t|%q|%r|%p"); len(got) != 1 || got[0] != "ret/5|2|1|from five" {
		t.Fatalf("3.1.1 sub of a v5 retained message: %q", got)
	}
	if got := m.subscribeOnce("-V", "mqttv5", "-t", "ret/3", "-q", "1", "-C", "1", "-F", "%t|%q|%r|%p"); len(got) != 1 || got[0] != "ret/3|1|1|from three" {
		t.Fatalf("v5 sub of a 3.1.1 retained message: %q", got)
	}
	// Deleting it with an empty retained message.
	m.publish("-V", "mqttv5", "-t", "ret/5", "-r", "-n", "-q", "1") // QoS 1: handled once mosquitto_pub exits
	if n.Broker().Stats().Retained != 1 {
		t.Fatalf("retained count %d after delete", n.Broker().Stats().Retained)
	}
}

// TestMosquittoWill: a mosquitto_sub killed with SIGKILL has its will
// published, for 3.1.1 and 5.
func TestMosquittoWill(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	m := newMosquitto(t, n)
	w, _ := rawConnect(t, n, connect5("watcher", true, 0))
	w.Subscribe(1, sub("mw/#", 1))
	for _, v := range mosquittoVersions {
		sp := m.subscribe(n, "-V", v.flag, "-i", "will"+v.name, "-t", "x/"+v.name,
			"--will-topic", "mw/"+v.name, "--will-payload", "gone "+v.name, "--will-qos", "1")
		_ = sp.cmd.Process.Kill()
		got := w.ExpectPublish("mw/"+v.name, "gone "+v.name)
		if got.QoS != 1 {
			t.Fatalf("will QoS %d", got.QoS)
		}
		w.Send(&packet.Ack{Kind: packet.PUBACK, PacketID: got.PacketID})
		n.WaitSessions(1, 0)
	}
}

// TestMosquittoV5Properties: user properties and content type set with
// mosquitto_pub -D reach a v5 subscriber.
func TestMosquittoV5Properties(t *testing.T) {
	n := brokertest.Start(t, brokertest.Config(t))
	m := newMosquitto(t, n)
	s, _ := rawConnect(t, n, connect5("s", true, 0))
	s.Subscribe(1, sub("props", 1))
	m.publish("-V", "mqttv5", "-t", "props", "-q", "1", "-m", "p",
		"-D", "publish", "user-property", "origin", "mosquitto",
		"-D", "publish", "content-type", "text/plain",
		"-D", "publish", "message-expiry-interval", "600")
	got := s.ExpectPublish("props", "p")
	pr := got.Props
	if pr.ContentType != "text/plain" || len(pr.User) != 1 || pr.User[0] != (packet.UserProperty{Key: "origin", Value: "mosquitto"}) ||
		!pr.Has(packet.PropMessageExpiry) || pr.MessageExpiry > 600 {
		t.Fatalf("got %s", packet.Describe(got))
	}
}
