package reports

import (
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"strings"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/mesh-verify/mesh-verify/assert"
)

// DiffJSON writes the comparison as indented JSON.
func DiffJSON(w io.Writer, d DiffReport) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(d)
}

// DiffTerminal writes the comparison as tables for a terminal. Everything
// that came from a response, a log, a cluster or a scenario is escaped as
// in Terminal.
func DiffTerminal(w io.Writer, d DiffReport) error {
	p := &printer{w: w}
	table := func() *tablewriter.Table {
		// Headers as written: auto-formatting would space out "95% CI".
		return tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})),
			tablewriter.WithHeaderAutoFormat(tw.Off))
	}
	p.f("mesh-verify report diff: %s\n\n", diffOutcome(d))
	for _, r := range []struct {
		name string
		run  DiffRun
	}{{"A", d.A}, {"B", d.B}} {
		p.f("%s: run %s · scenario %s · %d requests · verdict %s\n", r.name, p.esc(r.run.RunID), p.esc(r.run.Scenario), r.run.Requests, r.run.Verdict)
	}
	for _, n := range d.Notes {
		p.f("NOTE: %s\n", p.esc(n))
	}
	for _, dd := range d.Dimensions {
		p.f("\n%s, from %s\n", p.esc(dd.Name), p.esc(dd.Source))
		p.f("A: %s\nB: %s\n", dd.A.Describe(), dd.B.Describe())
		t := table()
		t.Header(p.esc(dd.Name), "A requests", "A share", "B requests", "B share", "change", Level(dd.Level)+" CI", "p (Holm)", "result")
		for _, s := range dd.Buckets {
			p.err(t.Append(p.esc(diffBucket(dd, s.Bucket)), fmt.Sprint(s.CountA), pct(s.ShareA), fmt.Sprint(s.CountB), pct(s.ShareB),
				diffPP(s.Diff), diffCI(s), diffP(s), diffLabel(s.Status)))
		}
		p.err(t.Render())
		p.f("%s\n", diffMethodLine(dd.Comparison))
	}
	for _, s := range d.NotCompared {
		p.f("\nnot compared: %s from %s: %s\n", p.esc(s.Name), p.esc(s.Source), p.esc(s.Reason))
	}
	if len(d.Expectations) > 0 {
		p.f("\nexpectations\n")
		t := table()
		t.Header("expectation", "A", "B", "comparison")
		for _, e := range d.Expectations {
			p.err(t.Append(p.esc(diffExpName(e)), diffVerdict(e.A), diffVerdict(e.B), diffComparison(e)))
		}
		p.err(t.Render())
	}
	p.f("\nRESULT: %s\n", diffOutcome(d))
	return p.error
}

// DiffHTML writes the comparison as one self-contained, printable HTML
// page: inline CSS, no script, no external resource; every change is
// labelled in words and a shape, never by colour alone.
func DiffHTML(w io.Writer, d DiffReport) error {
	return diffPage.Execute(w, d)
}

// diffOutcome is the one-line result: the report's Outcome, which comes
// from the same statuses the tables show, with where they come from.
func diffOutcome(d DiffReport) string {
	var where []string
	for _, dd := range d.Dimensions {
		if dd.Significant {
			where = append(where, "shares by "+clean(dd.Name, false)+" from "+clean(dd.Source, false))
		}
	}
	var untestable []string
	for _, e := range d.Expectations {
		if e.Comparison == nil && verdictFlip(e) {
			where = append(where, clean(e.Name, false))
		}
		if c := e.Comparison; c != nil {
			switch c.Status {
			case assert.ExpectationChanged:
				where = append(where, clean(e.Name, false))
			case assert.ExpectationUntestable:
				untestable = append(untestable, clean(e.Name, false))
			}
		}
	}
	switch d.Outcome {
	case assert.ExpectationChanged:
		out := "CHANGED (" + strings.Join(where, "; ") + ")"
		if len(d.Regressions) > 0 {
			names := make([]string, len(d.Regressions))
			for i, n := range d.Regressions {
				names[i] = clean(n, false)
			}
			out += "; regression: " + strings.Join(names, ", ") + " has a worse verdict in run B"
		}
		return out
	case assert.ExpectationSame:
		return "no change within the margins"
	}
	if len(untestable) > 0 {
		return "UNTESTABLE: too few independent draws to show a change or its absence (" + strings.Join(untestable, "; ") + ")"
	}
	return "UNTESTABLE: nothing could be compared"
}

