package topiclog

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
)

// TestInjectedFailures fails each mutating file operation of a workload in
// turn (appends with segment rolls, retention, a restore) and checks that
// the operation that hit it returns an error wrapping the injected one,
// that readers then see exactly the operations that succeeded, that the
// log goes on working unless it reported ErrFailed, and that reopening it
// finds the same state.
func TestInjectedFailures(t *testing.T) {
	newLog, newM := snapLog(t, NewMemFS(), 25, "new")
	stream := snapshotBytes(t, newLog)
	newLog.Close()
	opts := Options{SegmentBytes: MinSegmentBytes}
	kinds := map[string]int{}
	for at := 0; ; at++ {
		mem := NewMemFS()
		count, armed, hit := 0, false, ""
		efs := &ErrorFS{FS: mem, Inject: func(op Op, name string) error {
			if !armed || !mutating[op] {
				return nil
			}
			count++
			if count-1 == at {
				hit = op.String()
				return ErrInjected
			}
			return nil
		}}
		l := openLog(t, efs, opts)
		armed = true
		m := newModel()
		failed := false // the log reported ErrFailed
		// step runs one operation; it reports whether the injection hit it.
		step := func(what string, f func() error) {
			if failed {
				return
			}
			err := f()
			if err == nil {
				return
			}
			if !errors.Is(err, ErrInjected) {
				t.Fatalf("failure at op %d (%s) in %s: %v does not wrap the injected error", at, hit, what, err)
			}
			kinds[what+" "+hit]++
			failed = errors.Is(err, ErrFailed)
			checkAll(t, l, m)
			if failed {
				if _, err := l.AppendBatch([]Entry{entry("t/0", 1)}); !errors.Is(err, ErrFailed) {
					t.Fatalf("append after ErrFailed: %v", err)
				}
			}
		}
		for i := range 40 {
			es := []Entry{entry(fmt.Sprint("t/", i%3), i), entry("t/x", i)}
			es[0].Payload = bytes.Repeat([]byte{byte(i)}, 150)
			step("append", func() error {
				_, err := l.AppendBatch(es)
				if err == nil {
					m.addBatch(es...)
				}
				return err
			})
			if i == 20 {
				step("retention", func() error {
					rm, err := l.ApplyRetention(Retention{MaxRecordsPerTopic: 5}, epoch)
					if rm.FirstSeq != 0 {
						// The log's view moved on even if a file
						// could not be removed.
						m.first = rm.FirstSeq
					}
					return err
				})
			}
			if i == 30 {
				step("restore", func() error {
					err := l.Restore(bytes.NewReader(stream))
					if err == nil || errors.Is(err, ErrFailed) && l.NextSeq() == newM.next() {
						m = newM.clone()
					}
					return err
				})
			}
		}
		l.Close()
		if hit == "" {
			t.Logf("%d failure points: %v", at, kinds)
			break
		}
		l = openLog(t, mem, opts)
		if l.NextSeq() == newM.next() && m.next() != newM.next() {
			m = newM.clone() // a restore failed after its commit point
		}
		// A segment that retention could not remove comes back.
		if first := l.FirstSeq(); first <= m.first {
			m.first = first
		}
		checkAll(t, l, m)
		l.Close()
	}
	for _, k := range []string{"append write", "append sync", "append create", "append syncdir", "retention remove", "restore create", "restore rename"} {
		if kinds[k] == 0 {
			t.Errorf("no failure injected into %s", k)
		}
	}
}

func TestAppendValidates(t *testing.T) {
	l := openLog(t, NewMemFS(), Options{})
	defer l.Close()
	long := string(bytes.Repeat([]byte{'a'}, MaxTopicLen+1))
	for name, e := range map[string]Entry{
		"empty topic": {Topic: "", Time: epoch},
		"long topic":  {Topic: long, Time: epoch},
		"zero time":   {Topic: "a"},
	} {
		if _, err := l.AppendBatch([]Entry{entry("a", 1), e}); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
	if l.NextSeq() != 1 {
		t.Fatalf("a refused batch was partly appended: next %d", l.NextSeq())
	}
	if a, err := l.AppendBatch(nil); err != nil || a.FirstSeq != 1 {
		t.Fatalf("empty batch: %+v %v", a, err)
	}
	for _, o := range []Options{{SegmentBytes: 10}, {SegmentBytes: MaxSegmentBytes + 1}, {SegmentAge: -1}, {Sync: 7}} {
		if _, err := Open(NewMemFS(), "g", o); !errors.Is(err, ErrInvalid) {
			t.Errorf("options %+v: %v, want ErrInvalid", o, err)
		}
	}
	if _, err := l.Range("a", 1, 0, 0); !errors.Is(err, ErrInvalid) {
		t.Errorf("range of 0 records: %v", err)
	}
}
