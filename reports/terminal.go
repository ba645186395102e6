package reports

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/mesh-verify/mesh-verify/assert"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"
)

// Terminal writes the human summary: how the attack went, the observed
// splits, each expectation with its evidence, and the verdict.
func Terminal(w io.Writer, r *Report) error {
	return render(w, r, func(w io.Writer) *tablewriter.Table {
		return tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})))
	}, "")
}

// Markdown writes the same summary as GitHub-flavoured Markdown, for CI job
// summaries and pull-request comments.
func Markdown(w io.Writer, r *Report) error {
	return render(w, r, func(w io.Writer) *tablewriter.Table {
		return tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewMarkdown()))
	}, "## ")
}

func render(w io.Writer, r *Report, table func(io.Writer) *tablewriter.Table, heading string) error {
	p := &printer{w: w, markdown: heading != ""}
	if p.markdown {
		// GitHub shows the first lines of a job summary: the verdict and
		// its exit code come first, the key table next, details folded.
		p.f("%smesh-verify: %s — %s%s · exit code %d\n", heading, p.esc(r.Scenario.Name), r.Verdict, gateNote(r), r.ExitCode)
	} else {
		p.f("%smesh-verify: %s — %s\n", heading, p.esc(r.Scenario.Name), r.Verdict)
	}
	if r.Scenario.Description != "" {
		p.f("%s\n", p.esc(r.Scenario.Description))
	}
	p.f("\nrun %s · target %s\n\n", p.esc(r.RunID), p.esc(r.Target))
	for _, wmsg := range r.Warnings {
		p.f("%sWARNING: %s\n", p.item(), p.esc(wmsg))
	}
	if len(r.Warnings) > 0 && p.markdown {
		p.f("\n")
	}
	switch f := r.Failure; {
	case f != nil:
		p.f("%s ERROR (%s): %s\n", p.esc(strings.ToUpper(f.Kind)), p.esc(f.Phase), p.esc(f.Error))
		if f.Cause != "" && f.Cause != f.Error {
			p.f("%scause: %s\n", p.para(), p.esc(f.Cause))
		}
		p.f("\n")
	case r.SetupError != "":
		p.f("SETUP ERROR: %s\n\n", p.esc(r.SetupError))
	}
	if r.Failure != nil && r.Metrics.Requests == 0 {
		// Nothing was sent: no table would say anything.
		p.verdict(r, heading)
		return p.error
	}
	for _, c := range r.ConfigErrors {
		p.f("%sCONFIGURATION ERROR: %s: %s\n", p.item(), p.esc(c.Subject), p.esc(c.Message))
		for _, s := range c.Samples {
			p.f("  - %s\n", p.quoted(s))
		}
	}
	if len(r.ConfigErrors) > 0 {
		p.f("\n")
	}
	p.attempts(r, table, heading)
	if p.markdown {
		p.keyTable(r, table)
		p.f("<details><summary>Details: attack, observed splits, evidence</summary>\n\n")
	}

	a := r.Attack
	t := table(w)
	t.Header("attack", "requests", "requested", "achieved", "duration", "connections", "success", "p50", "p99", "max")
	req := "max effort"
	if a.RequestedRate > 0 {
		req = fmt.Sprintf("%.1f/s", a.RequestedRate)
	}
	mode := p.esc(a.Mode)
	if a.Concurrency > 0 {
		mode += fmt.Sprintf(" (c=%d)", a.Concurrency)
	}
	if !a.KeepAlive {
		mode += ", no keep-alive"
	}
	switch {
	case a.GRPC != "":
		mode += ", gRPC " + p.esc(a.GRPC)
	case a.HTTP2:
		mode += ", HTTP/2"
	}
	if a.Interrupted {
		mode += ", INTERRUPTED"
	}
	l := r.Metrics.Latency
	p.err(t.Append(mode, fmt.Sprint(r.Metrics.Requests), req, fmt.Sprintf("%.1f/s", a.AchievedRate),
		round(a.Elapsed), fmt.Sprint(a.Connections), pct(r.Metrics.Success),
		round(l.P50), round(l.P99), round(l.Max)))
	p.table(t)
	p.workers(r, table, heading)

	if len(r.Metrics.Errors) > 0 {
		p.f("\nerrors:\n")
		if p.markdown {
			p.f("\n")
		}
		for _, e := range r.Metrics.Errors {
			if p.markdown {
				p.f("- %d × %s\n", e.Count, p.esc(e.Message))
				continue
			}
			p.f("  %6d × %s\n", e.Count, p.esc(e.Message))
		}
	}

	for _, d := range r.Dimensions {
		if d.Attributed == 0 {
			continue
		}
		src := d.Source
		if src == "" {
			src = "body"
		}
		p.f("\n%sobserved by %s, from %s (%d attributed, %d unattributed, %d connections)\n", sub(heading), p.esc(d.Name), p.esc(src), d.Attributed, d.Unattributed, d.Units)
		errs := d.ErrorsUnattributed
		for _, b := range d.Buckets {
			errs += b.Errors
		}
		t := table(w)
		if errs > 0 {
			t.Header(p.esc(d.Name), "requests", "share", "errors")
		} else {
			t.Header(p.esc(d.Name), "requests", "share")
		}
		shown, more := largest(d.Buckets, func(b Bucket) int64 { return b.Count })
		for _, b := range shown {
			row := []any{p.esc(BucketLabel(b)), fmt.Sprint(b.Count), pct(b.Share)}
			if errs > 0 {
				row = append(row, fmt.Sprint(b.Errors))
			}
			p.err(t.Append(row...))
		}
		if more != "" {
			p.err(t.Append(more, "", ""))
		}
		if d.ErrorsUnattributed > 0 {
			p.err(t.Append("(unattributed)", "", "", fmt.Sprint(d.ErrorsUnattributed)))
		}
		p.table(t)
	}
	for _, d := range r.Dimensions {
		// The table of a field nothing attributed is not dropped silently.
		if d.Attributed == 0 && d.Source == "body" && d.Name == "cluster" && d.Unattributed > 0 && hasBodyRules(r) {
			p.f("\nobserved by cluster, from body: none of %d answered responses was attributed a cluster\n", d.Unattributed)
		}
	}
	p.reconciliation(r, table, heading)
	p.rules(r, table, heading)
	if len(r.Samples) > 0 {
		p.f("\nresponses no rule attributed (first %d):\n", len(r.Samples))
		for _, s := range r.Samples {
			p.f("  - %s\n", p.quoted(s))
		}
	}

	for _, e := range r.Expectation {
		switch {
		case e.From != "":
			p.f("\n%s%s (requests sent from cluster %s): %s\n", sub(heading), p.esc(e.Name), p.esc(e.From), e.Verdict)
		case e.Source != "" && e.Source != "body":
			p.f("\n%s%s (from %s): %s\n", sub(heading), p.esc(e.Name), p.esc(e.Source), e.Verdict)
		default:
			p.f("\n%s%s: %s\n", sub(heading), p.esc(e.Name), e.Verdict)
		}
		p.f("%s\n", p.esc(e.Reason))
		if e.Model != nil && len(e.Model.Explanation) > 0 {
			// Weight names come from the scenario or --set.
			p.f("model %s: %s\n", p.esc(e.Model.Model), p.esc(strings.Join(e.Model.Explanation, " ")))
		}
		if ws := e.Windows; ws != nil {
			t := table(w)
			t.Header(toAny(windowHeader)...)
			for _, x := range ws.Windows {
				row := windowRow(x)
				for i := range row {
					row[i] = p.esc(row[i])
				}
				p.err(t.Append(toAny(row)...))
			}
			p.table(t)
			p.f("%d of %d windows judged, each FAIL at 1-α/(buckets·%d)%s\n", ws.Judged, len(ws.Windows), max(ws.Judged, 1), p.para())
			for _, c := range ws.Converge {
				p.f("%s%s\n", p.item(), p.esc(c.Text))
			}
		}
		if s := e.Split; s != nil {
			t := table(w)
			t.Header(p.esc(e.By), "requests", "observed", "expected", "pass interval", "fail interval", "allowed", "verdict")
			shown, more := largest(s.Buckets, func(b assert.BucketResult) int64 { return b.Count })
			if more != "" {
				p.f("%s\n", more)
			}
			for _, b := range shown {
				p.err(t.Append(p.esc(b.Bucket), fmt.Sprint(b.Count), pct(b.Observed), pct(b.Expected),
					fmt.Sprintf("%s–%s", pct(b.PassInterval.Lo), pct(b.PassInterval.Hi)),
					fmt.Sprintf("%s–%s", pct(b.FailInterval.Lo), pct(b.FailInterval.Hi)),
					fmt.Sprintf("%s–%s", pct(b.Allowed.Lo), pct(b.Allowed.Hi)), b.Verdict.String()))
			}
			p.table(t)
			p.f("%s\n%s%s\n%s", p.esc(LevelsLine(s)), p.para(), p.esc(EvidenceLine(s.Evidence)), p.para())
			p.f("%s\n", ChiSquareLine(s))
		}
		switch {
		case e.RequiredConnections > 0:
			p.f("to settle it: about %d connections (or keepAlive: false); more requests on the same connections would not\n", e.RequiredConnections)
		case e.RequiredN > 0:
			p.f("to settle it: about %d requests in all\n", e.RequiredN)
		}
	}
	if s := r.Sequential; s != nil && s.StoppedAt > 0 {
		p.f("\nstopped early at look %d of %d (%s)\n", s.StoppedAt, len(s.Plan.Looks), p.esc(s.Rule))
	}
	if p.markdown {
		p.f("\n</details>\n")
	}
	p.verdict(r, heading)
	return p.error
}

