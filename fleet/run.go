package fleet

import "time"

// RunConfig is a worker ConfigMap's run.json (docs/distributed.md, The
// worker): what the coordinator tells every worker of one run besides the
// scenario and the inventory.
type RunConfig struct {
	// RunID is the distributed run's id; worker i's request ids are
	// <RunID>-w<i>-<seq>.
	RunID string `json:"runId"`
	// Workers is the number of workers N of the whole run, every source's;
	// each attacks its share.
	Workers int `json:"workers"`
	// Target is the URL the workers attack, the in-cluster address
	// (scenarios.Scenario.InClusterURL).
	Target string `json:"target"`
	// Interval is how often a worker prints its state, like "2s".
	Interval string `json:"interval"`
}

// MaxRecordsPerSecond is how many interval records the coordinator takes
// per second at most, whatever the number of workers: each costs it a
// decode and a merge (docs/distributed.md, How the coordinator scales).
// RecordInterval and RecordPhase keep the workers to it.
const MaxRecordsPerSecond = 100

// RecordInterval is how often each of workers workers prints its state:
// every second, and less often past MaxRecordsPerSecond workers (every 10 s
// for 1,000), so that the coordinator's load per second stays bounded.
func RecordInterval(workers int) time.Duration {
	return max(time.Second, time.Duration(workers)*time.Second/MaxRecordsPerSecond)
}

// RecordPhase is when, within each interval, worker index of workers
// prints its record: the workers start together, so without a phase of
// their own their records would all come in the same instant.
func RecordPhase(interval time.Duration, index, workers int) time.Duration {
	if workers < 1 {
		return 0
	}
	return time.Duration(int64(interval) / int64(workers) * int64(index%workers))
}