// diffComparison is an expectation's comparison as the table shows it.
func diffComparison(e ExpectationDiff) string {
	c := e.Comparison
	if c == nil {
		if verdictFlip(e) {
			return fmt.Sprintf("≠ changed: %v in run A and %v in run B (no shares to compare)", *e.A, *e.B)
		}
		if e.Changed() {
			return "verdict differs; not compared (no shares to compare)"
		}
		return "not compared (no shares to compare)"
	}
	label := map[assert.ExpectationStatus]string{assert.ExpectationChanged: "≠ changed", assert.ExpectationSame: "= no change",
		assert.ExpectationUntestable: "? untestable"}[c.Status]
	return label + ": " + clean(c.Reason, false)
}

// diffBucket shows a pod bucket as cluster/pod, as the run's own tables do.
func diffBucket(dd DimensionDiff, bucket string) string {
	return BucketLabel(Bucket{Name: bucket, Cluster: dd.Clusters[bucket]})
}

func diffLabel(s assert.ChangeStatus) string {
	switch s {
	case assert.ChangeIncrease:
		return "▲ significant"
	case assert.ChangeDecrease:
		return "▼ significant"
	case assert.ChangeNotSignificant:
		return "not significant"
	case assert.ChangeNone:
		return "= no change"
	}
	return "untestable"
}

// diffPP is a difference of shares in percentage points, signed.
func diffPP(v float64) string {
	s := fmt.Sprintf("%+.1f", 100*v)
	if s == "-0.0" {
		s = "+0.0"
	}
	return s + " pp"
}

func diffCI(s assert.ShareChange) string {
	if s.CI == nil {
		return "—"
	}
	return strings.TrimSuffix(diffPP(s.CI.Lo), " pp") + " … " + diffPP(s.CI.Hi)
}

func diffP(s assert.ShareChange) string {
	if s.Status == assert.ChangeUntestable || s.Status == assert.ChangeNone {
		return "—"
	}
	if s.AdjustedP < 1e-4 {
		return "< 0.0001"
	}
	return fmt.Sprintf("%.4f", s.AdjustedP)
}

func diffVerdict(v *assert.Verdict) string {
	if v == nil {
		return "—"
	}
	return v.String()
}

func diffExpName(e ExpectationDiff) string {
	if e.Source != "" && e.Source != "body" {
		return e.Name + " (from " + e.Source + ")"
	}
	return e.Name
}

// diffMethodLine says how the dimension was tested.
func diffMethodLine(c assert.Comparison) string {
	var fam string
	switch {
	case c.Hypotheses == 0:
		return "nothing to test: " + untestedWhy(c)
	case c.Hypotheses == 1 && len(c.Buckets) == 2:
		fam = "two buckets, whose shares are complements: one test, no correction needed"
	case c.Hypotheses == 1:
		fam = "one bucket tested"
	default:
		fam = fmt.Sprintf("Holm's correction over %d buckets", c.Hypotheses)
	}
	return fmt.Sprintf("two-proportion z test with the connection-aware variance under no change, at %s (%s); CI: Wald at %s for each bucket, not adjusted",
		Level(c.Level), fam, Level(c.Level))
}

func untestedWhy(c assert.Comparison) string {
	for _, s := range []assert.RunSample{c.A, c.B} {
		if s.Variance == assert.VarianceNone {
			return s.Describe()
		}
	}
	return "the shares are the same in both runs and nothing varied"
}

var diffPage = template.Must(template.New("diff").Funcs(template.FuncMap{
	"esc":     func(s string) string { return clean(s, false) },
	"pct":     pct,
	"pp":      diffPP,
	"ci":      diffCI,
	"p":       diffP,
	"label":   diffLabel,
	"bucket":  func(dd DimensionDiff, b string) string { return clean(diffBucket(dd, b), false) },
	"verdict": diffVerdict,
	"expname": func(e ExpectationDiff) string { return clean(diffExpName(e), false) },
	"method":  diffMethodLine,
	"outcome": diffOutcome,
	"compare": diffComparison,
	"level":   Level,
	"sig":     func(s assert.ChangeStatus) bool { return s.Significant() },
}).Parse(diffHTMLTemplate))