// table renders t; in Markdown a blank line follows, or GitHub would
// take the next line of text for another row of it.
func (p *printer) table(t *tablewriter.Table) {
	if p.markdown {
		// and one before, so that no line of text becomes its header.
		p.f("\n")
	}
	p.err(t.Render())
	if p.markdown {
		p.f("\n")
	}
}

// item starts a line of a list in Markdown (a line of its own on GitHub,
// not one paragraph with the next).
func (p *printer) item() string {
	if p.markdown {
		return "- "
	}
	return ""
}

// para separates two lines that are paragraphs of their own in Markdown.
func (p *printer) para() string {
	if p.markdown {
		return "\n"
	}
	return ""
}

// keyTable is the Markdown summary's first table: each expectation with
// its verdict and reason.
func (p *printer) keyTable(r *Report, table func(io.Writer) *tablewriter.Table) {
	if len(r.Expectation) == 0 {
		return
	}
	t := table(p.w)
	t.Header("expectation", "verdict", "reason")
	for _, e := range r.Expectation {
		p.err(t.Append(p.esc(e.Name), e.Verdict.String(), p.esc(brief(e.Reason))))
	}
	p.table(t)
}

// briefReason bounds a reason in the key table, in runes; the whole
// reason is in the details.
const briefReason = 160

