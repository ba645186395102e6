package judge

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// kind is what one kind of expectation does.
type kind interface {
	name() string
	by() string
	// attributed: judged on attributed buckets (split, reached, only,
	// never), so a source's configuration and reconciliation decide
	// whether it can be judged at all.
	attributed() bool
	// mirror: judged on the copies in the mirror target's logs.
	mirror() bool
	// planned: its verdict's needs are searched for the report.
	planned() bool
	// sampling is the kind's own sampling unit; nil to take the
	// scenario's (Judge.Sampling).
	sampling() *assert.Sampling
	// confidence is the kind's own confidence; 0 to take the scenario's.
	confidence() float64
	// judge sets the verdict on r from the evidence of c.
	judge(c *call, r *reports.Expectation)
	// plan prints and returns the draws the kind needs (plan.go).
	plan(p *planner, e Expectation) (assert.Plan, error)
}

// resolve maps an expectation's one kind onto what judges it: the one
// switch over the kinds of scenarios.Spec.
func resolve(e scenarios.Expectation) kind {
	switch k := e.Spec().(type) {
	case *scenarios.Split:
		return splitKind{k}
	case scenarios.Reached:
		return reachedKind{k.BucketSet}
	case scenarios.Only:
		return bucketKind{set: k.BucketSet, kind: scenarios.KindOnly, judgeFn: assert.Only}
	case scenarios.Never:
		return bucketKind{set: k.BucketSet, kind: scenarios.KindNever, judgeFn: assert.Never}
	case *scenarios.SuccessRate:
		return successRateKind{k}
	case *scenarios.Latency:
		return latencyKind{k}
	case *scenarios.MirrorExpect:
		return mirrorKind{k}
	}
	return noKind{}
}

// noKind is an expectation that sets no kind (or several), which
// validation rejects: nothing is judged.
type noKind struct{}

func (noKind) name() string                                    { return "" }
func (noKind) by() string                                      { return "" }
func (noKind) attributed() bool                                { return false }
func (noKind) mirror() bool                                    { return false }
func (noKind) planned() bool                                   { return false }
func (noKind) sampling() *assert.Sampling                      { return nil }
func (noKind) confidence() float64                             { return 0 }
func (noKind) judge(*call, *reports.Expectation)               {}
func (noKind) plan(*planner, Expectation) (assert.Plan, error) { return assert.Plan{}, nil }

type splitKind struct{ sp *scenarios.Split }

func (splitKind) name() string                           { return scenarios.KindSplit }
func (k splitKind) by() string                           { return k.sp.By }
func (splitKind) attributed() bool                       { return true }
func (splitKind) mirror() bool                           { return false }
func (splitKind) planned() bool                          { return true }
func (splitKind) sampling() *assert.Sampling             { return nil }
func (k splitKind) confidence() float64                  { return k.sp.Confidence }
func (k splitKind) margins() (*scenarios.Percent, *bool) { return k.sp.Margin, k.sp.Relative }

func (k splitKind) judge(c *call, r *reports.Expectation) {
	sp := k.sp
	r.By = sp.By
	model, err := c.j.model(sp, c.ev.ReadyPods())
	if err != nil {
		r.Verdict, r.Reason = assert.Fail, "expected split: "+err.Error()
		return
	}
	if sp.Windows != nil {
		r.Model = &model
		windowed{sp: sp, model: model}.judge(c, r)
		return
	}
	spec := c.j.baseSpec(sp.Margin, sp.Relative, model.Shares, c.conf)
	spec.Sampling, spec.Missing = c.sampling, c.missing(sp.By, r.Source)
	res := assert.Split(byName(c.counts, sp.By, slices.Collect(maps.Keys(model.Shares))), spec)
	r.Model, r.Split = &model, &res
	r.Verdict, r.Reason, r.Advice = res.Verdict, res.Reason, res.Advice
}

type reachedKind struct{ set *scenarios.BucketSet }

func (reachedKind) name() string               { return scenarios.KindReached }
func (k reachedKind) by() string               { return k.set.By }
func (reachedKind) attributed() bool           { return true }
func (reachedKind) mirror() bool               { return false }
func (reachedKind) planned() bool              { return false }
func (reachedKind) sampling() *assert.Sampling { return nil }
func (reachedKind) confidence() float64        { return 0 }

func (k reachedKind) judge(c *call, r *reports.Expectation) {
	rc := k.set
	r.By = rc.By
	c.share.Missing = c.missing(rc.By, r.Source)
	setResult(r, assert.Reached(byName(c.counts, rc.By, rc.Buckets), rc.Buckets, c.j.minShare(c.e, rc, c.ev.ReadyPods()), c.share))
}

// bucketKind is only and never: a set of buckets, and a margin of share
// tolerated outside (only) or inside (never) it.
type bucketKind struct {
	set     *scenarios.BucketSet
	kind    string
	judgeFn func(c assert.Counts, buckets []string, margin float64, s assert.ShareSpec) assert.Result
}

