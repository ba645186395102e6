package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// verdictError reports a non-passing verdict as an exit code only: the
// verdict was printed already, and execute prints no empty message.
func verdictError(v assert.Verdict) error {
	switch v {
	case assert.Pass:
		return nil
	case assert.Fail:
		return exitcode.Wrap(exitcode.Fail, nil)
	}
	return exitcode.Wrap(exitcode.Inconclusive, nil)
}

// splitFlags are the expectation flags check and plan share.
type splitFlags struct {
	expect     string
	weights    string
	buckets    string
	margin     string
	relative   bool
	confidence float64
	power      float64
}

func (f *splitFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.expect, "expect", "", `expected split model: "equal" (over --buckets, or the counted buckets)`)
	fs.StringVar(&f.weights, "weights", "", "expected split as weights, e.g. c2=1,c3=3")
	fs.StringVar(&f.buckets, "buckets", "", "buckets for --expect equal, e.g. c2,c3")
	fs.StringVar(&f.margin, "margin", "5%", `allowed deviation per bucket: "5%" or 0.05 (percentage points unless --relative)`)
	fs.BoolVar(&f.relative, "relative", false, "margin is relative to each expected share (10% of 30% = 3 points)")
	fs.Float64Var(&f.confidence, "confidence", assert.DefaultConfidence, "confidence level 1-α")
	fs.Float64Var(&f.power, "power", assert.DefaultPower, "probability of a PASS on a correct mesh that plans and advice aim for")
}

// expected resolves --expect/--weights into a model; counted are the
// buckets seen, used by --expect equal without --buckets.
func (f *splitFlags) expected(counted []string) (assert.Shares, error) {
	switch {
	case f.weights != "" && f.expect != "":
		return assert.Shares{}, exitcode.InvalidInputf("give either --expect or --weights, not both")
	case f.weights != "":
		w, err := parsePairs("--weights", f.weights, parseWeight)
		if err != nil {
			return assert.Shares{}, err
		}
		m := make(map[string]float64, len(w.names))
		for i, b := range w.names {
			m[b] = w.values[i]
		}
		s, err := assert.WeightsModel(m)
		if err != nil {
			return assert.Shares{}, exitcode.InvalidInputf("--%v", err)
		}
		return s, nil
	case f.expect == "equal":
		b := counted
		if f.buckets != "" {
			b = splitList(f.buckets)
		}
		if len(b) == 0 {
			return assert.Shares{}, exitcode.InvalidInputf("--expect equal needs the buckets: --buckets c2,c3")
		}
		s, err := assert.EqualModel(b)
		if err != nil {
			return assert.Shares{}, exitcode.InvalidInputf("--expect %v", err)
		}
		return s, nil
	case f.expect == "":
		return assert.Shares{}, exitcode.InvalidInputf("say what split to expect: --expect equal or --weights c2=1,c3=1")
	}
	return assert.Shares{}, exitcode.InvalidInputf("--expect %q: only \"equal\" is known; use --weights for anything else", f.expect)
}

func (f *splitFlags) levels() (margin float64, err error) {
	m, err := scenarios.ParsePercent(f.margin)
	if err != nil {
		return 0, exitcode.InvalidInputf("--margin: %v", err)
	}
	if m <= 0 || m >= 1 {
		return 0, exitcode.InvalidInputf("--margin %s: want more than 0 and less than 100%%", f.margin)
	}
	if !(f.confidence > 0 && f.confidence < 1) {
		return 0, exitcode.InvalidInputf("--confidence %g: want a level between 0 and 1, e.g. 0.95", f.confidence)
	}
	if !(f.power > 0 && f.power < 1) {
		return 0, exitcode.InvalidInputf("--power %g: want a probability between 0 and 1, e.g. 0.8", f.power)
	}
	return m.Fraction(), nil
}

// resolveSplit checks the expectation and sampling flags check and plan
// share: the model (over the counted buckets for --expect equal without
// --buckets), the margin and the sampling unit.
func resolveSplit(sf *splitFlags, smp *samplingFlags, counted []string) (assert.Shares, float64, assert.Sampling, error) {
	model, err := sf.expected(counted)
	if err != nil {
		return assert.Shares{}, 0, assert.Sampling{}, err
	}
	margin, err := sf.levels()
	if err != nil {
		return assert.Shares{}, 0, assert.Sampling{}, err
	}
	sampling, err := smp.sampling()
	if err != nil {
		return assert.Shares{}, 0, assert.Sampling{}, err
	}
	return model, margin, sampling, nil
}