// brief is the first line of s, cut to briefReason runes.
func brief(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if utf8.RuneCountInString(s) <= briefReason {
		return s
	}
	return string([]rune(s)[:briefReason-1]) + "…"
}

func gateNote(r *Report) string {
	if r.Gate != r.Verdict {
		return " (gate: " + r.Gate.String() + ")"
	}
	return ""
}

func (p *printer) verdict(r *Report, heading string) {
	p.f("\n%sVERDICT: %s%s · exit code %d\n", heading, r.Verdict, gateNote(r), r.ExitCode)
}

func hasBodyRules(r *Report) bool {
	for _, rr := range r.Rules {
		if rr.Source == "body" {
			return true
		}
	}
	return false
}

type printer struct {
	w        io.Writer
	error    error
	markdown bool
}

// esc cleans text that may come from a response, a log or a regex.
func (p *printer) esc(s string) string { return clean(s, p.markdown) }

// quoted shows a sample body or line whole, in quotes, cleaned.
func (p *printer) quoted(s string) string {
	if p.markdown {
		return "“" + clean(s, true) + "”"
	}
	return `"` + strings.ReplaceAll(clean(s, false), `"`, `\"`) + `"`
}

// reconciliation shows, per counting source, what it counted against the
// requests answered, and per pod where the count comes from.
func (p *printer) reconciliation(r *Report, table func(io.Writer) *tablewriter.Table, heading string) {
	for _, rc := range r.Reconciliation {
		p.f("\n%sreconciliation of %s: %.0f counted served", sub(heading), p.esc(rc.Source), rc.Counted)
		if rc.Background > 0 {
			p.f(" (%.1f background taken out)", rc.Background)
		}
		if rc.Copies > 0 {
			p.f(", %.0f mirrored copies", rc.Copies)
		}
		if rc.Retried > 0 {
			p.f(", %d requests retried (%d further attempt lines, each request counted once)", rc.Retried, rc.Attempts)
		}
		p.f(" for %d answered and %d failed: %s (tolerance %.1f)\n", rc.Answered, rc.Failed, p.esc(strings.ToUpper(rc.Status)), rc.Tolerance)
		if rc.CountsAttempts {
			p.f("lines without a request id count attempts, not requests: a retried request counts once per attempt that reached an observed pod\n")
		}
		if rc.Reason != "" {
			p.f("%s\n", p.esc(rc.Reason))
		}
		if len(rc.Pods) == 0 {
			continue
		}
		t := table(p.w)
		t.Header("cluster", "pod", "workload", "mode", "lines", "background", "expected", "net", "copies", "errors")
		for _, pr := range rc.Pods {
			bg := ""
			if pr.BackgroundSeconds > 0 {
				bg = fmt.Sprintf("%d in %.0fs (%.2f/s)", pr.BackgroundLines, pr.BackgroundSeconds, pr.Rate)
			}
			p.err(t.Append(p.esc(pr.Cluster), p.esc(pr.Pod), p.esc(pr.Workload), p.esc(pr.Mode), fmt.Sprint(pr.Lines), bg,
				fmt.Sprintf("%.1f", pr.Expected), fmt.Sprintf("%.1f", pr.Net), fmt.Sprintf("%.0f", pr.Copies), fmt.Sprintf("%.0f", pr.Errors)))
		}
		p.table(t)
	}
}

