package replication

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sextantmq/sextant/internal/netx"
	"github.com/sextantmq/sextant/internal/peer"
	"github.com/sextantmq/sextant/internal/tlstest"
)

// rawHello dials node to's cluster address from host "10.0.0.9", sends
// the kind byte (and TLS when cfg is set) and a hello, and returns the
// status byte the engine answered (or the read error).
func rawHello(t *testing.T, c *cluster, cfg *tls.Config, to string, h hello) (byte, error) {
	t.Helper()
	conn, err := c.nw.Dial(ctxFor(t, 5*time.Second), "10.0.0.9", addr(to))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte{Kind}); err != nil {
		t.Fatal(err)
	}
	if conn, err = netx.Secure(ctxFor(t, 5*time.Second), conn, cfg, false); err != nil {
		return 0, err
	}
	if _, err := conn.Write(h.append(nil)); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return 0, err
	}
	if b[0] != statusOK {
		// A refused connection is closed after its status.
		if _, err := conn.Read(b[:]); !errors.Is(err, io.EOF) {
			t.Errorf("refused connection still open: %v", err)
		}
	}
	return b[0], nil
}

// TestRefusesUnknownGroupAndOtherNode: a connection for a group the node
// does not run, or meant for another node, is refused with its status and
// counted; a node that does not run a group its peers list is refused by
// reason and the others still commit; Raft's dial to it fails with
// ErrRefused.
func TestRefusesUnknownGroupAndOtherNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, time.Millisecond)
		// n3 runs another group than the one n1 and n2 bootstrap with it.
		for _, id := range []string{"n1", "n2"} {
			if err := c.open(id, false).Bootstrap(ctxFor(t, time.Second), members(ids(3)...)); err != nil {
				t.Fatal(err)
			}
		}
		other := &recorder{}
		if _, err := OpenGroup(context.Background(), c.engine("n3"), "pg/2", FSM[uint64](other)); err != nil {
			t.Fatal(err)
		}
		_, lead := c.leader()
		if _, err := lead.Propose(ctxFor(t, 5*time.Second), []byte("two of three")); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 5*time.Second, "n3 refuses pg/1", func() bool {
			return c.counter("n3", "sextant_replication_refused_connections_total", "reason", refuseUnknown) > 0
		})

		for _, tc := range []struct {
			name   string
			h      hello
			status byte
			reason string
		}{
			{"unknown group", hello{from: "n9", to: "n3", group: "pg/404"}, statusUnknownGroup, refuseUnknown},
			{"group of another node", hello{from: "n9", to: "n3", group: "pg/1"}, statusUnknownGroup, refuseUnknown},
			{"meant for another node", hello{from: "n9", to: "n1", group: "pg/2"}, statusWrongNode, refuseWrongNode},
			{"accepted", hello{from: "n9", to: "n3", group: "pg/2"}, statusOK, ""},
		} {
			before := c.counter("n3", "sextant_replication_refused_connections_total", "reason", tc.reason)
			got, err := rawHello(t, c, nil, "n3", tc.h)
			if err != nil || got != tc.status {
				t.Errorf("%s: status %d, %v; want %d", tc.name, got, err, tc.status)
			}
			if tc.reason != "" && c.counter("n3", "sextant_replication_refused_connections_total", "reason", tc.reason) != before+1 {
				t.Errorf("%s: refusal not counted as %s", tc.name, tc.reason)
			}
		}

		// A bad hello is refused too.
		conn, err := c.nw.Dial(ctxFor(t, time.Second), "10.0.0.9", addr("n3"))
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write([]byte{Kind, 99, 1, 'x'})
		var b [1]byte
		if _, err := io.ReadFull(conn, b[:]); err != nil || b[0] != statusBadHello {
			t.Errorf("bad hello: status %d, %v", b[0], err)
		}
		_ = conn.Close()

		// The dialling side of a refused connection sees ErrRefused.
		ly := newLayer("n1", addr("n1"), "pg/404", c.nw.DialFrom(host("n1")), nil)
		defer ly.Close()
		dc, err := ly.Dial(raftAddress("n3", addr("n3")), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dc.Read(b[:]); !errors.Is(err, ErrRefused) {
			t.Errorf("read on a refused connection: %v", err)
		}
	})
}

