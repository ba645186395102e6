package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

func newPlanCmd() *cobra.Command {
	var (
		sf    splitFlags
		smp   samplingFlags
		looks int
		set   []string
	)
	cmd := &cobra.Command{
		Use:   "plan [SCENARIO] | plan (--expect equal --buckets c2,c3 | --weights c2=1,c3=3)",
		Short: "Print how many requests (or connections) an expectation needs",
		Long: `plan prints the number of independent draws at which a correct mesh passes
with the given power, from the exact power of the decision rule a run applies
(docs/statistics.md §5). Under per-request balancing a draw is a request;
under per-connection balancing (--balancing connection) it is a connection,
and --connections N says whether the N keep-alive connections an attack
holds are enough. With --looks > 1 the total is planned for the last look's
level and the interim looks are printed.

plan SCENARIO plans every expectation of the scenario with everything it
says (margins, confidence, interval, balancing, looks) and compares the
result with what its attack sends and the connections it opens.`,
		Args:          cobra.MaximumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return planScenario(cmd.OutOrStdout(), args[0], set)
			}
			model, err := sf.expected(nil)
			if err != nil {
				return err
			}
			margin, err := sf.levels()
			if err != nil {
				return err
			}
			sampling, err := smp.sampling()
			if err != nil {
				return err
			}
			if looks < 1 {
				return invalidInput("--looks %d: want 1 or more", looks)
			}
			out := cmd.OutOrStdout()
			conf := lastLevel(looks, sf.confidence)
			if looks > 1 {
				fmt.Fprintf(out, "early stopping with %d looks: the last look judges at %s confidence, so the total is planned for it\n", looks, pctText(conf))
			}
			spec := assert.SplitSpec{Expected: model.Shares, Margin: margin, Relative: sf.relative, Confidence: conf,
				Method: assert.IntervalMethod(smp.interval), Power: sf.power, Sampling: sampling}
			p := planSplit(out, "split", spec)
			if p.Connections > 0 && sampling.FixedConnections > 0 {
				fmt.Fprintln(out, connectionsVerdict(smp.connections, p))
			}
			if looks > 1 && p.Requests > 0 {
				return planLooks(out, p.Requests, looks, sf.confidence)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return invalidInput("%v", err) })
	sf.register(cmd)
	smp.register(cmd, "the keep-alive connections the attack will hold (0: a connection per request): per-request balancing adds the design effect's allowance for them, per-connection balancing compares them with the plan")
	cmd.Flags().IntVar(&looks, "looks", 1, "interim looks for early stopping (1 = judge once at the end)")
	addSetFlag(cmd, &set)
	return cmd
}

// lastLevel is the confidence the last of looks judges at: the confidence
// itself for one look, else what the spending leaves for the last look.
func lastLevel(looks int, confidence float64) float64 {
	if looks <= 1 {
		return confidence
	}
	l := assert.SpendingLevels(looks, confidence)
	return l[len(l)-1]
}

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