// samplingFlags say what an independent draw is, for check and plan.
type samplingFlags struct {
	interval    string
	balancing   string
	connections int64
}

func (f *samplingFlags) register(cmd *cobra.Command, connections string) {
	fs := cmd.Flags()
	fs.StringVar(&f.interval, "interval", string(assert.ClopperPearson), "interval a FAIL is judged with: clopper-pearson or wilson (PASS always uses exact Clopper–Pearson bounds)")
	fs.StringVar(&f.balancing, "balancing", string(assert.PerRequest), "how the mesh picks a backend: request (each request a draw) or connection (each keep-alive connection a draw)")
	fs.Int64Var(&f.connections, "connections", 0, connections)
}

// sampling checks the flags and returns the sampling unit they describe.
func (f *samplingFlags) sampling() (assert.Sampling, error) {
	if f.interval != string(assert.Wilson) && f.interval != string(assert.ClopperPearson) {
		return assert.Sampling{}, exitcode.InvalidInputf("--interval %q: want %s or %s", f.interval, assert.Wilson, assert.ClopperPearson)
	}
	s := assert.Sampling{Balancing: assert.Balancing(f.balancing), Reason: "set by --balancing", FixedConnections: f.connections}
	if err := s.Validate(); err != nil {
		return s, exitcode.InvalidInputf("--%v", err)
	}
	if f.connections < 0 {
		return s, exitcode.InvalidInputf("--connections %d: want a number of connections >= 1", f.connections)
	}
	return s, nil
}

