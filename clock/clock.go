package clock

import "time"

// Clock tells the time and makes timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that fires once, d after Now (at once when
	// d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer, as time.Timer with Go 1.23 semantics: after
// Stop or Reset returns, C delivers no value of the previous arming.
type Timer interface {
	// C delivers the time the timer fired; it holds at most one value.
	C() <-chan time.Time
	// Stop disarms the timer; it reports whether the timer was armed.
	Stop() bool
	// Reset rearms the timer to fire d after now; it reports whether the
	// timer was armed.
	Reset(d time.Duration) bool
}

// Real is the system clock.
var Real Clock = realClock{}

// Or returns c, or Real when c is nil: what a component with a Clock in
// its options uses.
func Or(c Clock) Clock {
	if c == nil {
		return Real
	}
	return c
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
