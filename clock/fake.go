package clock

import (
	"context"
	"sync"
	"time"
)

// Fake is a Clock for tests: its time moves only when the test calls
// Advance (or Set). The zero value is not usable; call NewFake.
type Fake struct {
	mu  sync.Mutex
	now time.Time // guarded by mu
	// armed holds the timers waiting to fire; guarded by mu.
	armed map[*fakeTimer]struct{}
	// armedCh is closed and replaced whenever a timer is armed; guarded
	// by mu.
	armedCh chan struct{}
}

// NewFake returns a Fake reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, armed: map[*fakeTimer]struct{}{}, armedCh: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer returns a timer that fires when Advance passes d from now (at
// once when d <= 0).
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{f: f, c: make(chan time.Time, 1)}
	f.mu.Lock()
	defer f.mu.Unlock()
	t.armLocked(d)
	return t
}

// Advance moves the time forward by d, firing the timers that come due on
// the way, earliest first, each with its own time as Now.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.advanceToLocked(f.now.Add(d))
}

// Set moves the time to t (never backwards), as Advance.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.After(f.now) {
		f.advanceToLocked(t)
	}
}

func (f *Fake) advanceToLocked(end time.Time) {
	for {
		var next *fakeTimer
		for t := range f.armed {
			if !t.when.After(end) && (next == nil || t.when.Before(next.when)) {
				next = t
			}
		}
		if next == nil {
			break
		}
		if next.when.After(f.now) {
			f.now = next.when
		}
		next.fireLocked()
	}
	f.now = end
}

// WaitArmed blocks until a timer is armed to fire d after Now (so that
// the code under test waits for it), or until ctx ends. It is how a test
// knows when to Advance; d tells the timer it waits for from the others.
func (f *Fake) WaitArmed(ctx context.Context, d time.Duration) error {
	for {
		f.mu.Lock()
		at := f.now.Add(d)
		ch := f.armedCh
		for t := range f.armed {
			if t.when.Equal(at) {
				f.mu.Unlock()
				return nil
			}
		}
		f.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// Armed returns how many timers wait to fire.
func (f *Fake) Armed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.armed)
}

type fakeTimer struct {
	f    *Fake
	c    chan time.Time
	when time.Time // guarded by f.mu
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	return t.disarmLocked()
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	t.f.mu.Lock()
	defer t.f.mu.Unlock()
	was := t.disarmLocked()
	t.armLocked(d)
	return was
}

// disarmLocked removes the timer and drops a value it delivered that
// nobody received (Go 1.23 semantics).
func (t *fakeTimer) disarmLocked() bool {
	_, was := t.f.armed[t]
	delete(t.f.armed, t)
	select {
	case <-t.c:
	default:
	}
	return was
}

func (t *fakeTimer) armLocked(d time.Duration) {
	t.when = t.f.now.Add(d)
	if d <= 0 {
		t.fireLocked()
		return
	}
	t.f.armed[t] = struct{}{}
	close(t.f.armedCh)
	t.f.armedCh = make(chan struct{})
}

func (t *fakeTimer) fireLocked() {
	delete(t.f.armed, t)
	select {
	case t.c <- t.when:
	default:
	}
}