// workers shows a distributed run's workers, one row each.
func (p *printer) workers(r *Report, table func(io.Writer) *tablewriter.Table, heading string) {
	w := r.Workers
	if w == nil {
		return
	}
	jobs := make([]string, len(w.Jobs))
	for i, j := range w.Jobs {
		jobs[i] = fmt.Sprintf("job %s in cluster %s namespace %s", p.esc(j.Job), p.esc(j.Cluster), p.esc(j.Namespace))
	}
	p.f("\n%s%d workers, image %s: %s\n", sub(heading), w.Count, p.esc(w.Image), strings.Join(jobs, "; "))
	t := table(p.w)
	t.Header("worker", "cluster", "pod", "requests", "achieved", "share", "errors", "state")
	for _, row := range w.Rows {
		state := "finished"
		if !row.Final {
			state = "LOST"
		}
		if row.Error != "" {
			state += ": " + p.esc(row.Error)
		}
		p.err(t.Append(fmt.Sprint(row.Index), p.esc(row.Cluster), p.esc(row.Pod), fmt.Sprint(row.Requests), fmt.Sprintf("%.1f/s", row.Rate), pct(row.Share), fmt.Sprint(row.Errors), state))
	}
	p.table(t)
}

// rules shows what each rule matched, with samples of what a rule that
// matched nothing did not match.
func (p *printer) rules(r *Report, table func(io.Writer) *tablewriter.Table, heading string) {
	if len(r.Rules) == 0 {
		return
	}
	p.f("\n%swhat the rules matched\n", sub(heading))
	t := table(p.w)
	t.Header("source", "rule", "tried", "matched", "excluded")
	for _, rr := range r.Rules {
		p.err(t.Append(p.esc(rr.Source), p.esc(rr.Rule), fmt.Sprint(rr.Read), fmt.Sprint(rr.Matched), fmt.Sprint(rr.Excluded)))
	}
	p.table(t)
	for _, rr := range r.Rules {
		if rr.Matched > 0 || len(rr.Samples) == 0 {
			continue
		}
		p.f("%s did not match:\n", p.esc(rr.Rule))
		for _, s := range rr.Samples {
			p.f("  - %s\n", p.quoted(s))
		}
	}
}

