package clocktest

import (
	"testing"
	"time"
)

func TestManualFiresInOrderAndOnlyWhenDue(t *testing.T) {
	m := New(time.Unix(0, 0))
	var got []int
	m.AfterFunc(2*time.Second, func() { got = append(got, 2) })
	m.AfterFunc(time.Second, func() { got = append(got, 1) })
	stopped := m.AfterFunc(time.Second, func() { got = append(got, 99) })
	stopped.Stop()
	tm := m.NewTimer(3 * time.Second)

	m.Advance(500 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	m.Advance(2 * time.Second)
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Fatalf("got %v, want [1 2]", got)
	}
	select {
	case <-tm.C():
		t.Fatal("timer fired before its deadline")
	default:
	}
	m.Advance(time.Second)
	select {
	case <-tm.C():
	default:
		t.Fatal("timer did not fire at its deadline")
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reported it active")
	}
	m.Advance(time.Second)
	select {
	case <-tm.C():
	default:
		t.Fatal("reset timer did not fire")
	}
}
