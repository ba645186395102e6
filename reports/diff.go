package reports

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/mesh-verify/mesh-verify/assert"
)

// DiffSchema identifies the format of a comparison of two runs.
const DiffSchema = "mesh-verify.io/report-diff/v1"

// DiffReport compares two saved runs, A (before) and B (after): for every
// dimension and source both attributed, each bucket's counts and shares,
// the difference with its confidence interval and whether it changed
// significantly (docs/statistics.md §9); and each expectation's verdict in
// both runs.
type DiffReport struct {
	Schema string `json:"schema"`
	// Confidence is the level of the intervals and of each dimension's
	// family of tests.
	Confidence float64 `json:"confidence"`
	A          DiffRun `json:"a"`
	B          DiffRun `json:"b"`
	// Dimensions are the dimensions compared, in run A's order.
	Dimensions []DimensionDiff `json:"dimensions"`
	// NotCompared are the dimensions one run attributed and the other did
	// not.
	NotCompared []DimensionSkip `json:"notCompared,omitempty"`
	// Expectations are matched by name, run A's first.
	Expectations []ExpectationDiff `json:"expectations"`
	// Tested is set when any bucket of any dimension could be judged;
	// Significant when any changed significantly.
	Tested      bool `json:"tested"`
	Significant bool `json:"significant"`
	// Outcome is the comparison's one conclusion, from the dimensions'
	// and the expectations' results (the summary line says it, and the
	// exit code follows it): changed, no-change or untestable.
	Outcome assert.ExpectationStatus `json:"outcome"`
	// Regressions name the expectations whose verdict is worse in run B.
	Regressions []string `json:"regressions,omitempty"`
	// Notes say what a reader should know about the comparison.
	Notes []string `json:"notes,omitempty"`
}

// DiffRun identifies one of the two runs.
type DiffRun struct {
	RunID    string `json:"runId"`
	Scenario string `json:"scenario"`
	Target   string `json:"target,omitempty"`
	// Requests is the requests the attack sent.
	Requests int64          `json:"requests"`
	Verdict  assert.Verdict `json:"verdict"`
	// Balancing is the sampling unit the run's verdicts assumed.
	Balancing string `json:"balancing,omitempty"`
	Tool      string `json:"tool,omitempty"`
}

// DimensionDiff is the comparison of one dimension as one source saw it.
type DimensionDiff struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	assert.Comparison
	// Clusters is the cluster of each pod bucket, for showing it as
	// cluster/pod.
	Clusters map[string]string `json:"clusters,omitempty"`
}

// DimensionSkip is a dimension that could not be compared.
type DimensionSkip struct {
	Name   string `json:"name"`
	Source string `json:"source"`
	Reason string `json:"reason"`
}

// ExpectationDiff is one expectation's verdict in both runs; a nil verdict
// means the run had no expectation of that name.
type ExpectationDiff struct {
	Name   string          `json:"name"`
	Kind   string          `json:"kind,omitempty"`
	By     string          `json:"by,omitempty"`
	Source string          `json:"source,omitempty"`
	A      *assert.Verdict `json:"a,omitempty"`
	B      *assert.Verdict `json:"b,omitempty"`
	// Comparison compares its shares at each run's own effective draws
	// (docs/statistics.md §9.4); nil when the kind has none to compare
	// (latency, reached) or a run lacks it.
	Comparison *assert.ExpectationComparison `json:"comparison,omitempty"`
}

// Changed reports whether the verdict differs between the runs (or the
// expectation is in only one of them).
func (e ExpectationDiff) Changed() bool {
	return e.A == nil || e.B == nil || *e.A != *e.B
}

