package tests

import (
	"testing"
	"time"
)

// poll checks cond every interval until it holds (true) or bound has
// passed (false; the caller fails with what it knows).
//
// It is the one poll of this package: the servers under test run as a
// whole, often in another process, and tell their state only through what
// a client can ask (a health endpoint, /metrics, a worker's Stats); no
// event of theirs reaches the test. The bound keeps a state that never
// comes from hanging the run.
func poll(t testing.TB, bound, interval time.Duration, cond func() bool) bool {
	t.Helper()
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(interval) // see above: nothing to wait on but a poll
	}
	return true
}