// TestMutualTLS: with the cluster's TLS config, a group commits over TLS;
// a node whose certificate comes from another CA cannot take part (its
// connections are refused at the handshake and counted), and a plain
// connection is refused as well.
func TestMutualTLS(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ca, rogue := tlstest.NewCA(t, "cluster"), tlstest.NewCA(t, "rogue")
		configs := map[string]*tls.Config{}
		c := newCluster(t, time.Millisecond)
		c.tune = func(cfg *Config) {
			issuer := ca
			if cfg.NodeID == "n3" {
				issuer = rogue
			}
			cfg.TLS = peer.TLSConfig(issuer.Pool(), issuer.Client(cfg.NodeID, tlstest.Options{}).Pair)
			configs[cfg.NodeID] = cfg.TLS
		}
		c.start(ids(3)...)
		leadID, lead := c.leaderAmong("n1", "n2")
		if leadID == "n3" {
			t.Fatal("the node with a rogue certificate leads")
		}
		if _, err := proposeAll(ctxFor(t, 5*time.Second), lead, []string{"a", "b"}); err != nil {
			t.Fatal(err)
		}
		other := "n1"
		if leadID == other {
			other = "n2"
		}
		waitFor(t, 5*time.Second, "the other trusted node applies", func() bool { return len(c.fsms[other].cmds()) == 2 })
		if n := len(c.fsms["n3"].cmds()); n != 0 {
			t.Errorf("the rogue node applied %d commands", n)
		}
		if c.counter(leadID, "sextant_replication_refused_connections_total", "reason", refuseTLS)+
			c.counter("n3", "sextant_replication_refused_connections_total", "reason", refuseTLS) == 0 {
			t.Error("no TLS refusal counted")
		}
		// A connection without TLS gets no hello through.
		if st, err := rawHello(t, c, nil, leadID, hello{from: "n9", to: leadID, group: "pg/1"}); err == nil {
			t.Errorf("a plain connection got status %d", st)
		}
		// A trusted client certificate is accepted.
		if st, err := rawHello(t, c, configs[other], leadID, hello{from: other, to: leadID, group: "pg/1"}); err != nil || st != statusOK {
			t.Errorf("a trusted TLS connection: status %d, %v", st, err)
		}
	})
}

func TestHelloRoundTrip(t *testing.T) {
	h := hello{from: "n1", to: "node-two", group: "swarm/7"}
	b := h.append(nil)
	got, err := readHello(bytes.NewReader(append(b, "raft bytes"...)))
	if err != nil || got != h {
		t.Fatalf("read %+v, %v", got, err)
	}
	for _, bad := range [][]byte{nil, {2}, {1, 0}, {1, 2, 'n'}, {1, 1, 'a', 1, 'b', 1, 0x01}} {
		if _, err := readHello(bytes.NewReader(bad)); !errors.Is(err, errBadHello) {
			t.Errorf("hello %q: %v", bad, err)
		}
	}
}

// FuzzReadHello: the hello decoder never panics, consumes only the hello's
// bytes, and what it accepts encodes back to the same bytes.
func FuzzReadHello(f *testing.F) {
	f.Add(hello{from: "n1", to: "n2", group: "pg/1"}.append(nil))
	f.Add([]byte{1, 255})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		h, err := readHello(r)
		if err != nil {
			return
		}
		n := len(b) - r.Len()
		if enc := h.append(nil); !bytes.Equal(enc, b[:n]) {
			t.Fatalf("hello %+v encodes to %x, read from %x", h, enc, b[:n])
		}
	})
}

// FuzzSnapshotHeader: the snapshot header decoder never panics and what it
// accepts encodes back to the same bytes.
func FuzzSnapshotHeader(f *testing.F) {
	f.Add(appendSnapshotHeader(nil, 42))
	f.Add([]byte("SXRS"))
	f.Fuzz(func(t *testing.T, b []byte) {
		applied, err := parseSnapshotHeader(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		if enc := appendSnapshotHeader(nil, applied); !bytes.Equal(enc, b[:snapshotHeaderLen]) {
			t.Fatalf("header %x decodes to %d, which encodes to %x", b[:snapshotHeaderLen], applied, enc)
		}
	})
}

var _ net.Conn = (*ackConn)(nil)
