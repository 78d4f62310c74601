package placement

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

func coord8(seed float64) *coordinate.Coordinate {
	c := coordinate.NewCoordinate(coordinate.DefaultConfig())
	for i := range c.Vec {
		c.Vec[i] = seed * float64(i+1) / 1000
	}
	c.Height, c.Adjustment, c.Error = 0.001*seed, -0.0001, 0.3
	return c
}

func manyClients(n int) Clients {
	var c Clients
	for i := 0; i < n; i++ {
		cl := Client{Node: NodeID(fmt.Sprintf("n%d", i%7)), Coord: coord8(float64(i)), Rate: 10}
		if i%2 == 0 {
			c.Producers = append(c.Producers, cl)
		} else {
			c.Consumers = append(c.Consumers, cl)
		}
	}
	return c
}

func TestMonitoringSizeIsIndependentOfClientsPerTopic(t *testing.T) {
	var summarySizes, clientSizes []int
	// Clients spread over several access nodes on each side; a side whose
	// clients share one node adds that node's ID, whatever their number.
	for _, n := range []int{4, 8, 64, 1024} {
		c := manyClients(n)
		s, err := Summarize(c, &Node{ID: "h", Coord: coord8(3)})
		if err != nil {
			t.Fatal(err)
		}
		summarySizes = append(summarySizes, len(AppendSummary(nil, "game/avatar/0001", s)))
		clientSizes = append(clientSizes, len(AppendClients(nil, "game/avatar/0001", s.Worst, s.Rates, c)))
	}
	for _, n := range summarySizes[1:] {
		if n != summarySizes[0] {
			t.Fatalf("summary report sizes %v vary with the number of clients", summarySizes)
		}
	}
	if clientSizes[3] < 200*clientSizes[0] {
		t.Fatalf("all-pairs report sizes %v do not grow with clients", clientSizes)
	}
	t.Logf("summary report %d bytes; all-pairs report %v bytes for 4, 8, 64, 1024 clients", summarySizes[0], clientSizes)
}

func TestReportsRoundTrip(t *testing.T) {
	c := manyClients(5)
	s, err := Summarize(c, &Node{ID: "h", Coord: coord8(2)})
	if err != nil {
		t.Fatal(err)
	}
	topic, got, err := DecodeSummary(AppendSummary(nil, "a/b", s))
	if err != nil || topic != "a/b" || !reflect.DeepEqual(got, s) {
		t.Fatalf("summary round trip: %v %q\n got %+v\nwant %+v", err, topic, got, s)
	}
	empty, err := Summarize(Clients{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, got, err := DecodeSummary(AppendSummary(nil, "", empty)); err != nil || !reflect.DeepEqual(got, empty) {
		t.Fatalf("empty summary round trip: %v %+v", err, got)
	}
	topic, worst, rates, cs, err := DecodeClients(AppendClients(nil, "x", 7*time.Millisecond, Rates{In: 1, Out: 2}, c))
	if err != nil || topic != "x" || worst != 7*time.Millisecond || rates != (Rates{1, 2}) ||
		len(cs.Producers) != 3 || len(cs.Consumers) != 2 || !reflect.DeepEqual(cs.Consumers[1].Coord, c.Consumers[1].Coord) {
		t.Fatalf("clients round trip: %v %q %v %v %+v", err, topic, worst, rates, cs)
	}
}

func TestDecodeRejectsTruncationAndTrailingBytes(t *testing.T) {
	s, _ := Summarize(manyClients(4), &Node{ID: "h", Coord: coord8(1)})
	for _, enc := range [][]byte{AppendSummary(nil, "t", s), AppendClients(nil, "t", 0, Rates{}, manyClients(3))} {
		decode := func(b []byte) error {
			if enc[0] == kindSummary {
				_, _, err := DecodeSummary(b)
				return err
			}
			_, _, _, _, err := DecodeClients(b)
			return err
		}
		for i := 0; i < len(enc); i++ {
			if err := decode(enc[:i]); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("prefix of %d bytes: err %v", i, err)
			}
		}
		if err := decode(append(enc, 0)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("trailing byte: %v", err)
		}
	}
}

func FuzzDecodeSummary(f *testing.F) {
	s, _ := Summarize(manyClients(3), &Node{ID: "h", Coord: coord8(1)})
	f.Add(AppendSummary(nil, "t", s))
	f.Add(AppendSummary(nil, "", Summary{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		topic, s, err := DecodeSummary(b)
		if err != nil {
			return
		}
		again := AppendSummary(nil, topic, s)
		topic2, s2, err := DecodeSummary(again)
		if err != nil || topic2 != topic || !reflect.DeepEqual(s2, s) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}

func FuzzDecodeClients(f *testing.F) {
	f.Add(AppendClients(nil, "t", time.Millisecond, Rates{1, 2}, manyClients(3)))
	f.Add(AppendClients(nil, "", 0, Rates{}, Clients{}))
	f.Fuzz(func(t *testing.T, b []byte) {
		topic, worst, rates, c, err := DecodeClients(b)
		if err != nil {
			return
		}
		again := AppendClients(nil, topic, worst, rates, c)
		_, _, _, c2, err := DecodeClients(again)
		if err != nil || !reflect.DeepEqual(c2, c) {
			t.Fatalf("re-decode: %v", err)
		}
	})
}
