package topiclog

import (
	"errors"
	"testing"
)

func TestAppendAndRead(t *testing.T) {
	m := NewMemFS()
	l := openLog(t, m, Options{})
	a := appendOK(t, l, entry("a", 1), entry("b", 2), entry("a", 3))
	if a.FirstSeq != 1 || len(a.Indexes) != 3 || a.Indexes[0] != 1 || a.Indexes[1] != 1 || a.Indexes[2] != 2 {
		t.Fatalf("appended %+v", a)
	}
	r, err := l.Get("a", 2)
	if err != nil || r.Seq != 3 || string(r.Payload) != "a-3" || r.Mark != 3 {
		t.Fatalf("get a#2: %v %v", describe(r), err)
	}
	if _, err := l.Get("a", 3); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get a#3: %v", err)
	}
	recs, err := l.ReadSeq(1, 10, 0)
	if err != nil || len(recs) != 3 {
		t.Fatalf("readseq: %d %v", len(recs), err)
	}
	if l.LastMark() != 3 {
		t.Fatalf("last mark %d", l.LastMark())
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l = openLog(t, m, Options{})
	defer l.Close()
	r, err = l.Get("b", 1)
	if err != nil || r.Seq != 2 {
		t.Fatalf("after reopen get b#1: %v %v", describe(r), err)
	}
	if first, last, ok := l.Bounds("a"); !ok || first != 1 || last != 2 {
		t.Fatalf("bounds a: %d %d %v", first, last, ok)
	}
}
