package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

func newPlanCmd() *cobra.Command {
	var (
		sf    splitFlags
		deff  float64
		looks int
	)
	cmd := &cobra.Command{
		Use:   "plan [SCENARIO] | plan (--expect equal --buckets c2,c3 | --weights c2=1,c3=3)",
		Short: "Print how many requests a split expectation needs",
		Long: `plan prints the number of requests at which a correct mesh passes the split
expectation with the given power, for the margin and confidence a run would
use. Requests that share keep-alive connections are worth less: pass the
design effect (about the requests per connection when a mesh balances per
connection). With --looks > 1 it also prints the interim looks of an
early-stopping run.`,
		Args:          cobra.MaximumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				return planScenario(cmd.OutOrStdout(), args[0], deff)
			}
			model, err := sf.expected(nil)
			if err != nil {
				return err
			}
			margin, err := sf.levels()
			if err != nil {
				return err
			}
			if !(deff >= 1) || math.IsInf(deff, 0) {
				return invalidInput("--design-effect %g: want 1 (independent requests) or more", deff)
			}
			if looks < 1 {
				return invalidInput("--looks %d: want 1 or more", looks)
			}
			out := cmd.OutOrStdout()
			conf := sf.confidence
			if looks > 1 {
				// The spending depends only on the looks and α, so any plan gives the last look's confidence.
				conf = assert.PlanSequential(int64(looks), looks, sf.confidence).Confidence[looks-1]
				fmt.Fprintf(out, "early stopping with %d looks: the last look judges at %s confidence, so the total is planned for it\n", looks, pctText(conf))
			}
			n := planSplit(out, "split", model.Shares, margin, sf.relative, conf, sf.power, deff)
			if looks > 1 {
				return planLooks(out, n, looks, sf.confidence)
			}
			return nil
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return invalidInput("%v", err) })
	sf.register(cmd)
	cmd.Flags().Float64Var(&deff, "design-effect", 1, "design effect of connection reuse (1 = independent requests)")
	cmd.Flags().IntVar(&looks, "looks", 1, "interim looks for early stopping (1 = judge once at the end)")
	return cmd
}

// planSplit prints the requests one split expectation needs and returns
// them (0 when the inputs are invalid).
func planSplit(w io.Writer, name string, expected map[string]float64, margin float64, relative bool, confidence, power, deff float64) int64 {
	n := assert.RequiredN(expected, margin, relative, confidence, power, deff)
	shares := make([]string, 0, len(expected))
	for _, b := range sortedNames(expected) {
		shares = append(shares, b+" "+pctText(expected[b]))
	}
	tol := "±" + strconv.FormatFloat(margin*100, 'g', 4, 64) + " points"
	if relative {
		tol = "±" + pctText(margin) + " of each share"
	}
	if n == 0 {
		fmt.Fprintf(w, "%s: cannot plan (expected %s; margin %s; confidence %g; power %g)\n", name, strings.Join(shares, ", "), tol, confidence, power)
		return 0
	}
	fmt.Fprintf(w, "%s: %d requests (expected %s; margin %s; %s confidence; %s power; design effect %g)\n",
		name, n, strings.Join(shares, ", "), tol, pctText(confidence), pctText(power), deff)
	return n
}

// planLooks prints the interim looks of an early-stopping run of total requests.
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

func sortedNames(m map[string]float64) []string { return slices.Sorted(maps.Keys(m)) }

// planScenario prints the requests every split expectation of a scenario
// needs, with the scenario's own margin, confidence and power, and compares
// them with what its attack will send.
func planScenario(w io.Writer, file string, deff float64) error {
	sc, err := scenarios.Load(file)
	if err != nil {
		return &codedError{code: exitInvalidInput, err: err}
	}
	if !(deff >= 1) || math.IsInf(deff, 0) {
		return invalidInput("--design-effect %g: want 1 (independent requests) or more", deff)
	}
	st := sc.Statistics
	conf := st.Confidence
	if st.Stop == "early" {
		conf = assert.PlanSequential(int64(st.Looks), st.Looks, conf).Confidence[st.Looks-1]
	}
	var need int64
	for _, e := range sc.Expect {
		if e.Split == nil {
			continue
		}
		model, err := runner.SplitModel(sc, e.Split)
		if err != nil && len(sc.Observe) > 0 && len(e.Split.Pods) == 0 && e.Split.Model != "weights" && e.Split.Model != "equal" ||
			err != nil && e.Split.By == "pod" && len(sc.Observe) > 0 {
			// Ready pods (their number, or their names by pod) come from
			// the inventory of the clusters at run time.
			fmt.Fprintf(w, "%s: not planned here: its expected shares need the cluster inventory (ready pods) of a run\n", e.Name)
			continue
		}
		if err != nil {
			return &codedError{code: exitInvalidInput, err: fmt.Errorf("%s: expectation %q: %w", file, e.Name, err)}
		}
		margin, relative := st.Margin.Fraction(), st.Relative
		if e.Split.Margin != nil {
			margin = e.Split.Margin.Fraction()
		}
		if e.Split.Relative != nil {
			relative = *e.Split.Relative
		}
		need = max(need, planSplit(w, e.Name, model.Shares, margin, relative, conf, st.Power, deff))
	}
	if need == 0 {
		fmt.Fprintln(w, "no split expectation to plan")
		return nil
	}
	if planned := runner.PlannedRequests(sc); planned > 0 {
		verdict := "enough"
		if planned < need {
			verdict = "NOT enough: expect INCONCLUSIVE"
		}
		fmt.Fprintf(w, "the attack sends %d requests: %s\n", planned, verdict)
	}
	if st.Stop == "early" {
		return planLooks(w, need, st.Looks, st.Confidence)
	}
	return nil
}