func (p *printer) f(format string, args ...any) {
	if p.error == nil {
		_, p.error = fmt.Fprintf(p.w, format, args...)
	}
}

func (p *printer) err(err error) {
	if p.error == nil {
		p.error = err
	}
}

func sub(heading string) string {
	if heading == "" {
		return ""
	}
	return "#" + heading
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// Level prints a confidence level with the digits a spent level needs.
func Level(f float64) string { return strconv.FormatFloat(100*f, 'g', 5, 64) + "%" }

// LevelsLine says what the two intervals of a split are.
func LevelsLine(s *assert.SplitResult) string {
	return fmt.Sprintf("pass interval: %s Clopper–Pearson, each end an exact one-sided test at %s; fail interval: %s %s, Bonferroni over %d buckets",
		Level(s.PassLevel), Level(1-(1-s.PassLevel)/2), Level(s.FailLevel), s.FailMethod, len(s.Buckets))
}

// EvidenceLine says what the requests were worth and which sampling unit
// was assumed, in requests and connections, never effective counts as if
// they were requests.
func EvidenceLine(e assert.Evidence) string {
	// What the requests were worth comes from the data whatever the
	// balancing (docs/statistics.md §3.3); the balancing says what was
	// declared or assumed.
	unit := "per-request balancing"
	if e.Balancing == assert.PerConnection {
		unit = "per-connection balancing"
	}
	var what string
	switch {
	case e.EffectiveN >= float64(e.N)-1e-9:
		what = fmt.Sprintf("n = %d requests, each an independent draw (%s", e.N, unit)
	case e.Connections > 0:
		what = fmt.Sprintf("n = %d requests on %d connections, worth %.4g independent draws (%s", e.N, e.Connections, e.EffectiveN, unit)
	default:
		what = fmt.Sprintf("n = %d requests, worth %.4g independent draws (%s", e.N, e.EffectiveN, unit)
	}
	if e.BalancingReason != "" {
		what += ": " + e.BalancingReason
	}
	what += ")"
	if e.ObservedDesignEffect > 0 {
		what += fmt.Sprintf("; observed design effect %.3g over %d connections", e.ObservedDesignEffect, e.Connections)
	}
	return what
}

// ChiSquareLine labels the raw statistic and, when the effective n differs
// from n, the design-corrected one, each with its own p-value.
func ChiSquareLine(s *assert.SplitResult) string {
	if s.ChiSquareInfinite {
		return fmt.Sprintf("χ² infinite (df %d, p = 0): a bucket expected to get nothing got traffic", s.DF)
	}
	out := fmt.Sprintf("χ² = %.2f (df %d, p = %.4g) from the raw counts, every request taken as an independent draw", s.ChiSquare, s.DF, s.PValue)
	if c := s.DesignCorrected; c != nil {
		out += fmt.Sprintf("; design-corrected χ² = %.2f (p = %.4g), scaled by effective n / n", c.ChiSquare, c.PValue)
	}
	return out
}

func round(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(10 * time.Microsecond).String()
	}
	return d.Round(time.Microsecond).String()
}

// maxRows bounds the rows of a bucket table: a dimension may hold up to
// tally.MaxBuckets values, which report.json keeps and a terminal or a
// step summary cannot usefully show.
const maxRows = 40

// largest keeps the maxRows buckets with the most requests, in their
// order, and says what was left out.
func largest[B any](bs []B, count func(B) int64) (shown []B, more string) {
	if len(bs) <= maxRows {
		return bs, ""
	}
	idx := make([]int, len(bs))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return cmp.Compare(count(bs[b]), count(bs[a])) })
	keep := idx[:maxRows]
	slices.Sort(keep)
	var left int64
	for _, i := range idx[maxRows:] {
		left += count(bs[i])
	}
	for _, i := range keep {
		shown = append(shown, bs[i])
	}
	return shown, fmt.Sprintf("(%d more buckets with %d requests: report.json lists them all)", len(bs)-maxRows, left)
}