// Diff compares run a with run b at the given confidence level (default
// 0.95 outside (0,1)). It fails only on reports whose dimensions are
// inconsistent (a bucket twice).
func Diff(a, b *Report, level float64) (DiffReport, error) {
	if !(level > 0 && level < 1) {
		level = assert.DefaultConfidence
	}
	for _, r := range []struct {
		name string
		rep  *Report
	}{{"run A", a}, {"run B", b}} {
		if err := validateCounts(r.rep); err != nil {
			return DiffReport{}, fmt.Errorf("%s (%s): %w", r.name, r.rep.RunID, err)
		}
	}
	d := DiffReport{Schema: DiffSchema, Confidence: level, A: diffRun(a), B: diffRun(b),
		Dimensions: []DimensionDiff{}, Expectations: []ExpectationDiff{}}
	if a.Scenario.Name != b.Scenario.Name {
		d.Notes = append(d.Notes, fmt.Sprintf("the runs are of different scenarios (%s and %s)", a.Scenario.Name, b.Scenario.Name))
	}
	if a.RunID != "" && a.RunID == b.RunID {
		d.Notes = append(d.Notes, "both reports are of the same run")
	}
	type key struct{ name, source string }
	keyOf := func(dm Dimension) key { return key{dm.Name, dimSource(dm)} }
	inB := map[key]Dimension{}
	for _, dm := range b.Dimensions {
		inB[keyOf(dm)] = dm
	}
	seen := map[key]bool{}
	noSums := map[string][]string{}
	for _, da := range a.Dimensions {
		k := keyOf(da)
		seen[k] = true
		db, ok := inB[k]
		switch {
		case da.Attributed == 0 && (!ok || db.Attributed == 0):
			continue
		case !ok || db.Attributed == 0:
			d.NotCompared = append(d.NotCompared, DimensionSkip{k.name, k.source, "run B attributed no request by " + k.name + " from " + k.source})
			continue
		case da.Attributed == 0:
			d.NotCompared = append(d.NotCompared, DimensionSkip{k.name, k.source, "run A attributed no request by " + k.name + " from " + k.source})
			continue
		}
		ca, noteA, err := dimCounts(da)
		if err != nil {
			return DiffReport{}, fmt.Errorf("run A %s: %w", a.RunID, err)
		}
		cb, noteB, err := dimCounts(db)
		if err != nil {
			return DiffReport{}, fmt.Errorf("run B %s: %w", b.RunID, err)
		}
		for _, n := range []struct{ run, note string }{{"A", noteA}, {"B", noteB}} {
			switch n.note {
			case "":
			case noSumsNote:
				noSums[n.run] = append(noSums[n.run], k.name+" from "+k.source)
			default:
				d.Notes = append(d.Notes, fmt.Sprintf("run %s, %s from %s: %s", n.run, k.name, k.source, n.note))
			}
		}
		c, err := assert.CompareShares(ca, cb, level)
		if err != nil {
			return DiffReport{}, fmt.Errorf("%s from %s: %w", k.name, k.source, err)
		}
		dd := DimensionDiff{Name: k.name, Source: k.source, Comparison: c}
		for _, bk := range slices.Concat(db.Buckets, da.Buckets) {
			if bk.Cluster != "" {
				if dd.Clusters == nil {
					dd.Clusters = map[string]string{}
				}
				dd.Clusters[bk.Name] = bk.Cluster
			}
		}
		d.Dimensions = append(d.Dimensions, dd)
		d.Tested = d.Tested || c.Tested()
		d.Significant = d.Significant || c.Significant
	}
	for _, db := range b.Dimensions {
		if k := keyOf(db); !seen[k] && db.Attributed > 0 {
			d.NotCompared = append(d.NotCompared, DimensionSkip{k.name, k.source, "run A attributed no request by " + k.name + " from " + k.source})
		}
	}

	for _, run := range []string{"A", "B"} {
		if len(noSums[run]) > 0 {
			d.Notes = append(d.Notes, fmt.Sprintf("run %s has no per-connection counts (%s): %s, which understates the variance if connections were reused under per-connection balancing",
				run, strings.Join(noSums[run], ", "), noSumsNote))
		}
	}

	byName := map[string]int{}
	for _, e := range a.Expectation {
		v := e.Verdict
		byName[e.Name] = len(d.Expectations)
		d.Expectations = append(d.Expectations, ExpectationDiff{Name: e.Name, Kind: e.Kind, By: e.By, Source: e.Source, A: &v})
	}
	for _, e := range b.Expectation {
		v := e.Verdict
		if i, ok := byName[e.Name]; ok {
			d.Expectations[i].B = &v
			ea := a.Expectation[slices.IndexFunc(a.Expectation, func(x Expectation) bool { return x.Name == e.Name })]
			d.Expectations[i].Comparison = compareExpectation(ea, e, a, b, level)
			continue
		}
		d.Expectations = append(d.Expectations, ExpectationDiff{Name: e.Name, Kind: e.Kind, By: e.By, Source: e.Source, B: &v})
	}
	d.conclude()
	return d, nil
}

