package judge

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// unit names what one draw is under a sampling unit: a connection under
// per-connection balancing, which without keep-alive is every request.
// planText says what a plan asks the attack for, and why, after its
// draws (docs/statistics.md §5).
func planText(p assert.Plan, s assert.Sampling) string {
	switch {
	case p.Connections > 0 && p.Requests == 0:
		return fmt.Sprintf("%d connections", p.Connections)
	case p.Connections > 0:
		return fmt.Sprintf("%d requests over at least %d keep-alive connections (%d independent draws; with fewer connections the data cannot show that requests on one are routed independently)",
			p.Requests, p.Connections, p.Draws)
	case p.Allowance > 1:
		return fmt.Sprintf("%d requests (%d independent draws, times %.3g for the design effect estimated over %d keep-alive connections)",
			p.Requests, p.Draws, p.Allowance, s.FixedConnections)
	case s.Balancing == assert.PerConnection:
		return fmt.Sprintf("%d requests (each on a connection of its own)", p.Requests)
	}
	return fmt.Sprintf("%d requests", p.Requests)
}

// PrintSplitPlan prints the draws a split (or mirror) spec needs, with
// what it assumes, and returns the plan.
func PrintSplitPlan(w io.Writer, name string, s assert.SplitSpec) assert.Plan {
	p := assert.PlanSplit(s)
	shares := make([]string, 0, len(s.Expected))
	for _, b := range slices.Sorted(maps.Keys(s.Expected)) {
		shares = append(shares, b+" "+PctText(s.Expected[b]))
	}
	margin := s.Margin
	if margin == 0 {
		margin = assert.DefaultMargin
	}
	tol := "±" + strconv.FormatFloat(margin*100, 'g', 4, 64) + " points"
	if s.Relative {
		tol = "±" + PctText(margin) + " of each share"
	}
	if p.Draws == 0 {
		fmt.Fprintf(w, "%s: cannot plan (expected %s; margin %s; confidence %g; power %g)\n", name, strings.Join(shares, ", "), tol, s.Confidence, s.Power)
		return assert.Plan{}
	}
	exact := "exact"
	if len(s.Expected) > 2 {
		exact = "at least"
	}
	fmt.Fprintf(w, "%s: %s (expected %s; margin %s; %s confidence; PASS with probability %s %.3f at %d draws; %s)\n",
		name, planText(p, s.Sampling), strings.Join(shares, ", "), tol, PctText(orDefault(s.Confidence, assert.DefaultConfidence)),
		exact, assert.SplitPassProbability(s, s.Expected, p.Draws), p.Draws, drawText(s.Sampling))
	return p
}

func orDefault(v, def float64) float64 {
	if v == 0 {
		return def
	}
	return v
}

// drawText says what a draw is, for the plan's lines.
func drawText(s assert.Sampling) string {
	if s.Balancing == assert.PerConnection {
		return "per-connection balancing declared: every request on a connection goes where the connection went, so the draws are connections"
	}
	return "per-request balancing: the design effect is estimated from the counts, connections as clusters"
}

// PctText prints a share as a percentage.
func PctText(v float64) string { return strconv.FormatFloat(v*100, 'g', 6, 64) + "%" }

// planner prints one expectation's plan.
type planner struct {
	w        io.Writer
	j        *Judge
	sampling assert.Sampling
	conf     float64
}

// share plans a kind judged on one share: one design effect (a success
// rate's, the routing's, is the largest of the source's dimensions').
func (p *planner) share(tests int, draws func(power float64) int64) assert.Plan {
	return assert.PlanDraws(p.sampling, p.j.sc.Statistics.Power, tests, draws)
}

// PlanExpectation prints the draws one expectation needs at the
// confidence its last look judges at (0 when it is not planned: latency,
// or shares that need a run's inventory).
func (j *Judge) PlanExpectation(w io.Writer, e Expectation, looks int) (assert.Plan, error) {
	conf := LastLevel(looks, j.Confidence(e))
	return e.kind.plan(&planner{w: w, j: j, sampling: j.Sampling(e), conf: conf}, e)
}

func (k splitKind) plan(p *planner, e Expectation) (assert.Plan, error) {
	if k.sp.FromMesh != nil {
		ref, _, _ := k.sp.FromMesh.Ref()
		ms, read := p.j.mesh[k.sp.FromMesh]
		switch {
		case !read:
			fmt.Fprintf(p.w, "%s: not planned here: its expected shares are read from %s when the run starts (give --kubeconfig to read them now)\n", e.Name(), ref)
			return assert.Plan{}, nil
		case ms.Err != nil:
			fmt.Fprintf(p.w, "%s: not planned: the expected shares from %s: %v\n", e.Name(), ref.Object(), ms.Err)
			return assert.Plan{}, nil
		}
		// Read now: the plan is for the object as it is, which the run
		// reads again when it starts.
		for _, l := range ms.Expected.Provenance() {
			fmt.Fprintf(p.w, "%s: %s\n", e.Name(), l)
		}
	}
	model, err := p.j.model(k.sp, nil)
	if err != nil && needsInventory(p.j.sc, k.sp) {
		fmt.Fprintf(p.w, "%s: not planned here: its expected shares need the cluster inventory (ready pods) of a run\n", e.Name())
		return assert.Plan{}, nil
	}
	if err != nil {
		return assert.Plan{}, err
	}
	if k.sp.Windows != nil {
		// PASS is judged per window at the split's own α (an
		// intersection–union test over windows), so each window needs
		// what one block needs; the whole run PASSes only if every window
		// does, with about the power to the k-th (docs/statistics.md §10).
		fmt.Fprintf(p.w, "%s: judged in windows (split.windows): every window needs the requests below; the run PASSes when all k windows do (power about power^k)\n", e.Name())
	}
	return PrintSplitPlan(p.w, e.Name(), p.j.splitSpec(e, model.Shares, p.conf)), nil
}

