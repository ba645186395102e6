package e2etest

import (
	"testing"
	"time"
)

// Poll retries f every 100 ms until it returns nil, and fails the test
// with f's last error when timeout has passed: a wait on a condition the
// lab's API servers reach in their own time (a ServiceAccount created by
// the controller manager, an object the watch has read).
func Poll(t testing.TB, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
