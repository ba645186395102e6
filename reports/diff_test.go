package reports

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
)

// sumsOf computes the per-connection sums of a count matrix:
// rows[j][i] is the requests of connection j in bucket i.
func sumsOf(rows [][]int64) *assert.UnitStats {
	k := len(rows[0])
	u := &assert.UnitStats{Units: int64(len(rows)), SumXX: make([]float64, k), SumXM: make([]float64, k)}
	for _, r := range rows {
		var m float64
		for _, x := range r {
			m += float64(x)
		}
		u.SumMM += m * m
		for i, x := range r {
			u.SumXX[i] += float64(x * x)
			u.SumXM[i] += float64(x) * m
		}
	}
	return u
}

func verdictPtr(v assert.Verdict) *assert.Verdict { return &v }

// diffRuns are two runs: A before and B after a rollout.
func diffRuns() (*Report, *Report) {
	a := &Report{Schema: Schema, RunID: "run-a", Scenario: ScenarioInfo{Name: "rollout"}, Metrics: Metrics{Requests: 40},
		Verdict: assert.Pass,
		Dimensions: []Dimension{
			// The clustered matrix of assert's TestCompareClustered, plus
			// a bucket that only failed (count 0, appended last, no sums).
			{Name: "cluster", Source: "body", Attributed: 40, Units: 4,
				Buckets: []Bucket{{Name: "c1", Count: 18}, {Name: "c2", Count: 13}, {Name: "c3", Count: 9}, {Name: "c9", Errors: 3}},
				Sums:    sumsOf([][]int64{{10, 0, 0}, {0, 8, 0}, {5, 5, 2}, {3, 0, 7}})},
			{Name: "pod", Source: "body", Attributed: 40, Units: 4,
				Buckets: []Bucket{{Name: "web-1", Cluster: "c1", Count: 40}}, Sums: sumsOf([][]int64{{10}, {8}, {12}, {10}})},
			{Name: "version", Source: "logs", Attributed: 10, Buckets: []Bucket{{Name: "v1", Count: 10}}},
			{Name: "service", Source: "body"},
		},
		Expectation: []Expectation{{Name: "even", Kind: "split", By: "cluster", Verdict: assert.Pass}, {Name: "gone", Kind: "reached", Verdict: assert.Pass}},
	}
	b := &Report{Schema: Schema, RunID: "run-b", Scenario: ScenarioInfo{Name: "rollout v2"}, Metrics: Metrics{Requests: 44},
		Verdict: assert.Fail,
		Dimensions: []Dimension{
			{Name: "cluster", Source: "body", Attributed: 44, Units: 5,
				Buckets: []Bucket{{Name: "c2", Count: 20}, {Name: "c1", Count: 17}, {Name: "c4", Count: 7}},
				Sums:    sumsOf([][]int64{{12, 0, 0}, {6, 6, 0}, {0, 9, 0}, {2, 2, 2}, {0, 0, 5}})},
			// No per-connection sums (a report of an older build).
			{Name: "pod", Source: "body", Attributed: 44, Buckets: []Bucket{{Name: "web-1", Cluster: "c1", Count: 20}, {Name: "web-2", Cluster: "c2", Count: 24}}},
			{Name: "version", Source: "logs"},
		},
		Expectation: []Expectation{{Name: "even", Kind: "split", By: "cluster", Verdict: assert.Fail}, {Name: "new", Kind: "successRate", Verdict: assert.Pass}},
	}
	return a, b
}