func (k mirrorKind) plan(p *planner, e Expectation) (assert.Plan, error) {
	pct := 100 * k.m.Percent.Fraction()
	if k.m.FromMesh != nil {
		var lines []string
		var err error
		if pct, lines, err = p.j.meshMirror(k.m); err != nil {
			fmt.Fprintf(p.w, "%s: not planned here: %v\n", e.Name(), err)
			return assert.Plan{}, nil
		}
		for _, l := range lines {
			fmt.Fprintf(p.w, "%s: %s\n", e.Name(), l)
		}
	}
	model, err := assert.MirrorModel(pct)
	if err != nil {
		return assert.Plan{}, err
	}
	return PrintSplitPlan(p.w, e.Name(), p.j.splitSpec(e, model.Shares, p.conf)), nil
}

func (k successRateKind) plan(p *planner, e Expectation) (assert.Plan, error) {
	st := p.j.sc.Statistics
	pl := p.share(len(attribution.Fields()), func(float64) int64 {
		return assert.CleanDraws(1-k.sr.AtLeast.Fraction(), p.conf, st.Margin.Fraction())
	})
	fmt.Fprintf(p.w, "%s: %s: a run without a failure passes from there (%s confidence; %s)\n", e.Name(), planText(pl, p.sampling), PctText(p.conf), drawText(p.sampling))
	return pl, nil
}

func (k bucketKind) plan(p *planner, e Expectation) (assert.Plan, error) {
	st := p.j.sc.Statistics
	pl := p.share(1, func(float64) int64 { return assert.CleanDraws(Margin(k.set.Margin), p.conf, st.Margin.Fraction()) })
	fmt.Fprintf(p.w, "%s: %s: a clean run passes from there (%s confidence; %s)\n", e.Name(), planText(pl, p.sampling), PctText(p.conf), drawText(p.sampling))
	return pl, nil
}

func (k reachedKind) plan(p *planner, e Expectation) (assert.Plan, error) {
	shares, from := p.j.reachedShares(e, k.set)
	pl := p.share(1, func(power float64) int64 { return assert.ReachedDraws(shares, power) })
	fmt.Fprintf(p.w, "%s: %s: every bucket is seen with probability %s or more (%s; %s)\n", e.Name(), planText(pl, p.sampling), PctText(p.j.sc.Statistics.Power), from, drawText(p.sampling))
	return pl, nil
}

// latency is not planned: a percentile estimate claims no confidence.
func (latencyKind) plan(*planner, Expectation) (assert.Plan, error) { return assert.Plan{}, nil }

// needsInventory reports whether a split's expected shares come from the
// pods a run inventories, which plan cannot see.
func needsInventory(sc *scenarios.Scenario, sp *scenarios.Split) bool {
	return len(sc.Observe) > 0 && (sp.By == "pod" || len(sp.Pods) == 0 && sp.Model != "weights" && sp.Model != "equal")
}

// reachedShares are the shares reached's plan assumes for its buckets: the
// minimum share it is set to, else a split's expected shares for them
// (from the scenario alone: a plan has no inventory), else half an equal
// share each (docs/statistics.md §4).
func (j *Judge) reachedShares(e Expectation, rc *scenarios.BucketSet) ([]float64, string) {
	k := len(rc.Buckets)
	if rc.MinShare != nil {
		return slices.Repeat([]float64{rc.MinShare.Fraction()}, k), "each at reached.minShare " + rc.MinShare.String()
	}
	if shares, name, ok := j.sameSplit(e, rc, nil); ok {
		return shares, fmt.Sprintf("with the expected shares of %q", name)
	}
	return slices.Repeat([]float64{1 / (2 * float64(k))}, k), fmt.Sprintf("each at half an equal share, %s", PctText(1/(2*float64(k))))
}

// LastLevel is the confidence the last of looks judges at: the confidence
// itself for one look, else what the spending leaves for the last look.
func LastLevel(looks int, confidence float64) float64 {
	if looks <= 1 {
		return confidence
	}
	l := assert.SpendingLevels(looks, confidence)
	return l[len(l)-1]
}