// conclude sets the outcome from everything the tables show, so that the
// summary line cannot contradict them: changed when a dimension's bucket
// or an expectation changed; else untestable when an expectation could
// not be compared or nothing was; else no change.
func (d *DiffReport) conclude() {
	changed, untestable, tested := d.Significant, !d.Tested, d.Tested
	for _, e := range d.Expectations {
		if e.A != nil && e.B != nil && *e.B > *e.A {
			d.Regressions = append(d.Regressions, e.Name)
		}
		c := e.Comparison
		if c == nil {
			// No shares to compare (latency, reached): decisive verdicts
			// that differ are still a change, each wrong with
			// probability at most α.
			if verdictFlip(e) {
				changed = true
			}
			continue
		}
		tested = true
		switch c.Status {
		case assert.ExpectationChanged:
			changed = true
		case assert.ExpectationUntestable:
			untestable = true
		}
	}
	switch {
	case changed:
		d.Outcome = assert.ExpectationChanged
	case untestable || !tested:
		d.Outcome = assert.ExpectationUntestable
	default:
		d.Outcome = assert.ExpectationSame
	}
}

// verdictFlip reports PASS in one run and FAIL in the other.
func verdictFlip(e ExpectationDiff) bool {
	return e.A != nil && e.B != nil && *e.A != *e.B && *e.A != assert.Inconclusive && *e.B != assert.Inconclusive
}

// compareExpectation compares one expectation of both runs at the
// effective draws each run's verdict used (docs/statistics.md §9.4): a
// split's or mirror's buckets, or the one share a successRate, only or
// never judged. nil for the kinds with no share to compare.
func compareExpectation(ea, eb Expectation, a, b *Report, level float64) *assert.ExpectationComparison {
	sa, oka := judgedShares(ea, a)
	sb, okb := judgedShares(eb, b)
	if !oka || !okb {
		return nil
	}
	c := assert.CompareJudged(sa, sb, ea.Verdict, eb.Verdict, level)
	return &c
}

// judgedShares are the shares an expectation's verdict was judged on.
func judgedShares(e Expectation, r *Report) ([]assert.JudgedShare, bool) {
	switch {
	case e.Split != nil:
		out := make([]assert.JudgedShare, 0, len(e.Split.Buckets))
		for _, bk := range e.Split.Buckets {
			margin := max(bk.Expected-bk.Allowed.Lo, bk.Allowed.Hi-bk.Expected)
			out = append(out, assert.JudgedShare{Bucket: bk.Bucket, Count: bk.Count, N: e.Split.N,
				EffectiveCount: bk.EffectiveCount, EffectiveN: e.Split.EffectiveN, Margin: margin})
		}
		return out, true
	case e.Result != nil && e.Result.Evidence != nil && (e.Kind == "successRate" || e.Kind == "only" || e.Kind == "never"):
		margin := r.Statistics.Margin
		if !(margin > 0) {
			margin = assert.DefaultMargin
		}
		ev := e.Result.Evidence
		return []assert.JudgedShare{{Bucket: e.Kind, N: ev.N, EffectiveCount: e.Result.Observed * ev.EffectiveN,
			EffectiveN: ev.EffectiveN, Margin: margin}}, true
	}
	return nil, false
}

