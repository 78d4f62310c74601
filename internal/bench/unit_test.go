package bench

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sextantmq/sextant/internal/mqtt/packet"
)

func TestHeaderRoundTrip(t *testing.T) {
	b := make([]byte, 40)
	h := Header{Sent: time.Unix(1700000000, 123456789), Pub: 7, Seq: 4000000000}
	PutHeader(b, h)
	got, ok := ParseHeader(b)
	if !ok || !got.Sent.Equal(h.Sent) || got.Pub != h.Pub || got.Seq != h.Seq {
		t.Fatalf("got %+v %v", got, ok)
	}
	if _, ok := ParseHeader(b[:HeaderSize-1]); ok {
		t.Fatal("short header parsed")
	}
	b[0] = 'x'
	if _, ok := ParseHeader(b); ok {
		t.Fatal("header without magic parsed")
	}
}

func TestTextStampRoundTrip(t *testing.T) {
	at := time.Unix(1700000000, 5)
	p := AppendStamp(nil, at)
	p = append(p, "hello"...)
	sent, rest, ok := ParseStamp(p)
	if !ok || !sent.Equal(at) || string(rest) != "hello" {
		t.Fatalf("got %v %q %v", sent, rest, ok)
	}
	for _, bad := range []string{"hello", "sx-ts=12", "sx-ts=abc;x", ""} {
		if _, rest, ok := ParseStamp([]byte(bad)); ok || string(rest) != bad {
			t.Errorf("%q parsed as a stamp", bad)
		}
	}
	// A generator payload is also a stamp.
	b := make([]byte, HeaderSize)
	PutHeader(b, Header{Sent: at})
	if sent, _, ok := ParseStamp(b); !ok || !sent.Equal(at) {
		t.Fatal("generator header not recognised as a stamp")
	}
}

func TestBitsetAgainstMap(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 1))
	var b bitset
	ref := map[uint32]bool{}
	for range 20000 {
		i := uint32(rnd.IntN(100000))
		if got := b.testAndSet(i); got != ref[i] {
			t.Fatalf("testAndSet(%d) = %v, want %v", i, got, ref[i])
		}
		ref[i] = true
	}
}

func TestSubscriberCountsDuplicatesAndReorders(t *testing.T) {
	s := newSubscriber(-1, 2, &shard{h: newHistogram()})
	pay := make([]byte, HeaderSize)
	send := func(pub, seq uint32) {
		PutHeader(pay, Header{Sent: time.Now(), Pub: pub, Seq: seq})
		s.onPublish(&packet.Publish{Payload: pay})
	}
	for _, seq := range []uint32{0, 1, 3, 2, 2, 4} { // 2 late, then 2 again
		send(0, seq)
	}
	send(1, 0)
	send(9, 0) // unknown publisher
	s.onPublish(&packet.Publish{Payload: []byte("not ours")})
	acc := account([]*subscriber{s}, [][]int64{{6}, {2}})
	want := []PubAccount{
		{Pub: 0, Sent: 6, Expected: 6, Received: 5, Lost: 1, Duplicated: 1, Reordered: 1},
		{Pub: 1, Sent: 2, Expected: 2, Received: 1, Lost: 1},
	}
	for i := range want {
		if acc[i] != want[i] {
			t.Errorf("publisher %d: got %+v, want %+v", i, acc[i], want[i])
		}
	}
	if s.foreign != 2 {
		t.Errorf("foreign %d, want 2", s.foreign)
	}
}

func TestAccountPerTopic(t *testing.T) {
	// Two subscribers of topics 0 and 1; one publisher sent 3 to topic 0
	// and 2 to topic 1.
	a := newSubscriber(0, 1, &shard{h: newHistogram()})
	b := newSubscriber(1, 1, &shard{h: newHistogram()})
	a.tracks[0].unique = 3
	b.tracks[0].unique = 1
	acc := account([]*subscriber{a, b}, [][]int64{{3, 2}})
	if acc[0].Expected != 5 || acc[0].Received != 4 || acc[0].Lost != 1 {
		t.Fatalf("got %+v", acc[0])
	}
}

func TestNumFormatting(t *testing.T) {
	for in, want := range map[float64]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -4500: "-4,500"} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestSeqCheckCountsMissingGapsAndBackwards(t *testing.T) {
	c := newSeqCheck()
	deliver := func(topic, idx string) {
		p := &packet.Publish{Topic: topic}
		if idx != "" {
			p.Props.User = []packet.UserProperty{{Key: "other", Value: "x"}, {Key: "sx-index", Value: idx}}
		}
		c.check(p)
	}
	// Topic a starts at 7 (a subscription starts anywhere), skips 9 and 10,
	// goes back to 8; topic b is counted apart; one delivery has no index,
	// one an index that is no number.
	for _, idx := range []string{"7", "8", "11", "8", "12"} {
		deliver("a", idx)
	}
	deliver("b", "1")
	deliver("b", "2")
	deliver("b", "")
	deliver("b", "x")
	want := SeqStats{Indexed: 7, Missing: 2, Gaps: 2, Backwards: 1}
	if c.SeqStats != want {
		t.Fatalf("got %+v, want %+v", c.SeqStats, want)
	}
}