func newCheckCmd() *cobra.Command {
	var (
		sf      splitFlags
		smp     samplingFlags
		countsF string
		file    string
		asJSON  bool
		output  string
	)
	cmd := &cobra.Command{
		Use:   "check (--counts c2=480,c3=520 | --file counts.json|counts.csv) (--expect equal | --weights c2=1,c3=1)",
		Short: "Judge counts from any tally against an expected split",
		Long: `check evaluates counts from anywhere (siege logs, Prometheus, a spreadsheet)
with the same statistics as a run (docs/statistics.md): PASS when exact
one-sided tests show every bucket inside its margin, FAIL when a bucket's
interval at 1-α/k lies outside it. With --balancing connection and
--connections N the counts came over N keep-alive connections of about equal
size, each of which a per-connection balancer sent to one bucket: they are
worth N draws, not as many as the requests.

Exit codes: 0 PASS, 1 FAIL, 2 INCONCLUSIVE (more requests needed), 4 invalid input.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliout.ApplyJSONAlias(cmd, asJSON, &output); err != nil {
				return err
			}
			if err := cliout.Check(output, checkOutputs); err != nil {
				return err
			}
			var c assert.Counts
			var err error
			switch {
			case countsF != "" && file != "":
				return exitcode.InvalidInputf("give either --counts or --file, not both")
			case countsF != "":
				c, err = parseCountsFlag(countsF)
			case file != "":
				c, err = judge.ReadCounts(file)
			default:
				return exitcode.InvalidInputf("no counts: give --counts c2=480,c3=520 or --file counts.json")
			}
			if err != nil {
				return err
			}
			model, margin, sampling, err := resolveSplit(&sf, &smp, c.Buckets)
			if err != nil {
				return err
			}
			if smp.connections > 0 {
				// Connections of about equal size: n²/Σm² = C.
				n := float64(c.Total())
				c.Units = &assert.UnitStats{Units: smp.connections, SumMM: n * n / float64(smp.connections)}
			}
			spec := assert.SplitSpec{
				Expected: model.Shares, Margin: margin, Relative: sf.relative,
				Confidence: sf.confidence, Method: assert.IntervalMethod(smp.interval), Power: sf.power, Sampling: sampling,
			}
			if err := spec.Validate(); err != nil {
				return exitcode.InvalidInputf("%v", err)
			}
			res := assert.Split(c, spec)
			out := cmd.OutOrStdout()
			if output == outputJSON {
				if err := cliout.WriteJSON(out, checkOutput{res, model}); err != nil {
					return err
				}
			} else if err := printSplit(out, res, model); err != nil {
				return err
			}
			return verdictError(res.Verdict)
		},
	}
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return exitcode.InvalidInputf("%v", err) })
	sf.register(cmd)
	fs := cmd.Flags()
	fs.StringVar(&countsF, "counts", "", "counts per bucket, e.g. c2=480,c3=520")
	fs.StringVar(&file, "file", "", `counts file: JSON object {"c2":480,...} or CSV lines bucket,count (header optional)`)
	cliout.AddFlag(cmd, &output, outputTable, checkOutputs, "table, or json (one object: the split result and its model)")
	cliout.AddJSONAlias(cmd, &asJSON)
	smp.register(cmd, "keep-alive connections the counts came over, of about equal size (0: not known)")
	return cmd
}

// checkOutputs are what check's --output takes.
var checkOutputs = []string{outputTable, outputJSON}

// checkOutput is the -o json document: the split result with the model
// that produced its expected shares.
type checkOutput struct {
	assert.SplitResult
	Model assert.Shares `json:"model"`
}

func printSplit(w io.Writer, r assert.SplitResult, model assert.Shares) error {
	t := newTable(w)
	t.Header("bucket", "count", "observed", "expected", "pass interval", "fail interval", "allowed", "verdict")
	for _, b := range r.Buckets {
		if err := t.Append([]string{
			reports.Printable(b.Bucket), strconv.FormatInt(b.Count, 10), share(b.Observed), share(b.Expected),
			share(b.PassInterval.Lo) + " - " + share(b.PassInterval.Hi), share(b.FailInterval.Lo) + " - " + share(b.FailInterval.Hi),
			share(b.Allowed.Lo) + " - " + share(b.Allowed.Hi), b.Verdict.String(),
		}); err != nil {
			return err
		}
	}
	if err := t.Render(); err != nil {
		return err
	}
	// Bucket names come from the counts file: escaped for the terminal,
	// like every line below that quotes them.
	_, err := fmt.Fprintf(w, "%s\n%s\n%s\nmodel: %s\nverdict: %s: %s\n", reports.LevelsLine(&r), reports.Printable(reports.EvidenceLine(r.Evidence)), reports.ChiSquareLine(&r),
		reports.Printable(strings.Join(model.Explanation, "; ")), r.Verdict, reports.Printable(r.Reason))
	return err
}

// newTable draws plain ASCII so CI logs show it intact.
func newTable(w io.Writer) *tablewriter.Table {
	return tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleASCII)})))
}

func share(v float64) string { return strconv.FormatFloat(v*100, 'f', 2, 64) + "%" }

// pairs keeps the order the user wrote.
type pairs[V any] struct {
	names  []string
	values []V
}

// parsePairs reads name=value,name=value; errors name the flag and item.
func parsePairs[V any](flag, s string, parse func(string) (V, error)) (pairs[V], error) {
	var p pairs[V]
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		name, val, ok := strings.Cut(item, "=")
		name, val = strings.TrimSpace(name), strings.TrimSpace(val)
		if !ok || name == "" {
			return p, exitcode.InvalidInputf("%s: item %q: want name=value", flag, item)
		}
		v, err := parse(val)
		if err != nil {
			return p, exitcode.InvalidInputf("%s: item %q: %v", flag, item, err)
		}
		if slices.Contains(p.names, name) {
			return p, exitcode.InvalidInputf("%s: bucket %s given twice", flag, name)
		}
		p.names, p.values = append(p.names, name), append(p.values, v)
	}
	if len(p.names) == 0 {
		return p, exitcode.InvalidInputf("%s: no name=value items", flag)
	}
	return p, nil
}

func parseWeight(s string) (float64, error) {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) || v > scenarios.MaxWeight {
		return 0, fmt.Errorf("weight %q: want a number from 0 to %g", s, scenarios.MaxWeight)
	}
	return v, nil
}

func parseCountsFlag(s string) (assert.Counts, error) {
	p, err := parsePairs("--counts", s, judge.ParseCount)
	if err != nil {
		return assert.Counts{}, err
	}
	return assert.Counts{Buckets: p.names, N: p.values}, nil
}

func splitList(s string) []string {
	var out []string
	for _, b := range strings.Split(s, ",") {
		if b = strings.TrimSpace(b); b != "" {
			out = append(out, b)
		}
	}
	return out
}
