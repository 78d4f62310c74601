package topiclog

import (
	"encoding/hex"
	"errors"
	"math"
	"slices"
	"testing"
	"time"
)

// The encodings are pinned byte for byte: replicas and snapshots exchange
// them, and docs/design/topiclog.md describes them.
func TestFormatIsPinned(t *testing.T) {
	r := appendRecord(nil, &rec{seq: 7, index: 3, mark: 42, time: 1_000_000_007, retain: true, end: true, topic: []byte("a/b"), payload: []byte("hi")})
	const wantRec = "29000000" + "77b7bbc0" + // length 41, CRC-32C (checked with an independent bitwise implementation)
		"52" + "0700000000000000" + "0300000000000000" + "2a00000000000000" + "07ca9a3b00000000" + // 'R' seq index mark time
		"03" + "0300" + "612f62" + "6869" // flags (retain, batch end), topic, payload
	if got := hex.EncodeToString(r); got != wantRec {
		t.Errorf("record encodes as\n%s\nwant\n%s", got, wantRec)
	}
	h := appendHeader(nil, &header{first: 5, topics: []topicLast{{"a", 2}, {"b", 9}}})
	const wantHdr = "28000000" + "209707cb" + // length 40, CRC-32C
		"48" + "5358544c" + "01" + "0500000000000000" + "02000000" + // 'H' "SXTL" version first count
		"0100" + "61" + "0200000000000000" + "0100" + "62" + "0900000000000000"
	if got := hex.EncodeToString(h); got != wantHdr {
		t.Errorf("header encodes as\n%s\nwant\n%s", got, wantHdr)
	}
}

func TestDecodersRefuseWhatTheEncoderCannotProduce(t *testing.T) {
	good := appendRecord(nil, &rec{seq: 1, index: 1, topic: []byte("t")})[frameHeaderLen:]
	bodies := map[string][]byte{
		"short":       good[:recordFixedLen],
		"kind":        append([]byte{'X'}, good[1:]...),
		"flags":       func() []byte { b := slices.Clone(good); b[33] = 4; return b }(),
		"empty topic": func() []byte { b := slices.Clone(good); b[34], b[35] = 0, 0; return b }(),
		"long topic":  func() []byte { b := slices.Clone(good); b[34] = 9; return b }(),
	}
	for name, b := range bodies {
		if _, err := parseRecord(b); err == nil {
			t.Errorf("record %s: accepted", name)
		}
	}
	hdr := func(topics ...topicLast) []byte {
		return appendHeader(nil, &header{first: 1, topics: topics})[frameHeaderLen:]
	}
	headers := map[string][]byte{
		"unsorted":  hdr(topicLast{"b", 1}, topicLast{"a", 1}),
		"duplicate": hdr(topicLast{"a", 1}, topicLast{"a", 2}),
		"trailing":  append(hdr(topicLast{"a", 1}), 0),
		"count":     func() []byte { b := hdr(); b[14] = 0xff; return b }(),
		"version":   func() []byte { b := hdr(); b[5] = 2; return b }(),
		"magic":     func() []byte { b := hdr(); b[1] = 'X'; return b }(),
		"cut":       hdr(topicLast{"abc", 1})[:headerFixedLen+4],
	}
	for name, b := range headers {
		if _, err := parseHeader(b); err == nil {
			t.Errorf("header %s: accepted", name)
		}
	}
	frame := appendRecord(nil, &rec{seq: 1, index: 1, topic: []byte("t")})
	if _, _, err := parseFrame(frame[:len(frame)-1]); !errors.Is(err, errTorn) {
		t.Errorf("cut frame: %v", err)
	}
	frame[len(frame)-1] ^= 1
	if _, _, err := parseFrame(frame); !errors.Is(err, errBadFrame) {
		t.Errorf("flipped frame: %v", err)
	}
}

func TestTimesOutsideTheFormatAreRefused(t *testing.T) {
	for _, tm := range []time.Time{{}, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2300, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, ok := unixNanos(tm); ok {
			t.Errorf("%v accepted", tm)
		}
	}
	for _, tm := range []time.Time{time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64), epoch} {
		if n, ok := unixNanos(tm); !ok || n != tm.UnixNano() {
			t.Errorf("%v refused", tm)
		}
	}
}

// seqList against a slice, with gaps wide enough to overflow its 32-bit
// deltas.
func TestSeqListAgainstASlice(t *testing.T) {
	for _, seed := range seeds(1, 2, 3) {
		rng := newRand(t, seed)
		var s seqList
		var want []uint64
		seq := uint64(1)
		wide := 0
		for range 20000 {
			switch p := rng.IntN(100); {
			case p < 80:
				switch rng.IntN(500) {
				case 0:
					seq += 1 << 33
					wide++
				default:
					seq += 1 + uint64(rng.IntN(5))
				}
				s.push(seq)
				want = append(want, seq)
			case p < 83:
				k := rng.IntN(len(want) + 1)
				if rng.IntN(10) == 0 {
					k = len(want) // drop everything
				}
				s.dropFront(k)
				want = want[k:]
			default:
				if s.len() != len(want) {
					t.Fatalf("len %d, want %d", s.len(), len(want))
				}
				if len(want) > 0 {
					i := rng.IntN(len(want))
					if s.at(i) != want[i] {
						t.Fatalf("at(%d) = %d, want %d", i, s.at(i), want[i])
					}
					probe := want[i] + uint64(rng.IntN(3))
					n, _ := slices.BinarySearch(want, probe)
					if got := s.countBelow(probe); got != n {
						t.Fatalf("countBelow(%d) = %d, want %d", probe, got, n)
					}
				}
			}
		}
		for i := range want {
			if s.at(i) != want[i] {
				t.Fatalf("at(%d) = %d, want %d", i, s.at(i), want[i])
			}
		}
		if wide == 0 {
			t.Fatal("no wide gap exercised")
		}
	}
}
