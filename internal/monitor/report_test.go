package monitor

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/serf/coordinate"
)

func sampleReport() Report {
	return Report{
		Node: "edge-1", Incarnation: 1700000000123456789, Seq: 42, Window: 5 * time.Second,
		Coord: &coordinate.Coordinate{Vec: []float64{0.012, -0.003, 0, 0.0001, 0, 0, 0, 0}, Error: 0.35, Adjustment: -0.0004, Height: 0.00021},
		Load:  Load{CPU: 0.42, Memory: 0.1, Network: 0.003, MsgIn: 1234.5, MsgOut: 9876.125},
		Topics: []TopicReport{
			{Topic: "swarm/7/pos", Producers: Side{Count: 8, MaxRTT: ms(12.5), Rate: 80}, Consumers: Side{Count: 3, MaxRTT: ms(3), Rate: 80}},
			{Topic: "swarm/8/pos", Consumers: Side{Count: 1, MaxRTT: ms(1), Rate: 0.2}},
		},
	}
}

// close reports whether two reports are equal within the encoding's units.
func closeReports(a, b Report) bool {
	near := func(x, y, unit float64) bool { return math.Abs(x-y) <= unit }
	if a.Node != b.Node || a.Incarnation != b.Incarnation || a.Seq != b.Seq || a.Window != b.Window ||
		(a.Coord == nil) != (b.Coord == nil) || len(a.Topics) != len(b.Topics) {
		return false
	}
	if a.Coord != nil {
		if len(a.Coord.Vec) != len(b.Coord.Vec) {
			return false
		}
		for i := range a.Coord.Vec {
			if !near(a.Coord.Vec[i], b.Coord.Vec[i], 1e-9) {
				return false
			}
		}
		if !near(a.Coord.Error, b.Coord.Error, 1e-9) || !near(a.Coord.Height, b.Coord.Height, 1e-9) || !near(a.Coord.Adjustment, b.Coord.Adjustment, 1e-9) {
			return false
		}
	}
	la, lb := a.Load, b.Load
	if !near(la.CPU, lb.CPU, 1e-6) || !near(la.Memory, lb.Memory, 1e-6) || !near(la.Network, lb.Network, 1e-6) ||
		!near(la.MsgIn, lb.MsgIn, 1e-3) || !near(la.MsgOut, lb.MsgOut, 1e-3) {
		return false
	}
	for i := range a.Topics {
		x, y := a.Topics[i], b.Topics[i]
		if x.Topic != y.Topic {
			return false
		}
		for _, s := range [][2]Side{{x.Producers, y.Producers}, {x.Consumers, y.Consumers}} {
			if s[0].Count != s[1].Count || s[0].MaxRTT != s[1].MaxRTT || !near(s[0].Rate, s[1].Rate, 1e-3) {
				return false
			}
		}
	}
	return true
}

func TestReportRoundTrip(t *testing.T) {
	for _, r := range []Report{sampleReport(), {Node: "n", Seq: 1, Window: time.Millisecond}} {
		b, err := AppendReport(nil, &r)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeReport(b)
		if err != nil {
			t.Fatal(err)
		}
		if !closeReports(got, r) {
			t.Fatalf("round trip\n%+v\nwant\n%+v", got, r)
		}
	}
}

