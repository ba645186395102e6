// Package judge decides a scenario's expectations. Each expectation is
// resolved once, when the judge is made, into a kind (split, reached,
// only, never, successRate, latency, mirror) that carries its source
// text, its dimension, its source, its sampling unit and its confidence,
// and that judges evidence, plans the sample it needs and describes it.
// The runner, `mesh-verify plan` and `mesh-verify check` call it; no code
// outside this package asks an expectation which of its fields is set.
package judge

import (
	"fmt"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Attack is what the judge needs to know of the scenario's attack.
type Attack struct {
	// Connections is the concurrency a link-cost-balanced model assumes
	// when the split does not say (split.connections).
	Connections int
	// FixedConnections is how many connections the attack keeps open and
	// reuses, 0 when every request opens its own (docs/statistics.md §3.4).
	FixedConnections int64
}

// Evidence is everything a verdict may draw on, as the run collected it.
type Evidence interface {
	// Counts returns the counts of one source (body, logs, metrics);
	// false when that source was not read (yet).
	Counts(source string) (tally.Snapshot, bool)
	// FromSource returns the bodies' counts of one attack source's
	// workers (attack.sources, from:).
	FromSource(cluster string) (tally.Snapshot, bool)
	// ReadyPods names the serving pods of the observed workloads per
	// cluster.
	ReadyPods() map[string][]string
	// Unusable says why counts from source cannot be trusted for a
	// verdict ("" when they can); attributed is whether the expectation
	// judges attributed buckets (a reconciliation then counts too).
	Unusable(source string, attributed bool) string
	// MirrorCounts finds a mirror's copies and their primaries.
	MirrorCounts(m *scenarios.MirrorExpect) MirrorCount
}

// MirrorCount is what a mirror expectation is judged on: K copies seen
// among N primary requests, and what N is; or why it cannot be judged.
type MirrorCount struct {
	K, N     int64
	Basis    string
	Unusable string
}

// Expectation is one expectation resolved: its source text and its kind.
type Expectation struct {
	// Spec is the expectation as the scenario says it.
	Spec scenarios.Expectation
	kind kind
}

// Name is the expectation's name (given or derived).
func (e Expectation) Name() string { return e.Spec.Name }

// Kind names the expectation's kind (split, reached, ...).
func (e Expectation) Kind() string { return e.kind.name() }

// By is the dimension the expectation groups requests by ("" for success
// rate and latency, "mirror" for a mirror once judged).
func (e Expectation) By() string { return e.kind.by() }

// Source is where the expectation's counts come from: body, logs or
// metrics.
func (e Expectation) Source() string { return e.Spec.JudgedFrom() }

// Attributed reports whether the expectation judges attributed buckets
// (split, reached, only, never).
func (e Expectation) Attributed() bool { return e.kind.attributed() }

// Judge judges a scenario's expectations.
type Judge struct {
	sc     *scenarios.Scenario
	attack Attack
	exps   []Expectation
	// mesh holds the splits read from the mesh's objects (WithMesh).
	mesh Mesh
	// gateLooks > 0 judges a split's windows as the looks of a converge
	// gate (WithGateLooks).
	gateLooks int
}

// WithGateLooks makes the judge judge a split's windows as the looks of
// a converge gate that judges them as they seal (run --converge with a
// watchable split, docs/statistics.md §10.1): each window at α/looks,
// whatever the number of windows judged. It returns j.
func (j *Judge) WithGateLooks(looks int) *Judge {
	j.gateLooks = looks
	return j
}

// New resolves every expectation of a validated scenario into its kind.
func New(sc *scenarios.Scenario, a Attack) *Judge {
	return &Judge{sc: sc, attack: a, exps: Resolve(sc)}
}

// Resolve resolves every expectation of a validated scenario into its
// kind, in file order.
func Resolve(sc *scenarios.Scenario) []Expectation {
	out := make([]Expectation, 0, len(sc.Expect))
	for _, e := range sc.Expect {
		out = append(out, Expectation{Spec: e, kind: resolve(e)})
	}
	return out
}

// Expectations are the scenario's expectations, resolved, in file order.
func (j *Judge) Expectations() []Expectation { return j.exps }

// Sampling is the sampling unit an expectation's verdict assumes
// (docs/statistics.md §3): the split's own balancing, else the
// scenario's; a mirror is always per request, as Envoy decides per
// request.
func (j *Judge) Sampling(e Expectation) assert.Sampling {
	s := assert.Sampling{Balancing: assert.Balancing(j.sc.BalancingOf(&e.Spec)), Reason: j.sc.Statistics.BalancingReason}
	if ks := e.kind.sampling(); ks != nil {
		s = *ks
	} else if k := e.Spec.Spec(); k != nil && k.OwnBalancing() != "" {
		s.Reason = "set by " + k.Kind() + ".balancing"
	}
	s.FixedConnections = j.attack.FixedConnections
	return s
}

// Confidence is an expectation's own confidence: split.confidence, else
// statistics.confidence.
func (j *Judge) Confidence(e Expectation) float64 {
	if c := e.kind.confidence(); c > 0 {
		return c
	}
	return j.sc.Statistics.Confidence
}

// level is the confidence an expectation is judged at: its own, or with
// early stopping the spending level of its own confidence at this look
// of looks (docs/statistics.md §6); look < 0 means no sequential looks.
func (j *Judge) level(e Expectation, look, looks int) float64 {
	conf := j.Confidence(e)
	if look < 0 || looks == 0 {
		return conf
	}
	return assert.SpendingLevels(looks, conf)[look]
}

// Evaluate judges every expectation; look is the sequential look of looks
// (its spending level per expectation), or -1 without early stopping.
func (j *Judge) Evaluate(ev Evidence, look, looks int) []reports.Expectation {
	out := make([]reports.Expectation, 0, len(j.exps))
	for _, e := range j.exps {
		out = append(out, j.one(e, ev, look, looks))
	}
	return out
}

// Settled reports whether every expectation already has a PASS or FAIL at
// its level for this interim look, which is when early stopping may stop.
// Expectations on logs or metrics are never settled early: those sources
// lag the responses and are read in full only after the attack.
func (j *Judge) Settled(ev Evidence, look, looks int) bool {
	for _, e := range j.Evaluate(ev, look, looks) {
		// A split judged in windows is never settled early: its windows
		// still to come would change k, the number it spends α over.
		if e.Verdict == assert.Inconclusive || e.Source != "" && e.Source != scenarios.SourceBody || e.Windows != nil {
			return false
		}
	}
	return true
}

// Plan sets, on the final judgements of the split and mirror
// expectations, the draws a correct mesh needs to pass with the
// scenario's power, as `mesh-verify plan` computes them: a search, done
// once for the report, never at the interim looks.
func (j *Judge) Plan(out []reports.Expectation) {
	for i, e := range j.exps {
		// A split in windows is judged per window at α/k: a plan for the
		// whole run as one block would promise what no window gets.
		if !e.kind.planned() || out[i].Model == nil || out[i].Windows != nil {
			continue
		}
		spec := j.splitSpec(e, out[i].Model.Shares, out[i].Confidence)
		out[i].Planned, out[i].PlannedUnit = plannedOf(assert.PlanSplit(spec))
	}
}

// plannedOf is what a plan asks the attack for: connections when they
// limit the evidence, else requests (docs/statistics.md §5).
func plannedOf(p assert.Plan) (int64, string) {
	if p.Connections > 0 && p.Requests == 0 {
		return p.Connections, "connections"
	}
	return p.Requests, "requests"
}

// call is one expectation judged once: what its kind may draw on.
type call struct {
	j        *Judge
	e        Expectation
	ev       Evidence
	counts   tally.Snapshot
	conf     float64
	sampling assert.Sampling
	share    assert.ShareSpec
}

// missing is how many answered bodies have no bucket by the dimension:
// they are judged by their worst case (docs/statistics.md §3.6); logs and
// metrics are reconciled instead.
func (c *call) missing(by string, source string) int64 {
	if source != scenarios.SourceBody {
		return 0
	}
	return c.counts.Unattributed[by]
}

func (j *Judge) one(e Expectation, ev Evidence, look, looks int) reports.Expectation {
	st := j.sc.Statistics
	conf := j.level(e, look, looks)
	sampling := j.Sampling(e)
	r := reports.Expectation{Name: e.Spec.Name, Source: e.Source(), Confidence: conf}
	if r.Source == "" {
		r.Source = scenarios.SourceBody
	}
	s, ok := ev.Counts(r.Source)
	if !ok {
		r.Kind, r.Verdict = e.Spec.Kind(), assert.Inconclusive
		r.Reason = fmt.Sprintf("no %s were read (yet): nothing to judge", r.Source)
		return r
	}
	if from := e.Spec.From; from != "" {
		// Only the requests the workers in that cluster sent.
		r.From = from
		if s, ok = ev.FromSource(from); !ok || s.Total == 0 {
			r.Kind, r.Verdict = e.Spec.Kind(), assert.Inconclusive
			r.Reason = fmt.Sprintf("no request from source %s was measured: nothing to judge", from)
			return r
		}
	}
	if e.kind.attributed() || e.kind.mirror() {
		// Success rate and latency need no attribution.
		if why := ev.Unusable(r.Source, e.kind.attributed()); why != "" {
			r.Kind, r.Verdict, r.Reason = e.Spec.Kind(), assert.Inconclusive, why
			return r
		}
	}
	if !e.kind.mirror() {
		sampling.RoutingDesignEffect = routingDesignEffect(s)
	}
	c := &call{j: j, e: e, ev: ev, counts: s, conf: conf, sampling: sampling,
		share: assert.ShareSpec{Confidence: conf, Power: st.Power, Evidence: st.Margin.Fraction(), Sampling: sampling}}
	r.Kind = e.kind.name()
	e.kind.judge(c, &r)
	return r
}

func setResult(r *reports.Expectation, res assert.Result) {
	r.Result = &res
	r.Verdict, r.Reason, r.Advice = res.Verdict, res.Reason, res.Advice
}

// Mirrors are the scenario's mirror expectations: the log counter tells
// copies from primaries at their targets (runner/logs.go).
func Mirrors(sc *scenarios.Scenario) []*scenarios.MirrorExpect {
	var out []*scenarios.MirrorExpect
	for _, e := range Resolve(sc) {
		if k, ok := e.kind.(mirrorKind); ok {
			out = append(out, k.m)
		}
	}
	return out
}

// MeshSources are the mesh objects the scenario's splits and mirrors
// read their expectations from (fromMesh): what rbac must grant reads of
// (runner/permissions.go).
func MeshSources(sc *scenarios.Scenario) []*scenarios.MeshSource {
	var out []*scenarios.MeshSource
	for _, f := range FromMeshSources(sc) {
		out = append(out, f.Source)
	}
	return out
}
