// Package clock is the time source of the code that reads the time or
// waits for it: the engine core, the head's router, the model repository's
// drain. Such code takes a Clock instead of calling time.Now, time.After
// or time.Sleep, the way the scheduler takes `now` as a parameter: Real in
// production, a Fake in tests, which the test moves forward with Advance.
//
// # Using it
//
// A component keeps a Clock (nil in its options meaning Real, see Or) and
// reads Now from it; where it waits, it selects on a Timer's channel
// beside its events:
//
//	t := c.NewTimer(d)
//	defer t.Stop()
//	select {
//	case <-t.C():
//	case <-wake:
//	case <-ctx.Done():
//	}
//
// Timers behave as Go 1.23's time.Timer: a stopped or reset timer never
// delivers a stale value afterwards. There is no Sleep and no After: a
// wait without an event beside it is what this package exists to avoid.
//
// # Tests
//
// A Fake stands still until the test calls Advance, which fires the timers
// that come due, in order. A test that must know the code under test is
// waiting before it moves time waits for that event with WaitArmed (a
// timer armed to fire a given time from now), never by sleeping. Deadlines
// that cross the process boundary (RPC timeouts, the network) stay on the
// real clock: a Fake governs what the component itself schedules.
package clock
