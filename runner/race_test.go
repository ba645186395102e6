//go:build race

package runner

// raceEnabled: the race detector slows Go's regexp about tenfold, which
// tests that time a slow rule take into account.
const raceEnabled = true
