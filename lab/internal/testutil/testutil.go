// Package testutil holds helpers shared by the lab packages' tests.
package testutil

import (
	"runtime"
	"testing"
	"time"
)

// NoLeaks fails the test if goroutines started during it are still running
// once its cleanups ran. Register it first: cleanups run last-in first-out.
// It counts all goroutines, so it is only sound in tests that do not run in
// parallel.
func NoLeaks(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
		if n := runtime.NumGoroutine(); n > before {
			buf := make([]byte, 1<<16)
			buf = buf[:runtime.Stack(buf, true)]
			t.Errorf("%d goroutines leaked:\n%s", n-before, buf)
		}
	})
}
