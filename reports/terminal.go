package reports

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

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
	p := &printer{w: w}
	p.f("%smesh-verify: %s — %s\n", heading, r.Scenario.Name, r.Verdict)
	if r.Scenario.Description != "" {
		p.f("%s\n", r.Scenario.Description)
	}
	p.f("\nrun %s · target %s\n\n", r.RunID, r.Target)
	for _, wmsg := range r.Warnings {
		p.f("WARNING: %s\n", wmsg)
	}
	if r.SetupError != "" {
		p.f("SETUP ERROR: %s\n\n", r.SetupError)
	}

	a := r.Attack
	t := table(w)
	t.Header("attack", "requests", "requested", "achieved", "duration", "connections", "success", "p50", "p99", "max")
	req := "max effort"
	if a.RequestedRate > 0 {
		req = fmt.Sprintf("%.1f/s", a.RequestedRate)
	}
	mode := a.Mode
	if a.Concurrency > 0 {
		mode += fmt.Sprintf(" (c=%d)", a.Concurrency)
	}
	if !a.KeepAlive {
		mode += ", no keep-alive"
	}
	if a.Interrupted {
		mode += ", INTERRUPTED"
	}
	l := r.Metrics.Latency
	p.err(t.Append(mode, fmt.Sprint(r.Metrics.Requests), req, fmt.Sprintf("%.1f/s", a.AchievedRate),
		round(a.Elapsed), fmt.Sprint(a.Connections), pct(r.Metrics.Success),
		round(l.P50), round(l.P99), round(l.Max)))
	p.err(t.Render())

	if len(r.Metrics.Errors) > 0 {
		p.f("\nerrors:\n")
		for _, e := range r.Metrics.Errors {
			p.f("  %6d × %s\n", e.Count, e.Message)
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
		p.f("\n%sobserved by %s, from %s (%d attributed, %d unattributed, %d connections)\n", sub(heading), d.Name, src, d.Attributed, d.Unattributed, d.Units)
		t := table(w)
		t.Header(d.Name, "requests", "share")
		for _, b := range d.Buckets {
			p.err(t.Append(b.Name, fmt.Sprint(b.Count), pct(b.Share)))
		}
		p.err(t.Render())
	}
	if len(r.Samples) > 0 {
		p.f("\nresponses no rule attributed (first %d):\n", len(r.Samples))
		for _, s := range r.Samples {
			p.f("  %q\n", s)
		}
	}

	for _, e := range r.Expectation {
		if e.Source != "" && e.Source != "body" {
			p.f("\n%s%s (from %s): %s\n", sub(heading), e.Name, e.Source, e.Verdict)
		} else {
			p.f("\n%s%s: %s\n", sub(heading), e.Name, e.Verdict)
		}
		p.f("%s\n", e.Reason)
		if e.Model != nil && len(e.Model.Explanation) > 0 {
			p.f("model %s: %s\n", e.Model.Model, strings.Join(e.Model.Explanation, " "))
		}
		if s := e.Split; s != nil {
			t := table(w)
			t.Header(e.By, "requests", "observed", "expected", "pass interval", "fail interval", "allowed", "verdict")
			for _, b := range s.Buckets {
				p.err(t.Append(b.Bucket, fmt.Sprint(b.Count), pct(b.Observed), pct(b.Expected),
					fmt.Sprintf("%s–%s", pct(b.PassInterval.Lo), pct(b.PassInterval.Hi)),
					fmt.Sprintf("%s–%s", pct(b.FailInterval.Lo), pct(b.FailInterval.Hi)),
					fmt.Sprintf("%s–%s", pct(b.Allowed.Lo), pct(b.Allowed.Hi)), b.Verdict.String()))
			}
			p.err(t.Render())
			p.f("%s\n%s\n", LevelsLine(s), EvidenceLine(s.Evidence))
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
		p.f("\nstopped early at look %d of %d (%s)\n", s.StoppedAt, len(s.Plan.Looks), s.Rule)
	}
	p.f("\n%sVERDICT: %s", heading, r.Verdict)
	if r.Gate != r.Verdict {
		p.f(" (gate: %s)", r.Gate)
	}
	p.f(" · exit code %d\n", r.ExitCode)
	return p.error
}

type printer struct {
	w     io.Writer
	error error
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
	var what string
	switch {
	case e.Balancing != assert.PerConnection:
		what = fmt.Sprintf("n = %d requests, each an independent draw (per-request balancing", e.N)
	case e.Connections > 0:
		what = fmt.Sprintf("n = %d requests on %d connections, worth %.4g independent draws (per-connection balancing", e.N, e.Connections, e.EffectiveN)
	default:
		what = fmt.Sprintf("n = %d requests, worth %.4g independent draws (per-connection balancing", e.N, e.EffectiveN)
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
