package topiclog

import (
	"errors"
	"testing"
	"time"
)

// A topic whose records all went keeps its index: the next record after a
// reopen continues from it, because every segment header carries the
// topic's last index.
func TestRetentionNeverResetsAnIndex(t *testing.T) {
	mem := NewMemFS()
	opts := Options{SegmentBytes: MinSegmentBytes}
	l := openLog(t, mem, opts)
	for i := range 5 {
		appendOK(t, l, entry("quiet", i))
	}
	for i := range 100 {
		appendOK(t, l, entry("busy", i))
	}
	rm, err := l.ApplyRetention(Retention{MaxBytes: 1}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if rm.Segments == 0 {
		t.Fatal("retention deleted nothing")
	}
	if first, last, ok := l.Bounds("quiet"); !ok || first != 6 || last != 5 {
		t.Fatalf("bounds of quiet after retention: %d %d %v, want 6 5 true", first, last, ok)
	}
	if _, err := l.Latest("quiet"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest of an emptied topic: %v", err)
	}
	if _, err := l.Get("quiet", 5); !errors.Is(err, ErrCompacted) {
		t.Fatalf("get of a removed record: %v", err)
	}
	l.Close()
	l = openLog(t, mem, opts)
	defer l.Close()
	a := appendOK(t, l, entry("quiet", 6))
	if a.Indexes[0] != 6 {
		t.Fatalf("after retention and reopen quiet's next index is %d, want 6", a.Indexes[0])
	}
}

func TestRetentionByCountKeepsAtLeastTheLastRecords(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{SegmentBytes: MinSegmentBytes})
	defer l.Close()
	for i := range 200 {
		appendOK(t, l, entry("a", i))
	}
	rm, err := l.ApplyRetention(Retention{MaxRecordsPerTopic: 50}, epoch)
	if err != nil {
		t.Fatal(err)
	}
	first, last, _ := l.Bounds("a")
	if n := last - first + 1; n < 50 || rm.Segments == 0 {
		t.Fatalf("kept %d records after deleting %d segments, want at least 50 and some deleted", n, rm.Segments)
	}
	// Nothing more may go: the first segment holds one of the last 50.
	segs := l.Segments()
	if last-(first+segs[0].Records-1) >= 50 {
		t.Fatalf("the first segment (%d records from index %d) could have gone", segs[0].Records, first)
	}
	_, err = l.Range("a", first-1, 10, 0)
	if f, ok := compactedFirst(err); !ok || f != first {
		t.Fatalf("range below first: %v, want ErrCompacted with %d", err, first)
	}
	if _, err := l.ReadSeq(1, 10, 0); !errors.Is(err, ErrCompacted) {
		t.Fatalf("ReadSeq(1) = %v, want ErrCompacted", err)
	}
}

// A quiet topic's recent records pin the segments that hold them: count
// retention is a floor per topic.
func TestRetentionByCountIsPinnedByAQuietTopic(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{SegmentBytes: MinSegmentBytes})
	defer l.Close()
	appendOK(t, l, entry("quiet", 0))
	for i := range 100 {
		appendOK(t, l, entry("busy", i))
	}
	rm, err := l.ApplyRetention(Retention{MaxRecordsPerTopic: 10}, epoch)
	if err != nil || rm.Segments != 0 {
		t.Fatalf("removed %+v, %v; want nothing (quiet's only record is in the first segment)", rm, err)
	}
}

func TestRetentionByAgeUsesRecordTimesAndTheCallersNow(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{SegmentAge: time.Minute})
	defer l.Close()
	for i := range 600 { // one a second for ten minutes: ten segments
		appendOK(t, l, entry("a", i))
	}
	if n := len(l.Segments()); n != 10 {
		t.Fatalf("%d segments, want 10 (SegmentAge rolls each minute)", n)
	}
	now := epoch.Add(10 * time.Minute)
	rm, err := l.ApplyRetention(Retention{MaxAge: 5 * time.Minute}, now)
	if err != nil {
		t.Fatal(err)
	}
	// Segments whose newest record is older than 5 minutes go: those
	// ending at 59 s, 1:59 ... 4:59 before now's 10:00.
	if rm.Segments != 5 || rm.FirstSeq != 301 {
		t.Fatalf("removed %+v, want 5 segments, first 301", rm)
	}
	r, err := l.Get("a", 301)
	if err != nil || r.Time.Before(now.Add(-5*time.Minute)) {
		t.Fatalf("first kept record %s, %v", describe(r), err)
	}
	// The same retention at the same now does nothing more.
	if rm, err := l.ApplyRetention(Retention{MaxAge: 5 * time.Minute}, now); err != nil || rm.Segments != 0 {
		t.Fatalf("second pass removed %+v, %v", rm, err)
	}
}

func TestRetentionKeepsTheActiveSegment(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{})
	defer l.Close()
	appendOK(t, l, entry("a", 0), entry("a", 1))
	rm, err := l.ApplyRetention(Retention{MaxRecordsPerTopic: 1, MaxBytes: 1, MaxAge: time.Nanosecond}, epoch.Add(time.Hour))
	if err != nil || rm.Segments != 0 {
		t.Fatalf("removed %+v, %v", rm, err)
	}
	if first, last, _ := l.Bounds("a"); first != 1 || last != 2 {
		t.Fatalf("bounds %d %d", first, last)
	}
}

func TestRetentionRemovesTheRetainedRecordWithItsSegment(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{SegmentBytes: MinSegmentBytes})
	defer l.Close()
	e := entry("a", 0)
	e.Retain = true
	appendOK(t, l, e)
	if r, err := l.LatestRetained("a"); err != nil || r.Index != 1 {
		t.Fatalf("latest retained: %s %v", describe(r), err)
	}
	for i := range 50 {
		appendOK(t, l, entry("a", i+1))
	}
	if _, err := l.ApplyRetention(Retention{MaxRecordsPerTopic: 5}, epoch); err != nil {
		t.Fatal(err)
	}
	if _, err := l.LatestRetained("a"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("latest retained after its segment went: %v, want ErrNotFound", err)
	}
}

func TestRetentionValidates(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{})
	defer l.Close()
	for _, r := range []Retention{{MaxBytes: -1}, {MaxAge: -time.Second}} {
		if _, err := l.ApplyRetention(r, epoch); !errors.Is(err, ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", r, err)
		}
	}
	if _, err := l.ApplyRetention(Retention{}, time.Time{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("zero now: %v, want ErrInvalid", err)
	}
}
