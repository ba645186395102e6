//go:build race

package attack

// raceEnabled: the race detector slows every request several times over,
// so an open loop's requests overlap more and take more connections;
// tests that bound connections by timing allow for it.
const raceEnabled = true
