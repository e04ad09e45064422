package clock

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fired reports whether t delivered a value, and which.
func fired(t Timer) (time.Time, bool) {
	select {
	case at := <-t.C():
		return at, true
	default:
		return time.Time{}, false
	}
}

// TestFakeFiresInOrder: Advance fires the timers that come due, each at
// its own time, and moves Now to the end.
func TestFakeFiresInOrder(t *testing.T) {
	f := NewFake(t0)
	a, b, c := f.NewTimer(2*time.Second), f.NewTimer(time.Second), f.NewTimer(time.Minute)
	if f.Armed() != 3 {
		t.Fatalf("armed %d", f.Armed())
	}
	f.Advance(1500 * time.Millisecond)
	if _, ok := fired(a); ok {
		t.Fatal("a fired early")
	}
	if at, ok := fired(b); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("b: %v %v", at, ok)
	}
	f.Advance(time.Second)
	if at, ok := fired(a); !ok || !at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("a: %v %v", at, ok)
	}
	if got := f.Now(); !got.Equal(t0.Add(2500 * time.Millisecond)) {
		t.Fatalf("now %v", got)
	}
	if _, ok := fired(c); ok || f.Armed() != 1 {
		t.Fatalf("c fired, or %d armed", f.Armed())
	}
	if !c.Stop() || c.Stop() || f.Armed() != 0 {
		t.Fatal("Stop: want true once, then false")
	}
	f.Set(t0) // never backwards
	if !f.Now().Equal(t0.Add(2500 * time.Millisecond)) {
		t.Fatal("Set moved time backwards")
	}
}

// TestFakeResetDropsStale: as Go 1.23 timers, a value delivered before
// Stop or Reset is not received after; a timer with d <= 0 fires at once.
func TestFakeResetDropsStale(t *testing.T) {
	f := NewFake(t0)
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second)
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reported it armed")
	}
	if _, ok := fired(tm); ok {
		t.Fatal("a stale value after Reset")
	}
	f.Advance(time.Second)
	if _, ok := fired(tm); !ok {
		t.Fatal("the reset timer did not fire")
	}
	now := f.NewTimer(0)
	if at, ok := fired(now); !ok || !at.Equal(f.Now()) {
		t.Fatal("a zero timer did not fire at once")
	}
}

// TestWaitArmed: WaitArmed returns once a timer due the given time from
// now is armed, and not for another.
func TestWaitArmed(t *testing.T) {
	f := NewFake(t0)
	f.NewTimer(time.Hour)
	f.NewTimer(time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.WaitArmed(ctx, time.Minute); err == nil {
		t.Fatal("WaitArmed found a minute's timer among an hour's and a second's")
	}
	done := make(chan error, 1)
	go func() { done <- f.WaitArmed(context.Background(), time.Minute) }()
	f.NewTimer(time.Minute)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestReal: the real clock's timers fire.
func TestReal(t *testing.T) {
	c := Or(nil)
	before := c.Now()
	tm := c.NewTimer(time.Millisecond)
	if at := <-tm.C(); at.Before(before) {
		t.Fatalf("fired at %v, before %v", at, before)
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported it armed")
	}
}
