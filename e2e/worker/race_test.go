//go:build race

package worker_test

// raceEnabled: the workers under test are built with the race detector
// too, so a race between the records, the intervals and the stop watch
// fails the test.
const raceEnabled = true