func (k bucketKind) name() string             { return k.kind }
func (k bucketKind) by() string               { return k.set.By }
func (bucketKind) attributed() bool           { return true }
func (bucketKind) mirror() bool               { return false }
func (bucketKind) planned() bool              { return false }
func (bucketKind) sampling() *assert.Sampling { return nil }
func (bucketKind) confidence() float64        { return 0 }

func (k bucketKind) judge(c *call, r *reports.Expectation) {
	b := k.set
	r.By = b.By
	c.share.Missing = c.missing(b.By, r.Source)
	setResult(r, k.judgeFn(byName(c.counts, b.By, b.Buckets), b.Buckets, Margin(b.Margin), c.share))
}

type successRateKind struct{ sr *scenarios.SuccessRate }

func (successRateKind) name() string               { return scenarios.KindSuccessRate }
func (successRateKind) by() string                 { return "" }
func (successRateKind) attributed() bool           { return false }
func (successRateKind) mirror() bool               { return false }
func (successRateKind) planned() bool              { return false }
func (successRateKind) sampling() *assert.Sampling { return nil }
func (successRateKind) confidence() float64        { return 0 }

func (k successRateKind) judge(c *call, r *reports.Expectation) {
	oc := c.counts.Dimensions[tally.Outcome]
	setResult(r, assert.SuccessRate(oc.Count(tally.Success), oc, k.sr.AtLeast.Fraction(), c.share))
}

type latencyKind struct{ l *scenarios.Latency }

func (latencyKind) name() string               { return scenarios.KindLatency }
func (latencyKind) by() string                 { return "" }
func (latencyKind) attributed() bool           { return false }
func (latencyKind) mirror() bool               { return false }
func (latencyKind) planned() bool              { return false }
func (latencyKind) sampling() *assert.Sampling { return nil }
func (latencyKind) confidence() float64        { return 0 }

// judge compares the percentile with the bound. Percentiles come from
// tally's latency histogram (within tally.LatencyRelativeError of the
// exact order statistic, for one process's run or workers' merged), the
// same the report shows; no interval is claimed.
func (k latencyKind) judge(c *call, r *reports.Expectation) {
	r.Confidence = 0 // a percentile estimate claims no confidence
	setResult(r, latency(k.l, c.counts))
}

func latency(l *scenarios.Latency, s tally.Snapshot) assert.Result {
	if s.Metrics.Requests == 0 {
		return assert.Result{Verdict: assert.Inconclusive, Reason: "no requests, no latency"}
	}
	q := s.LatencyQuantile(l.Percentile / 100)
	res := assert.Result{Observed: q.Seconds()}
	if q < l.Below.Duration {
		res.Verdict = assert.Pass
		res.Reason = fmt.Sprintf("p%g latency %s is below %s", l.Percentile, q.Round(time.Microsecond), l.Below.Duration)
	} else {
		res.Verdict = assert.Fail
		res.Reason = fmt.Sprintf("p%g latency %s is not below %s", l.Percentile, q.Round(time.Microsecond), l.Below.Duration)
	}
	return res
}

type mirrorKind struct{ m *scenarios.MirrorExpect }

func (mirrorKind) name() string     { return scenarios.KindMirror }
func (mirrorKind) by() string       { return "" }
func (mirrorKind) attributed() bool { return false }
func (mirrorKind) mirror() bool     { return true }
func (mirrorKind) planned() bool    { return true }

// sampling: Envoy decides per request whether to mirror.
func (mirrorKind) sampling() *assert.Sampling {
	s := assert.MirrorSampling()
	return &s
}
func (mirrorKind) confidence() float64 { return 0 }

// margins: a mirror's margin is its own or the scenario's; relative is
// the scenario's.
func (k mirrorKind) margins() (*scenarios.Percent, *bool) { return k.m.Margin, nil }

// judge judges the share of primary requests whose copy reached the
// mirror target, q̂ = k / n, from the counts the evidence finds (README.md,
// mirroring), with the statistics of docs/statistics.md §4 (mirror).
func (k mirrorKind) judge(c *call, r *reports.Expectation) {
	m := k.m
	mc := c.ev.MirrorCounts(m)
	if mc.Unusable != "" {
		r.Verdict, r.Reason = assert.Inconclusive, mc.Unusable
		return
	}
	pct, provenance := 100*m.Percent.Fraction(), []string(nil)
	if m.FromMesh != nil {
		var err error
		if pct, provenance, err = c.j.meshMirror(m); err != nil {
			r.Verdict, r.Reason = assert.Fail, "expected mirror: "+err.Error()
			return
		}
	}
	model, err := assert.MirrorModel(pct)
	if err != nil {
		r.Verdict, r.Reason = assert.Fail, err.Error()
		return
	}
	model.Explanation = append(provenance, model.Explanation...)
	res := assert.Mirror(mc.K, mc.N, c.j.baseSpec(m.Margin, nil, model.Shares, c.conf))
	r.By, r.Model, r.Split = "mirror", &model, &res
	r.Verdict, r.Advice = res.Verdict, res.Advice
	r.Reason = fmt.Sprintf("%d of %d %s were also seen at %s: ", mc.K, mc.N, mc.Basis, m.To) + res.Reason
}