// validateCounts refuses a report whose counts no run can have: negative,
// or adding up past int64 (a crafted or corrupted report.json), naming the
// field.
func validateCounts(r *Report) error {
	if r.Metrics.Requests < 0 {
		return fmt.Errorf("metrics.requests: %d, want 0 or more", r.Metrics.Requests)
	}
	for i, dm := range r.Dimensions {
		at := fmt.Sprintf("dimensions[%d] (%s from %s)", i, clean(dm.Name, false), clean(dimSource(dm), false))
		for _, f := range []struct {
			name string
			v    int64
		}{{"attributed", dm.Attributed}, {"unattributed", dm.Unattributed}, {"errorsUnattributed", dm.ErrorsUnattributed}, {"units", dm.Units}} {
			if f.v < 0 {
				return fmt.Errorf("%s.%s: %d, want 0 or more", at, f.name, f.v)
			}
		}
		var sum int64
		for j, bk := range dm.Buckets {
			if bk.Count < 0 || bk.Errors < 0 {
				return fmt.Errorf("%s.buckets[%d] (%s): count %d, errors %d, want 0 or more", at, j, clean(bk.Name, false), bk.Count, bk.Errors)
			}
			if sum > math.MaxInt64-bk.Count {
				return fmt.Errorf("%s.buckets[%d] (%s).count: the counts add up past %d", at, j, clean(bk.Name, false), int64(math.MaxInt64))
			}
			sum += bk.Count
		}
	}
	for i, e := range r.Expectation {
		at := fmt.Sprintf("expectations[%d] (%s)", i, clean(e.Name, false))
		if sp := e.Split; sp != nil {
			if sp.N < 0 || !(sp.EffectiveN >= 0) {
				return fmt.Errorf("%s.split.n: %d requests worth %g draws, want 0 or more", at, sp.N, sp.EffectiveN)
			}
			var sum int64
			for j, bk := range sp.Buckets {
				if bk.Count < 0 || !(bk.EffectiveCount >= 0) {
					return fmt.Errorf("%s.split.buckets[%d] (%s).count: %d, want 0 or more", at, j, clean(bk.Bucket, false), bk.Count)
				}
				if sum > math.MaxInt64-bk.Count {
					return fmt.Errorf("%s.split.buckets[%d] (%s).count: the counts add up past %d", at, j, clean(bk.Bucket, false), int64(math.MaxInt64))
				}
				sum += bk.Count
			}
		}
		if res := e.Result; res != nil && res.Evidence != nil && (res.N < 0 || !(res.EffectiveN >= 0)) {
			return fmt.Errorf("%s.result.n: %d requests worth %g draws, want 0 or more", at, res.N, res.EffectiveN)
		}
	}
	return nil
}

func diffRun(r *Report) DiffRun {
	return DiffRun{RunID: r.RunID, Scenario: r.Scenario.Name, Target: r.Target, Requests: r.Metrics.Requests,
		Verdict: r.Verdict, Balancing: r.Statistics.Balancing, Tool: r.Tool.Version}
}

func dimSource(d Dimension) string {
	if d.Source == "" {
		return "body"
	}
	return d.Source
}

const noSumsNote = "each request is taken as an independent draw (binomial variance)"

// dimCounts turns a dimension back into the counts it was judged on: its
// buckets with a count, in order, which is the order of its per-connection
// sums. Sums that do not fit the buckets are left out (the comparison then
// takes each request as an independent draw), and the note says so.
func dimCounts(d Dimension) (assert.Counts, string, error) {
	var c assert.Counts
	for _, b := range d.Buckets {
		if b.Count > 0 {
			c.Buckets = append(c.Buckets, b.Name)
			c.N = append(c.N, b.Count)
		}
	}
	note := ""
	switch s := d.Sums; {
	case s == nil:
		note = noSumsNote
	case len(s.SumXX) != len(c.Buckets) || len(s.SumXM) != len(c.Buckets) || s.Units < 0 || s.SumMM < 0:
		note = fmt.Sprintf("the per-connection counts (%d buckets) do not fit the %d buckets counted and are ignored: each request is taken as an independent draw",
			len(s.SumXX), len(c.Buckets))
	default:
		u := *s
		c.Units = &u
	}
	return c, note, c.Validate()
}
