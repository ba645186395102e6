package fleet

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
	// IndexOffset is the index of this Job's first worker among the run's:
	// worker i of a source's Job is worker IndexOffset+i of the run
	// (attack.sources numbers them source by source).
	IndexOffset int `json:"indexOffset,omitempty"`
	// Target is the URL the workers attack, the in-cluster address
	// (scenarios.Scenario.InClusterURL).
	Target string `json:"target"`
	// Interval is how often a worker prints its state, like "2s".
	Interval string `json:"interval"`
}
