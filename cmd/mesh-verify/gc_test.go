package main

import (
	"runtime/debug"
	"testing"
)

// TestGCPercent: the collector's target is defaultGCPercent unless the
// user set GOGC. Not parallel: the target is the process's.
func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		gogc string
		want int
	}{
		{"", defaultGCPercent},
		{"200", 100}, // left as the runtime set it (100 here: the test's own)
		{"off", 100},
	} {
		old := debug.SetGCPercent(100)
		gcPercent(func(k string) string {
			if k == "GOGC" {
				return tc.gogc
			}
			return ""
		}, defaultGCPercent)
		if got := debug.SetGCPercent(old); got != tc.want {
			t.Errorf("GOGC=%q: GC percent %d, want %d", tc.gogc, got, tc.want)
		}
	}
}
