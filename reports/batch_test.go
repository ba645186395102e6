package reports

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

// batchOf is a batch of three scenarios: one that ran (r), one that did
// not load, one not run, every name and message ending in s.
func batchOf(r *Report, s string) Batch {
	return Batch{Kind: BatchKind, ExitCode: 130, Outcome: "INTERRUPTED", Runs: []BatchRun{
		{Scenario: "a.yaml" + s, ExitCode: r.ExitCode, RunDir: "runs/x" + s, Report: r},
		{Scenario: "b.yaml" + s, ExitCode: 4, Error: "b.yaml: kind: unknown" + s},
	}, NotRun: []string{"c.yaml" + s}}
}

// TestJUnitBatch: one test suite per scenario, in order; the suite of a
// scenario that ran is exactly its own junit.xml's; one that did not load
// is an error, one not run skipped.
func TestJUnitBatch(t *testing.T) {
	t.Parallel()
	r := richReport()
	var got junitSuites
	if err := xml.Unmarshal([]byte(renderTo(t, func(w io.Writer, _ *Report) error { return JUnitBatch(w, batchOf(r, "")) }, nil)), &got); err != nil {
		t.Fatal(err)
	}
	var own junitSuites
	if err := xml.Unmarshal([]byte(renderTo(t, JUnit, r)), &own); err != nil {
		t.Fatal(err)
	}
	if len(got.Suites) != 3 {
		t.Fatalf("%d suites, want 3", len(got.Suites))
	}
	if a, b := got.Suites[0], own.Suites[0]; a.Name != b.Name || a.Tests != b.Tests || a.Failures != b.Failures || a.Errors != b.Errors || len(a.Cases) != len(b.Cases) {
		t.Errorf("the run's suite %+v differs from its own junit.xml's %+v", a, b)
	}
	if s := got.Suites[1]; s.Errors != 1 || s.Cases[0].Error == nil || !strings.Contains(s.Cases[0].Error.Message, "kind: unknown") {
		t.Errorf("the scenario that did not load: %+v", s)
	}
	if s := got.Suites[2]; s.Skipped != 1 || s.Cases[0].Skipped == nil || s.Name != "mesh-verify/c.yaml" {
		t.Errorf("the scenario not run: %+v", s)
	}
}

// TestMarkdownBatchStartsWithOutcome: GitHub shows a summary's first line
// first: the batch's outcome and exit code.
func TestMarkdownBatchStartsWithOutcome(t *testing.T) {
	t.Parallel()
	md := renderTo(t, func(w io.Writer, _ *Report) error { return MarkdownBatch(w, batchOf(richReport(), "")) }, nil)
	if first, _, _ := strings.Cut(md, "\n"); first != "## mesh-verify: 3 scenarios — INTERRUPTED · exit code 130" {
		t.Errorf("first line %q", first)
	}
	if !strings.Contains(md, "| c.yaml | not run (interrupted) |") {
		t.Errorf("the scenario not run is not in the table:\n%s", md)
	}
}

// FuzzHostileStringsInBatch plants a hostile string in the batch's
// scenario names, errors and run directories and in every string of its
// report: neither batch writer lets a raw control byte through, the
// Markdown (as GitHub renders it) gains no element, and the JUnit stays
// valid XML.
func FuzzHostileStringsInBatch(f *testing.F) {
	for _, s := range []string{"\x1b[2J\x1b]0;owned\x07", "<img src=x onerror=alert(1)>", "| x | y |\n\n| - |", "https://evil.example/", "\xff\xfe", "]]><x/>"} {
		f.Add(s)
	}
	base := richReport()
	baseTags := htmlTags(f, markdownHTML(f, renderTo(f, func(w io.Writer, _ *Report) error { return MarkdownBatch(w, batchOf(base, "")) }, nil)))
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 200 {
			return
		}
		b := batchOf(plant(t, base, s), s)
		var md, junit bytes.Buffer
		if err := MarkdownBatch(&md, b); err != nil {
			t.Fatal(err)
		}
		if err := JUnitBatch(&junit, b); err != nil {
			t.Fatal(err)
		}
		for name, out := range map[string]string{"markdown": md.String(), "junit": junit.String()} {
			if ctx, ok := rawControl(out); ok {
				t.Errorf("%s: a raw control byte or invalid UTF-8 from %q: %q", name, s, ctx)
			}
		}
		if tags := htmlTags(t, markdownHTML(t, md.String())); !sameTags(tags, baseTags) {
			t.Errorf("markdown: %q changed the elements GitHub renders: %v, without it %v", s, tags, baseTags)
		}
		var v junitSuites
		if err := xml.Unmarshal(junit.Bytes(), &v); err != nil || len(v.Suites) != 3 {
			t.Errorf("junit: %q: %d suites, %v", s, len(v.Suites), err)
		}
	})
}
