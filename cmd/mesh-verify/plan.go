package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

func newPlanCmd() *cobra.Command {
	var (
		sf    splitFlags
		smp   samplingFlags
		looks int
		set   []string
		kf    kubeFlags
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
				return planScenario(cmd, args[0], set, &kf)
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
				return exitcode.InvalidInputf("--looks %d: want 1 or more", looks)
			}
			out := cmd.OutOrStdout()
			conf := judge.LastLevel(looks, sf.confidence)
			if looks > 1 {
				fmt.Fprintf(out, "early stopping with %d looks: the last look judges at %s confidence, so the total is planned for it\n", looks, judge.PctText(conf))
			}
			spec := assert.SplitSpec{Expected: model.Shares, Margin: margin, Relative: sf.relative, Confidence: conf,
				Method: assert.IntervalMethod(smp.interval), Power: sf.power, Sampling: sampling}
			p := judge.PrintSplitPlan(out, "split", spec)
			if p.Connections > 0 && sampling.FixedConnections > 0 {
				fmt.Fprintln(out, connectionsVerdict(smp.connections, p))
			}
			if looks > 1 && p.Requests > 0 {
				return planLooks(out, p.Requests, looks, sf.confidence)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.InvalidInputf("%v", err) })
	sf.register(cmd)
	smp.register(cmd, "the keep-alive connections the attack will hold (0: a connection per request): per-request balancing adds the design effect's allowance for them, per-connection balancing compares them with the plan")
	cmd.Flags().IntVar(&looks, "looks", 1, "interim looks for early stopping (1 = judge once at the end)")
	addSetFlag(cmd, &set)
	addKubeFlags(cmd.Flags(), &kf, scenarioContextHelp, scenarioNamespaceHelp)
	return cmd
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

// planScenario plans every expectation of a scenario with what it says and
// compares the needs with what its attack sends and the connections it
// holds.
//
// With --kubeconfig, a split's expected shares from the mesh
// (split.fromMesh) are read now, as a run reads them when it starts, and
// planned; without, plan touches no cluster and says they are read then.
func planScenario(cmd *cobra.Command, file string, set []string, kf *kubeFlags) error {
	w := cmd.OutOrStdout()
	sc, _, err := loadScenario(file, set)
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	mesh, err := readMeshFlags(cmd, sc, kf, w)
	if err != nil {
		return err
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
	j := runner.NewJudge(sc).WithMesh(mesh)
	for _, e := range j.Expectations() {
		p, err := j.PlanExpectation(w, e, looks)
		if err != nil {
			return &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("%s: expectation %q: %w", file, e.Name(), err)}
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

// readMeshFlags reads the expected splits from the mesh (split.fromMesh)
// when --kubeconfig is given: nil without it, or when no split reads the
// mesh. A cluster that cannot be reached, or a read denied, is a setup
// error naming the cluster and the call.
func readMeshFlags(cmd *cobra.Command, sc *scenarios.Scenario, kf *kubeFlags, w io.Writer) (judge.Mesh, error) {
	if !cmd.Flags().Changed("kubeconfig") {
		return nil, nil
	}
	ko, err := kf.forScenario(sc)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), meshReadTimeout)
	defer cancel()
	mesh, err := runner.ReadMesh(ctx, sc, runner.Options{Kube: ko}, w)
	if err != nil {
		return nil, &exitcode.Error{Code: exitcode.Setup, Err: err}
	}
	return mesh, nil
}

// meshReadTimeout bounds connecting to the clusters and reading the mesh's
// objects for plan and validate.
const meshReadTimeout = time.Minute
