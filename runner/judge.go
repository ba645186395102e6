package runner

import (
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// judging is the scenario's judge with the run's sequential looks.
type judging struct {
	*judge.Judge
	// looks is the number of sequential looks of an early-stopping run,
	// 0 without early stopping.
	looks int
}

// newJudge resolves the scenario's expectations for an attack: the
// concurrency a link-cost-balanced model assumes, and the connections
// the attack keeps open (what per-connection balancing draws on).
func newJudge(sc *scenarios.Scenario, o attack.Options) *judging {
	c := o.Concurrency
	if o.Connections > 0 {
		c = o.Connections
	} else if c == 0 {
		c = attack.DefaultLanes
	}
	return &judging{Judge: judge.New(sc, judge.Attack{Connections: c, FixedConnections: fixedConnections(o)})}
}

// fixedConnections is how many connections an attack keeps open and reuses
// (docs/statistics.md §3.4), as attack's transport sets them up: with
// keep-alive, its lanes (attack.connections; 10 in an open loop without
// concurrency), else one per worker, at most maxConnections; 0 without
// keep-alive, where every request opens its own.
func fixedConnections(o attack.Options) int64 {
	if !o.KeepAlive {
		return 0
	}
	lanes := o.Connections
	if lanes == 0 && o.Concurrency == 0 {
		lanes = attack.DefaultLanes
	}
	c := lanes
	if lanes <= 1 && o.Concurrency > 0 {
		c = o.Concurrency
	}
	if o.MaxConnections > 0 {
		c = min(c, o.MaxConnections)
	}
	return int64(max(c, 1))
}

// AttackConnections is how many connections the scenario's attack keeps
// open and reuses, 0 when every request opens its own (keepAlive false):
// what per-connection balancing can draw on, for `mesh-verify plan`.
func AttackConnections(sc *scenarios.Scenario) int64 {
	return fixedConnections(measure.AttackConfig(sc, "", ""))
}

// evidence is everything a verdict may draw on: the counts of each
// attribution source, the mirror join of the logs, and the ready pods.
type evidence struct {
	body    tally.Snapshot
	logs    *tally.Snapshot
	metrics *tally.Snapshot
	// logInfo is what the logs say beyond the counts (runner/evidence.go).
	logInfo *logEvidence
	// readyPods names the serving pods of the observed workloads per cluster.
	readyPods map[string][]string
	// recon reconciles each counting source with the requests answered;
	// config lists the scenario's mistakes the run revealed, by source;
	// rules says what each rule matched.
	recon  map[string]*reports.Reconciliation
	config map[string][]reports.ConfigError
	rules  []reports.RuleReport
	// logSeconds counts the served log lines per cluster and second (Unix
	// time), for the timeline.
	logSeconds map[string]map[int64]int
	// from is the bodies' counts of each source's workers, for the
	// expectations judged from one source (attack.sources, from:).
	from map[string]tally.Snapshot
}

// source returns the counts of one source; logs and metrics exist only
// once the attack is over and the logs settled.
func (ev evidence) source(name string) (tally.Snapshot, bool) {
	switch name {
	case scenarios.SourceLogs:
		if ev.logs == nil {
			return tally.Snapshot{}, false
		}
		return *ev.logs, true
	case scenarios.SourceMetrics:
		if ev.metrics == nil {
			return tally.Snapshot{}, false
		}
		return *ev.metrics, true
	}
	return ev.body, true
}

// PlannedRequests is how many requests the scenario's attack will send, or
// 0 when only its duration bounds it in closed loop.
func PlannedRequests(sc *scenarios.Scenario) int64 {
	return measure.PlannedRequests(measure.AttackConfig(sc, "", ""))
}

// NewJudge is the judge of a scenario with its attack as the scenario
// says it, for `mesh-verify plan`.
func NewJudge(sc *scenarios.Scenario) *judge.Judge {
	return newJudge(sc, measure.AttackConfig(sc, "", "")).Judge
}

// settled reports whether every expectation already has a PASS or FAIL at
// its level for this interim look, which is when early stopping may stop.
func (j *judging) settled(ev evidence, look int) bool { return j.Settled(ev, look, j.looks) }

// evaluate judges every expectation; look is the sequential look (its
// spending level per expectation), or -1 without early stopping.
func (j *judging) evaluate(ev evidence, look int) []reports.Expectation {
	return j.Evaluate(ev, look, j.looks)
}

// plan sets the draws a correct mesh needs on the final judgements.
func (j *judging) plan(out []reports.Expectation) { j.Plan(out) }

// Counts returns the counts of one source (judge.Evidence).
func (ev evidence) Counts(source string) (tally.Snapshot, bool) { return ev.source(source) }

// FromSource returns the bodies' counts of one attack source's workers.
func (ev evidence) FromSource(cluster string) (tally.Snapshot, bool) {
	s, ok := ev.from[cluster]
	return s, ok
}

// ReadyPods names the serving pods of the observed workloads per cluster.
func (ev evidence) ReadyPods() map[string][]string { return ev.readyPods }

// MirrorCounts finds a mirror's copies and their primaries (evidence.go).
func (ev evidence) MirrorCounts(m *scenarios.MirrorExpect) judge.MirrorCount {
	mc := ev.mirrorCounts(m)
	return judge.MirrorCount{K: mc.k, N: mc.n, Basis: mc.basis, Unusable: mc.unusable}
}