func TestReportRejects(t *testing.T) {
	for name, mutate := range map[string]func(*Report){
		"no node":         func(r *Report) { r.Node = "" },
		"long node":       func(r *Report) { r.Node = strings.Repeat("n", MaxNodeIDBytes+1) },
		"seq 0":           func(r *Report) { r.Seq = 0 },
		"no window":       func(r *Report) { r.Window = 0 },
		"long window":     func(r *Report) { r.Window = MaxWindow + 1 },
		"NaN coordinate":  func(r *Report) { r.Coord.Vec[0] = math.NaN() },
		"huge dims":       func(r *Report) { r.Coord.Vec = make([]float64, MaxDims+1) },
		"negative CPU":    func(r *Report) { r.Load.CPU = -0.1 },
		"infinite rate":   func(r *Report) { r.Load.MsgIn = math.Inf(1) },
		"unsorted topics": func(r *Report) { r.Topics[0], r.Topics[1] = r.Topics[1], r.Topics[0] },
		"repeated topic":  func(r *Report) { r.Topics[1].Topic = r.Topics[0].Topic },
		"empty topic":     func(r *Report) { r.Topics[0].Topic = "" },
		"bad UTF-8 topic": func(r *Report) { r.Topics[1].Topic = "\xff" },
		"negative count":  func(r *Report) { r.Topics[0].Producers.Count = -1 },
		"negative RTT":    func(r *Report) { r.Topics[0].Consumers.MaxRTT = -1 },
		"NaN topic rate":  func(r *Report) { r.Topics[0].Consumers.Rate = math.NaN() },
		"too many topics": func(r *Report) { r.Topics = make([]TopicReport, MaxReportTopics+1) },
	} {
		r := sampleReport()
		mutate(&r)
		if _, err := AppendReport(nil, &r); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: encode err %v, want ErrCorrupt", name, err)
		}
	}
	good, err := AppendReport(nil, ptr(sampleReport()))
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"empty":        nil,
		"version 2":    append([]byte{2}, good[1:]...),
		"truncated":    good[:len(good)-1],
		"trailing":     append(append([]byte(nil), good...), 0),
		"coord flag 2": []byte{1, 1, 'n', 1, 1, 1, 2},
		"zero dims":    []byte{1, 1, 'n', 1, 1, 1, 1, 0},
		"huge count":   append([]byte{1, 1, 'n', 1, 1, 1, 0, 0, 0, 0, 0, 0}, 0xff, 0xff, 0xff, 0xff, 0x0f),
		"oversized":    make([]byte, MaxReportBytes+1),
	} {
		if _, err := DecodeReport(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("%s: decode err %v, want ErrCorrupt", name, err)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzDecodeReport: the decoder never panics, and what it accepts
// re-encodes to a report that decodes to the same report.
func FuzzDecodeReport(f *testing.F) {
	for _, r := range []Report{sampleReport(), {Node: "n", Seq: 1, Window: time.Second}} {
		b, err := AppendReport(nil, &r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := DecodeReport(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v is not ErrCorrupt", err)
			}
			return
		}
		enc, err := AppendReport(nil, &r)
		if err != nil {
			t.Fatalf("accepted report does not encode: %v", err)
		}
		again, err := DecodeReport(enc)
		if err != nil || !closeReports(again, r) {
			t.Fatalf("re-encoded report differs: %v\n%+v\n%+v", err, again, r)
		}
		if enc2, _ := AppendReport(nil, &again); string(enc2) != string(enc) {
			t.Fatal("encoding is not stable")
		}
	})
}

// reportSize builds a node's report with topics topics, each with k
// producers and k consumers on this node, and returns its size in bytes.
func reportSize(t testing.TB, topics, k int) int {
	tr := NewTracker(Limits{})
	for i := 0; i < topics; i++ {
		name := fmt.Sprintf("fleet/%04d/telemetry", i)
		for j := 0; j < k; j++ {
			c := cl(fmt.Sprintf("c%d-%d", i, j), float64(1+j%40))
			tr.Published(c, name)
			tr.Subscribed(cl(fmt.Sprintf("s%d-%d", i, j), float64(1+j%40)), name)
		}
		tr.Delivered(name)
	}
	r := sampleReport()
	r.Topics = tr.Report(5 * time.Second)
	b, err := AppendReport(nil, &r)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// A report's size does not grow with the clients per topic (ePulsar's point
// about aggregation): only the varint widths of the counts and rates grow,
// a few bytes per topic from 1 to 10,000 clients.
func TestReportSizeDoesNotGrowWithClients(t *testing.T) {
	const topics = 10
	base := reportSize(t, topics, 1)
	t.Logf("clients per topic (each side) -> bytes per report of %d topics (bytes per topic)", topics)
	for _, k := range []int{1, 10, 100, 1000, 10_000} {
		size := reportSize(t, topics, k)
		t.Logf("%6d -> %6d B (%.1f B/topic)", k, size, float64(size)/topics)
		if growth := size - base; growth > 6*topics {
			t.Fatalf("%d clients per topic: %d B against %d B with 1: it grows with the clients", k, size, base)
		}
	}
}

// BenchmarkReportSize reports bytes per report (20 topics) by clients per
// topic; run with -benchtime=1x.
func BenchmarkReportSize(b *testing.B) {
	for _, k := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("clients=%d", k), func(b *testing.B) {
			size := 0
			for range b.N {
				size = reportSize(b, 20, k)
			}
			b.ReportMetric(float64(size), "bytes/report")
			b.ReportMetric(float64(size)/20, "bytes/topic")
		})
	}
}

// BenchmarkPublished is the publish path's cost of monitoring: one call per
// sequenced PUBLISH.
func BenchmarkPublished(b *testing.B) {
	tr := NewTracker(Limits{})
	clients := make([]*fakeClient, 64)
	for i := range clients {
		clients[i] = cl(fmt.Sprint("c", i), 1)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			tr.Published(clients[i%64], "fleet/0001/telemetry")
			i++
		}
	})
}