func TestDiff(t *testing.T) {
	a, b := diffRuns()
	d, err := Diff(a, b, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if d.Schema != DiffSchema || d.A.RunID != "run-a" || d.B.Requests != 44 || d.A.Verdict != assert.Pass || d.B.Verdict != assert.Fail {
		t.Errorf("runs: %+v %+v", d.A, d.B)
	}
	if len(d.Dimensions) != 2 || d.Dimensions[0].Name != "cluster" || d.Dimensions[1].Name != "pod" {
		t.Fatalf("dimensions: %+v", d.Dimensions)
	}
	// The cluster dimension: the failed-only bucket c9 is not a share, the
	// sums follow the buckets with a count, and the numbers are the ones
	// computed in python straight from the matrices (see assert's
	// TestCompareClustered): Var = C/(C-1) Σ_j (x_ij - p m_j)² / n².
	cl := d.Dimensions[0]
	want := []struct {
		bucket string
		se, z  float64
	}{
		{"c1", 0.2743432980237091, -0.2303836491712527},
		{"c2", 0.29197373537254045, 0.4284141044908199},
		{"c3", 0.1616451875765767, -1.2118662263923798},
		{"c4", 0.13472149778983772, 1.1532044350751023},
	}
	if len(cl.Buckets) != len(want) || cl.A.Variance != assert.VarianceClustered || cl.B.Variance != assert.VarianceClustered {
		t.Fatalf("cluster: %+v", cl.Comparison)
	}
	for i, w := range want {
		s := cl.Buckets[i]
		if s.Bucket != w.bucket || math.Abs(s.SE-w.se) > 1e-12 || math.Abs(s.Z-w.z) > 1e-10 {
			t.Errorf("cluster bucket %d: %+v, want %s SE %.12g z %.12g", i, s, w.bucket, w.se, w.z)
		}
	}
	// The pod dimension: run B has no sums, binomial, and the notes say so;
	// web-1 took everything in A (zero variance there) and 20/44 in B.
	// Test: p̄ = 60/84; run A's cluster-robust variance at p̄ over 4
	// connections of 10, 8, 12, 10 (x = m): 4/3·(1-p̄)²·Σm²/40²; run B's
	// binomial p̄(1-p̄)/44; z = (20/44 - 1)/sqrt(sum) = -3.0306154165757326.
	pod := d.Dimensions[1]
	if pod.A.Variance != assert.VarianceClustered || pod.B.Variance != assert.VarianceBinomial || !pod.Significant ||
		pod.Buckets[0].Status != assert.ChangeDecrease || pod.Buckets[1].Status != assert.ChangeIncrease || pod.Clusters["web-2"] != "c2" {
		t.Errorf("pod: %+v", pod)
	}
	if z := pod.Buckets[0].Z; math.Abs(z-(-3.0306154165757326)) > 1e-10 {
		t.Errorf("pod z %.16g", z)
	}
	if !d.Significant || !d.Tested {
		t.Errorf("significant %v tested %v", d.Significant, d.Tested)
	}
	if len(d.NotCompared) != 1 || d.NotCompared[0].Name != "version" || !strings.Contains(d.NotCompared[0].Reason, "run B attributed no request") {
		t.Errorf("not compared: %+v", d.NotCompared)
	}
	notes := strings.Join(d.Notes, "\n")
	for _, s := range []string{"different scenarios (rollout and rollout v2)", "run B has no per-connection counts (pod from body)"} {
		if !strings.Contains(notes, s) {
			t.Errorf("notes do not say %q:\n%s", s, notes)
		}
	}
	wantExp := []ExpectationDiff{
		{Name: "even", Kind: "split", By: "cluster", A: verdictPtr(assert.Pass), B: verdictPtr(assert.Fail)},
		{Name: "gone", Kind: "reached", A: verdictPtr(assert.Pass)},
		{Name: "new", Kind: "successRate", B: verdictPtr(assert.Pass)},
	}
	if len(d.Expectations) != len(wantExp) {
		t.Fatalf("expectations: %+v", d.Expectations)
	}
	for i, w := range wantExp {
		g := d.Expectations[i]
		if g.Name != w.Name || g.Kind != w.Kind || diffVerdict(g.A) != diffVerdict(w.A) || diffVerdict(g.B) != diffVerdict(w.B) || !g.Changed() {
			t.Errorf("expectation %d: %+v", i, g)
		}
	}

	// The same report twice: nothing changed, and it says it is one run.
	same, err := Diff(a, a, 0.95)
	if err != nil {
		t.Fatal(err)
	}
	if same.Significant || !same.Tested || !strings.Contains(strings.Join(same.Notes, "\n"), "same run") {
		t.Errorf("a run against itself: %+v", same)
	}
	for _, e := range same.Expectations {
		if e.Changed() {
			t.Errorf("expectation %s changed against itself", e.Name)
		}
	}

	// A dimension whose buckets repeat is invalid input.
	bad := *b
	bad.Dimensions = []Dimension{{Name: "cluster", Source: "body", Attributed: 2, Buckets: []Bucket{{Name: "c1", Count: 1}, {Name: "c1", Count: 1}}}}
	if _, err := Diff(a, &bad, 0.95); err == nil {
		t.Error("a bucket twice was accepted")
	}
}

func TestDiffRenderers(t *testing.T) {
	a, b := diffRuns()
	// Names that came from responses: a terminal escape and markup.
	a.Dimensions[0].Buckets[0].Name = "c1\x1b[31m<b>"
	b.Dimensions[0].Buckets[1].Name = "c1\x1b[31m<b>"
	b.Scenario.Name = "rollout\r\nv2"
	d, err := Diff(a, b, 0.95)
	if err != nil {
		t.Fatal(err)
	}

	var term bytes.Buffer
	if err := DiffTerminal(&term, d); err != nil {
		t.Fatal(err)
	}
	out := term.String()
	for _, s := range []string{`c1\u001b[31m<b>`, "c1/web-1", "c2/web-2", "▼ significant", "▲ significant", "not significant",
		"Holm's correction over 4 buckets", "two buckets, whose shares are complements", "95% CI", `rollout\r\nv2`,
		"4 connections, cluster-robust variance", "without per-connection counts", "not compared: version from logs",
		"RESULT: CHANGED (shares by pod from body", "changed"} {
		if !strings.Contains(out, s) {
			t.Errorf("terminal output lacks %q:\n%s", s, out)
		}
	}
	if strings.ContainsAny(out, "\x1b\r") {
		t.Errorf("terminal output carries a control character:\n%q", out)
	}

	var page bytes.Buffer
	if err := DiffHTML(&page, d); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	for _, s := range []string{"<!DOCTYPE html>", "<style>", `c1\u001b[31m&lt;b&gt;`, "c1/web-1", "▼ significant", "▲ significant",
		"Holm&#39;s correction over 4 buckets", "rollout\\r\\nv2", "CHANGED (shares by pod from body", "≠ changed", "@media print"} {
		if !strings.Contains(html, s) {
			t.Errorf("HTML lacks %q", s)
		}
	}
	// Self-contained, no script: nothing to load, nothing to run.
	for _, s := range []string{"<script", "src=", "href=", "<link", "@import", "url(", "javascript:", "\x1b", "<b>"} {
		if strings.Contains(strings.ToLower(html), s) {
			t.Errorf("HTML contains %q", s)
		}
	}

	var js bytes.Buffer
	if err := DiffJSON(&js, d); err != nil {
		t.Fatal(err)
	}
	var back DiffReport
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Schema != DiffSchema || !back.Significant || len(back.Dimensions) != 2 || back.Dimensions[1].Buckets[0].Status != assert.ChangeDecrease ||
		back.Dimensions[0].Buckets[0].CI == nil || back.Expectations[1].B != nil {
		t.Errorf("JSON round trip: %s", js.String())
	}
}
