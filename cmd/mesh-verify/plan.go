package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

func newPlanCmd() *cobra.Command {
	var (
		sf     splitFlags
		smp    samplingFlags
		looks  int
		set    []string
		kf     kubeFlags
		output string
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
result with what its attack sends and the connections it opens.

-o json prints one object: each expectation's plan (draws, requests,
connections, allowance), what the attack sends and holds and whether it is
enough, the interim looks, and the lines the table output prints as notes.`,
		Args:          cobra.MaximumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cliout.Check(output, []string{outputTable, outputJSON}); err != nil {
				return err
			}
			doc := &planDoc{Expectations: []plannedExpectation{}, tables: output == outputTable}
			out := cmd.OutOrStdout()
			var notes bytes.Buffer
			if output == outputJSON {
				out = &notes // the lines become the document's notes
			}
			var err error
			if len(args) == 1 {
				err = planScenario(cmd, out, doc, args[0], set, &kf)
			} else {
				err = planFlags(out, doc, sf, smp, looks)
			}
			if err != nil || output != outputJSON {
				return err
			}
			doc.Notes = strings.Split(strings.TrimRight(notes.String(), "\n"), "\n")
			return cliout.WriteJSON(cmd.OutOrStdout(), doc)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.InvalidInputf("%v", err) })
	sf.register(cmd)
	smp.register(cmd, "the keep-alive connections the attack will hold (0: a connection per request): per-request balancing adds the design effect's allowance for them, per-connection balancing compares them with the plan")
	cmd.Flags().IntVar(&looks, "looks", 1, "interim looks for early stopping (1 = judge once at the end)")
	addSetFlag(cmd, &set)
	addKubeFlags(cmd.Flags(), &kf, scenarioContextHelp, scenarioNamespaceHelp)
	cliout.AddFlag(cmd, &output, outputTable, []string{outputTable, outputJSON}, "table, or json (one object: every expectation's plan and whether the attack is enough)")
	return cmd
}

// planDoc is plan's -o json document.
type planDoc struct {
	// Scenario is the scenario's metadata.name (plan SCENARIO).
	Scenario string `json:"scenario,omitempty"`
	// Looks is the interim looks planned for (1: judged once at the end).
	Looks        int                  `json:"looks"`
	Expectations []plannedExpectation `json:"expectations"`
	// Attack is what the attack sends and holds against the largest need.
	Attack *plannedAttack `json:"attack,omitempty"`
	// Sequential is the interim looks' requests and levels (looks > 1).
	Sequential *assert.SequentialPlan `json:"sequential,omitempty"`
	// Notes are the lines the table output prints, in order, its tables
	// left out (Sequential holds the looks').
	Notes []string `json:"notes"`
	// tables is false for -o json: no ASCII table among the notes.
	tables bool
}

type plannedExpectation struct {
	Name string      `json:"name"`
	Plan assert.Plan `json:"plan"`
}

type plannedAttack struct {
	// Requests is what the attack sends (0: not known, a duration at an
	// open rate is).
	Requests int64 `json:"requests,omitempty"`
	// Connections is the keep-alive connections it holds (0: one per request).
	Connections     int64 `json:"connections,omitempty"`
	NeedRequests    int64 `json:"needRequests,omitempty"`
	NeedConnections int64 `json:"needConnections,omitempty"`
	// Enough is true when it sends and holds at least what is needed;
	// absent when the requests it sends are not known beforehand.
	Enough *bool `json:"enough,omitempty"`
}

// planFlags plans the split the flags describe.
func planFlags(out io.Writer, doc *planDoc, sf splitFlags, smp samplingFlags, looks int) error {
	model, margin, sampling, err := resolveSplit(&sf, &smp, nil)
	if err != nil {
		return err
	}
	if looks < 1 {
		return exitcode.InvalidInputf("--looks %d: want 1 or more", looks)
	}
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
	doc.Looks = looks
	doc.Expectations = append(doc.Expectations, plannedExpectation{Name: "split", Plan: p})
	if sampling.FixedConnections > 0 {
		enough := smp.connections >= p.Connections
		doc.Attack = &plannedAttack{Connections: smp.connections, NeedConnections: p.Connections, Enough: &enough}
	}
	if looks > 1 && p.Requests > 0 {
		return planLooks(out, doc, p.Requests, looks, sf.confidence)
	}
	return nil
}

func connectionsVerdict(have int64, p assert.Plan) string {
	need := p.Connections
	if have >= need {
		return fmt.Sprintf("the attack holds %d keep-alive connections: enough", have)
	}
	return fmt.Sprintf("the attack holds %d keep-alive connections: NOT enough: needs %d connections (or keepAlive: false with %d requests); more requests on the same connections would not help", have, need, p.Draws)
}

func planLooks(w io.Writer, doc *planDoc, total int64, looks int, confidence float64) error {
	p := assert.PlanSequential(total, looks, confidence)
	doc.Sequential = &p
	if !doc.tables {
		return nil
	}
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
func planScenario(cmd *cobra.Command, w io.Writer, doc *planDoc, file string, set []string, kf *kubeFlags) error {
	sc, _, err := loadScenario(file, set)
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	mesh, err := readMeshFlags(cmd, sc, kf, w)
	if err != nil {
		return err
	}
	doc.Scenario = sc.Metadata.Name
	st := sc.Statistics
	looks := 1
	if st.Stop == "early" {
		looks = st.Looks
		fmt.Fprintf(w, "early stopping with %d looks: each expectation is planned for its last look's level\n", looks)
	}
	doc.Looks = looks
	fmt.Fprintf(w, "FAIL is judged with %s intervals (statistics.interval); PASS always with exact Clopper–Pearson bounds, so the plan does not depend on it\n", st.Interval)
	var needRequests int64
	var needConnections assert.Plan
	j := runner.NewJudge(sc).WithMesh(mesh)
	for _, e := range j.Expectations() {
		p, err := j.PlanExpectation(w, e, looks)
		if err != nil {
			return &exitcode.Error{Code: exitcode.InvalidInput, Err: fmt.Errorf("%s: expectation %q: %w", file, e.Name(), err)}
		}
		doc.Expectations = append(doc.Expectations, plannedExpectation{Name: e.Name(), Plan: p})
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
	holds := runner.AttackConnections(sc)
	doc.Attack = &plannedAttack{Requests: planned, Connections: holds, NeedRequests: needRequests, NeedConnections: needConnections.Connections}
	if needRequests == 0 || planned > 0 {
		enough := (needRequests == 0 || planned >= needRequests) && holds >= needConnections.Connections
		doc.Attack.Enough = &enough
	}
	if needRequests > 0 && planned > 0 {
		verdict := "enough"
		if planned < needRequests {
			verdict = fmt.Sprintf("NOT enough: needs %d; expect INCONCLUSIVE", needRequests)
		}
		fmt.Fprintf(w, "the attack sends %d requests: %s\n", planned, verdict)
	}
	if needConnections.Connections > 0 {
		fmt.Fprintln(w, connectionsVerdict(holds, needConnections))
	}
	if st.Stop == "early" && planned > 0 {
		return planLooks(w, doc, planned, looks, st.Confidence)
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