func planSplit(w io.Writer, name string, s assert.SplitSpec) assert.Plan {
	p := assert.PlanSplit(s)
	shares := make([]string, 0, len(s.Expected))
	for _, b := range slices.Sorted(maps.Keys(s.Expected)) {
		shares = append(shares, b+" "+pctText(s.Expected[b]))
	}
	margin := s.Margin
	if margin == 0 {
		margin = assert.DefaultMargin
	}
	tol := "±" + strconv.FormatFloat(margin*100, 'g', 4, 64) + " points"
	if s.Relative {
		tol = "±" + pctText(margin) + " of each share"
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
		name, planText(p, s.Sampling), strings.Join(shares, ", "), tol, pctText(orDefault(s.Confidence, assert.DefaultConfidence)),
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

func connectionsVerdict(have int64, p assert.Plan) string {
	need := p.Connections
	if have >= need {
		return fmt.Sprintf("the attack holds %d keep-alive connections: enough", have)
	}
	return fmt.Sprintf("the attack holds %d keep-alive connections: NOT enough: needs %d connections (or keepAlive: false with %d requests); more requests on the same connections would not help", have, need, p.Draws)
}

func planLooks(w io.Writer, total int64, looks int, confidence float64) error {
	p := assert.PlanSequential(total, looks, confidence)
	fmt.Fprintf(w, "looks (%s):\n", p.Rule)
	t := newTable(w)
	t.Header("look", "requests", "confidence")
	for i, n := range p.Looks {
		if err := t.Append([]string{strconv.Itoa(i + 1), strconv.FormatInt(n, 10), strconv.FormatFloat(p.Confidence[i], 'f', 6, 64)}); err != nil {
			return err
		}
	}
	return t.Render()
}

func pctText(v float64) string { return strconv.FormatFloat(v*100, 'g', 6, 64) + "%" }

// planScenario plans every expectation of a scenario with what it says and
// compares the needs with what its attack sends and the connections it
// holds.
func planScenario(w io.Writer, file string, set []string) error {
	sc, _, err := loadScenario(file, set)
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	st := sc.Statistics
	looks := 1
	if st.Stop == "early" {
		looks = st.Looks
		fmt.Fprintf(w, "early stopping with %d looks: each expectation is planned for its last look's level\n", looks)
	}
	fmt.Fprintf(w, "FAIL is judged with %s intervals (statistics.interval); PASS always with exact Clopper–Pearson bounds, so the plan does not depend on it\n", st.Interval)
	var needRequests int64
	var needConnections assert.Plan
	for _, e := range sc.Expect {
		sampling := runner.Sampling(sc, e)
		conf := lastLevel(looks, runner.Confidence(sc, e))
		p, err := planExpectation(w, sc, e, sampling, conf)
		if err != nil {
			return &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("%s: expectation %q: %w", file, e.Name, err)}
		}
		needRequests = max(needRequests, p.Requests)
		if p.Connections > needConnections.Connections {
			needConnections = p
		}
	}
	if needRequests == 0 && needConnections.Connections == 0 {
		fmt.Fprintln(w, "no expectation to plan")
		return nil
	}
	planned := runner.PlannedRequests(sc)
	if needRequests > 0 && planned > 0 {
		verdict := "enough"
		if planned < needRequests {
			verdict = fmt.Sprintf("NOT enough: needs %d; expect INCONCLUSIVE", needRequests)
		}
		fmt.Fprintf(w, "the attack sends %d requests: %s\n", planned, verdict)
	}
	if needConnections.Connections > 0 {
		fmt.Fprintln(w, connectionsVerdict(runner.AttackConnections(sc), needConnections))
	}
	if st.Stop == "early" && planned > 0 {
		return planLooks(w, planned, looks, st.Confidence)
	}
	return nil
}

// planExpectation prints the draws one expectation needs (0 when it is
// not planned: latency, or shares that need a run's inventory).
func planExpectation(w io.Writer, sc *scenarios.Scenario, e scenarios.Expectation, sampling assert.Sampling, conf float64) (assert.Plan, error) {
	st := sc.Statistics
	// The kinds judged on one share take one design effect (a success
	// rate's, the routing's, is the largest of the source's dimensions').
	share := func(tests int, draws func(power float64) int64) assert.Plan {
		return assert.PlanDraws(sampling, st.Power, tests, draws)
	}
	switch {
	case e.Split != nil && e.Split.FromMesh != nil:
		ref, _, _ := e.Split.FromMesh.Ref()
		fmt.Fprintf(w, "%s: not planned here: its expected shares are read from %s when the run starts\n", e.Name, ref)
		return assert.Plan{}, nil
	case e.Split != nil:
		model, err := runner.SplitModel(sc, e.Split)
		if err != nil && needsInventory(sc, e.Split) {
			fmt.Fprintf(w, "%s: not planned here: its expected shares need the cluster inventory (ready pods) of a run\n", e.Name)
			return assert.Plan{}, nil
		}
		if err != nil {
			return assert.Plan{}, err
		}
		return planSplit(w, e.Name, runner.SplitSpec(sc, e, model.Shares, conf)), nil
	case e.Mirror != nil:
		model, err := assert.MirrorModel(100 * e.Mirror.Percent.Fraction())
		if err != nil {
			return assert.Plan{}, err
		}
		return planSplit(w, e.Name, runner.SplitSpec(sc, e, model.Shares, conf)), nil
	case e.SuccessRate != nil:
		p := share(len(attribution.Fields()), func(float64) int64 {
			return assert.CleanDraws(1-e.SuccessRate.AtLeast.Fraction(), conf, st.Margin.Fraction())
		})
		fmt.Fprintf(w, "%s: %s: a run without a failure passes from there (%s confidence; %s)\n", e.Name, planText(p, sampling), pctText(conf), drawText(sampling))
		return p, nil
	case e.Only != nil || e.Never != nil:
		b := e.Only
		if b == nil {
			b = e.Never
		}
		p := share(1, func(float64) int64 { return assert.CleanDraws(margin(b.Margin), conf, st.Margin.Fraction()) })
		fmt.Fprintf(w, "%s: %s: a clean run passes from there (%s confidence; %s)\n", e.Name, planText(p, sampling), pctText(conf), drawText(sampling))
		return p, nil
	case e.Reached != nil:
		shares, from := reachedShares(sc, e)
		p := share(1, func(power float64) int64 { return assert.ReachedDraws(shares, power) })
		fmt.Fprintf(w, "%s: %s: every bucket is seen with probability %s or more (%s; %s)\n", e.Name, planText(p, sampling), pctText(st.Power), from, drawText(sampling))
		return p, nil
	}
	return assert.Plan{}, nil
}

// needsInventory reports whether a split's expected shares come from the
// pods a run inventories, which plan cannot see.
func needsInventory(sc *scenarios.Scenario, sp *scenarios.Split) bool {
	return len(sc.Observe) > 0 && (sp.By == "pod" || len(sp.Pods) == 0 && sp.Model != "weights" && sp.Model != "equal")
}

// reachedShares are the shares reached's plan assumes for its buckets: the
// minimum share it is set to, else a split's expected shares for them,
// else half an equal share each (docs/statistics.md §4).
func reachedShares(sc *scenarios.Scenario, e scenarios.Expectation) ([]float64, string) {
	rc := e.Reached
	k := len(rc.Buckets)
	if rc.MinShare != nil {
		return slices.Repeat([]float64{rc.MinShare.Fraction()}, k), "each at reached.minShare " + rc.MinShare.String()
	}
	for _, other := range sc.Expect {
		sp := other.Split
		if sp == nil || sp.By != rc.By || sp.Source != rc.Source {
			continue
		}
		model, err := runner.SplitModel(sc, sp)
		if err != nil {
			continue
		}
		shares := make([]float64, k)
		ok := true
		for i, b := range rc.Buckets {
			shares[i] = model.Shares[b]
			ok = ok && shares[i] > 0
		}
		if ok {
			return shares, fmt.Sprintf("with the expected shares of %q", other.Name)
		}
	}
	return slices.Repeat([]float64{1 / (2 * float64(k))}, k), fmt.Sprintf("each at half an equal share, %s", pctText(1/(2*float64(k))))
}

func margin(p *scenarios.Percent) float64 {
	if p == nil {
		return 0
	}
	return p.Fraction()
}
