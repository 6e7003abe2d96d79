// Package wait is how a test waits for something to happen: on a
// condition, checked often and then less often, up to a deadline that
// fails the test naming what never happened. Never a fixed sleep.
package wait

import (
	"testing"
	"time"
)

// Deadline is how long For waits: far above any healthy wait, far below
// go test's timeout, so a hang fails with its name.
const Deadline = 30 * time.Second

// For returns once cond holds; if it does not within Deadline, it fails t
// with what.
func For(t testing.TB, what string, cond func() bool) {
	t.Helper()
	if !Until(Deadline, cond) {
		t.Fatalf("waited %s for %s", Deadline, what)
	}
}

// Until reports whether cond held within d, checking it at once, then
// every millisecond, backing off to every 50 ms.
func Until(d time.Duration, cond func() bool) bool {
	end := time.Now().Add(d)
	for pause := time.Millisecond; ; pause = min(pause*2, 50*time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(pause)
	}
}