const diffHTMLTemplate = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>mesh-verify diff: {{esc .A.Scenario}} → {{esc .B.Scenario}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#111;background:#fff;max-width:72em;margin:1.5em auto;padding:0 1em}
h1{font-size:1.35em;margin:0 0 .6em}
h2{font-size:1.1em;margin:1.8em 0 .3em}
table{border-collapse:collapse;margin:.4em 0}
th,td{border:1px solid #888;padding:.2em .55em;text-align:right;vertical-align:top}
th{background:#eee}
td.l,th.l{text-align:left}
.sig{font-weight:bold}
.small{font-size:.9em;color:#333}
code{font-family:ui-monospace,Menlo,Consolas,monospace}
@media print{body{margin:0;max-width:none;font-size:10pt}th{background:none}table{page-break-inside:avoid}h2{page-break-after:avoid}}
</style>
</head>
<body>
<h1>mesh-verify run comparison: {{outcome .}}</h1>
<table>
<tr><th class="l"></th><th class="l">run</th><th class="l">scenario</th><th>requests</th><th class="l">verdict</th><th class="l">target</th></tr>
<tr><td class="l">A (before)</td><td class="l"><code>{{esc .A.RunID}}</code></td><td class="l">{{esc .A.Scenario}}</td><td>{{.A.Requests}}</td><td class="l">{{.A.Verdict}}</td><td class="l">{{esc .A.Target}}</td></tr>
<tr><td class="l">B (after)</td><td class="l"><code>{{esc .B.RunID}}</code></td><td class="l">{{esc .B.Scenario}}</td><td>{{.B.Requests}}</td><td class="l">{{.B.Verdict}}</td><td class="l">{{esc .B.Target}}</td></tr>
</table>
{{range .Notes}}<p><strong>Note:</strong> {{esc .}}</p>
{{end}}
{{range $d := .Dimensions}}
<h2>{{esc $d.Name}}, from {{esc $d.Source}}</h2>
<p class="small">A: {{$d.A.Describe}}<br>B: {{$d.B.Describe}}</p>
<table>
<tr><th class="l">{{esc $d.Name}}</th><th>A requests</th><th>A share</th><th>B requests</th><th>B share</th><th>change</th><th>{{level $d.Level}} CI</th><th>p (Holm)</th><th class="l">result</th></tr>
{{range $d.Buckets}}<tr{{if sig .Status}} class="sig"{{end}}>
<td class="l">{{bucket $d .Bucket}}</td><td>{{.CountA}}</td><td>{{pct .ShareA}}</td><td>{{.CountB}}</td><td>{{pct .ShareB}}</td>
<td>{{pp .Diff}}</td><td>{{ci .}}</td><td>{{p .}}</td><td class="l">{{label .Status}}</td>
</tr>
{{end}}</table>
<p class="small">{{method $d.Comparison}}</p>
{{end}}
{{range .NotCompared}}<p>Not compared: {{esc .Name}} from {{esc .Source}}: {{esc .Reason}}</p>
{{end}}
{{if .Expectations}}<h2>Expectations</h2>
<table>
<tr><th class="l">expectation</th><th class="l">A</th><th class="l">B</th><th class="l">comparison</th></tr>
{{range .Expectations}}<tr><td class="l">{{expname .}}</td><td class="l">{{verdict .A}}</td><td class="l">{{verdict .B}}</td><td class="l">{{compare .}}</td></tr>
{{end}}</table>
{{end}}
<p class="small">Each dimension is tested on its own at {{level .Confidence}}: a two-proportion z test per bucket whose variance
counts connections, not requests, when requests shared keep-alive connections (docs/statistics.md §9), with Holm's
correction over the buckets of the dimension. ▲ a significant increase of the share from A to B, ▼ a significant decrease.
Each expectation is compared at the effective draws its own verdict used (docs/statistics.md §9.4): changed, no change within its
margin, or untestable.</p>
</body>
</html>
`
