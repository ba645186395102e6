package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/splittest"
	"github.com/mesh-verify/mesh-verify/reports"
)

// splitServer answers on 127.0.0.1 with the cluster that served: of
// every `of` requests in order of arrival, ofC1 go to c1 and the others to
// c2 (splittest.Blocks: exact, at shuffled places, so no connection is
// sticky; a fixed cycle left an equal split INCONCLUSIVE in CI).
func splitServer(t *testing.T, ofC1, of int64) string {
	t.Helper()
	blocks := splittest.NewBlocks(int(ofC1), int(of))
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := "c2"
		if blocks.Next() {
			c = "c1"
		}
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// runScenarioTo really runs a scenario against url with `mesh-verify run`
// and returns the run's directory.
func runScenarioTo(t *testing.T, url, out string) string {
	t.Helper()
	return runScenarioWith(t, url, out, "  concurrency: 31\n  repetitions: 20", "  - split: {by: cluster, model: equal}")
}

// runScenarioWith is runScenarioTo with its own attack and expectations.
func runScenarioWith(t *testing.T, url, out, attack, expect string) string {
	t.Helper()
	file := writeFile(t, t.TempDir(), "scenario.yaml", fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: diff-test}
clusters: [{name: c1}, {name: c2}]
target: {url: %q}
attack:
%s
attribution:
  rules: [{body: '(?P<version>v\d) \(pod (?P<pod>\S+) in (?P<cluster>c\d)\)'}]
expect:
%s
`, url, attack, expect))
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", file, "--out", out, "--quiet"}, &stdout, &stderr)
	if code != exitcode.Pass && code != exitcode.Fail && code != exitcode.Inconclusive {
		t.Fatalf("run: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
	dirs, _ := filepath.Glob(filepath.Join(out, "*", "report.json"))
	if len(dirs) != 1 {
		t.Fatalf("run wrote %v", dirs)
	}
	return filepath.Dir(dirs[0])
}

func TestReportDiff(t *testing.T) {
	base := t.TempDir()
	even := runScenarioTo(t, splitServer(t, 5, 10), filepath.Join(base, "even"))
	evenAgain := runScenarioTo(t, splitServer(t, 5, 10), filepath.Join(base, "even-again"))
	skewed := runScenarioTo(t, splitServer(t, 8, 10), filepath.Join(base, "skewed"))
	// The keep-alive connections of 31 workers carried the requests, so the
	// comparison is cluster-robust, not one draw a request.
	rep, err := reports.ReadJSON(filepath.Join(skewed, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if d := rep.Dimensions[0]; d.Name != "cluster" || d.Sums == nil || d.Sums.Units < 2 || d.Sums.SumMM <= float64(d.Attributed) ||
		d.Buckets[0].Count != 496 || d.Buckets[1].Count != 124 {
		t.Fatalf("the skewed run's cluster dimension: %+v", d)
	}

	notReport := writeFile(t, base, "other.json", `{"schema":"mesh-verify.io/report/v0"}`)
	empty := writeFile(t, base, "empty.json", `{"schema":"`+reports.Schema+`","runId":"empty","dimensions":[]}`)
	for _, c := range []e2e{
		{"50/50 then 80/20", []string{"report", "diff", even, skewed}, exitcode.Fail,
			[]string{"CHANGED (shares by cluster from body; shares by pod from body; split by cluster (equal))", "cluster, from body", "c1 ", "c2 ", "50.0%", "80.0%", "20.0%",
				"▲ significant", "▼ significant", "+30.0 pp", "-30.0 pp", "cluster-robust variance", "p (Holm)",
				"split by cluster", "≠ changed: c1 50% → 80%", "RESULT: CHANGED", "regression: split by cluster (equal) has a worse verdict in run B"}, nil},
		// The run directory or its report.json, in either order.
		{"80/20 then 50/50, report.json paths", []string{"report", "diff", filepath.Join(skewed, "report.json"), filepath.Join(even, "report.json")}, exitcode.Fail,
			[]string{"-30.0 pp", "+30.0 pp"}, nil},
		{"the same split twice", []string{"report", "diff", even, evenAgain}, exitcode.Pass,
			[]string{"RESULT: no change within the margins", "+0.0 pp", "not significant", "= no change: every share is shown within ±10 points"}, nil},
		{"json", []string{"report", "diff", even, skewed, "--format", "json"}, exitcode.Fail, []string{`"schema": "` + reports.DiffSchema + `"`}, nil},
		{"html", []string{"report", "diff", even, skewed, "-f", "html"}, exitcode.Fail, []string{"<!DOCTYPE html>", "▲ significant"}, nil},
		// The parent still renders one saved run.
		{"report RUN_DIR", []string{"report", even}, rep0(t, even), []string{"mesh-verify: diff-test", "VERDICT:"}, nil},
		{"report as HTML", []string{"report", even, "--format", "html"}, rep0(t, even), []string{"<!DOCTYPE html>", "diff-test"}, nil},
		{"report as vegeta's plot", []string{"report", even, "--format", "plot"}, rep0(t, even), []string{"<html>", "c1"}, nil},
		{"report into files", []string{"report", even, "--format", "html,json,junit,markdown,plot", "--out", filepath.Join(base, "again")}, rep0(t, even),
			[]string{"again/report.html", "again/report.json", "again/junit.xml", "again/summary.md", "again/plot.html"}, nil},
		{"report table with others", []string{"report", even, "--format", "table,json"}, exitcode.InvalidInput, nil, []string{"--format table prints on stdout"}},
		{"report unknown format", []string{"report", even, "--format", "pdf"}, exitcode.InvalidInput, nil, []string{`--format "pdf"`}},
		{"report with two runs", []string{"report", even, skewed}, exitcode.InvalidInput, nil, []string{"accepts 1 arg"}},
		{"diff with one run", []string{"report", "diff", even}, exitcode.InvalidInput, nil, []string{"accepts 2 arg"}},
		{"unreadable", []string{"report", "diff", even, filepath.Join(base, "missing")}, exitcode.InvalidInput, nil, []string{"read report"}},
		{"other schema", []string{"report", "diff", notReport, even}, exitcode.InvalidInput, nil, []string{"schema"}},
		{"bad confidence", []string{"report", "diff", even, skewed, "--confidence", "95"}, exitcode.InvalidInput, nil, []string{"--confidence 95"}},
		{"bad format", []string{"report", "diff", even, skewed, "-f", "pdf"}, exitcode.InvalidInput, nil, []string{`--format "pdf"`}},
		{"nothing to compare", []string{"report", "diff", empty, even}, exitcode.Inconclusive, []string{"UNTESTABLE: nothing could be compared", "not compared: cluster from body"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) { c.inProcess(t) })
	}

	// The JSON names the buckets with their counts and the test's verdict.
	var stdout, stderr bytes.Buffer
	execute([]string{"report", "diff", even, skewed, "-f", "json"}, &stdout, &stderr)
	var d reports.DiffReport
	if err := json.Unmarshal(stdout.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	cl := d.Dimensions[0]
	if cl.Name != "cluster" || cl.A.Variance != assert.VarianceClustered || len(cl.Buckets) != 2 ||
		cl.Buckets[0].Bucket != "c1" || cl.Buckets[0].CountA != 310 || cl.Buckets[0].CountB != 496 || cl.Buckets[0].Status != assert.ChangeIncrease ||
		!(cl.Buckets[0].AdjustedP < 0.001) {
		t.Errorf("cluster comparison: %+v", cl)
	}
}

// inProcess runs the case through execute, in this process, and checks
// its exit code and outputs.
func (c e2e) inProcess(t *testing.T) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	c.check(t, execute(c.args, &stdout, &stderr), stdout.String(), stderr.String())
}

// rep0 is the exit code a saved run was recorded with.
func rep0(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		ExitCode int `json:"exitCode"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r.ExitCode
}

// stickyServer answers with c1 or c2 by the connection a request came
// over (its client port), as an L4 balancer pinning connections would.
func stickyServer(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, port, _ := strings.Cut(r.RemoteAddr, ":")
		c := "c1"
		if len(port) > 0 && (port[len(port)-1]-'0')%2 == 1 {
			c = "c2"
		}
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// failingServer answers like splitServer(1, 2) but fails every
// failEvery-th request with a 500 (0: never).
func failingServer(t *testing.T, failEvery int64) string {
	t.Helper()
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		if failEvery > 0 && i%failEvery == 0 {
			http.Error(w, "broken", http.StatusInternalServerError)
			return
		}
		c := []string{"c1", "c2"}[i%2]
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// Issues 22 and 23: a diff you can gate on. Two runs over 2 sticky
// keep-alive connections are worth 2 draws each: untestable, exit 2 (not
// "no change", not "nothing compared" while the tables show numbers); a
// success rate from 100% to 50% is a change and a regression, exit 1;
// negative or overflowing counts are refused naming the field, exit 4.
func TestReportDiffGate(t *testing.T) {
	base := t.TempDir()
	sticky := stickyServer(t)
	stickyA := runScenarioWith(t, sticky, filepath.Join(base, "sticky-a"), "  concurrency: 2\n  repetitions: 200", "  - split: {by: cluster, model: equal}")
	stickyB := runScenarioWith(t, sticky, filepath.Join(base, "sticky-b"), "  concurrency: 2\n  repetitions: 200", "  - split: {by: cluster, model: equal}")
	rate := "  - successRate: {atLeast: 99%}"
	healthy := runScenarioWith(t, failingServer(t, 0), filepath.Join(base, "healthy"), "  concurrency: 31\n  repetitions: 20", rate)
	broken := runScenarioWith(t, failingServer(t, 2), filepath.Join(base, "broken"), "  concurrency: 31\n  repetitions: 20", rate)

	report := func(name string, edit func(r map[string]any)) string {
		b, err := os.ReadFile(filepath.Join(healthy, "report.json"))
		if err != nil {
			t.Fatal(err)
		}
		var r map[string]any
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		edit(r)
		out, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return writeFile(t, base, name, string(out))
	}
	bucket := func(r map[string]any) map[string]any {
		return r["dimensions"].([]any)[0].(map[string]any)["buckets"].([]any)[0].(map[string]any)
	}
	negative := report("negative.json", func(r map[string]any) { bucket(r)["count"] = -5 })
	overflow := report("overflow.json", func(r map[string]any) {
		bs := r["dimensions"].([]any)[0].(map[string]any)["buckets"].([]any)
		for _, b := range bs {
			b.(map[string]any)["count"] = int64(1) << 62
		}
	})
	for _, c := range []e2e{
		{"2 sticky connections", []string{"report", "diff", stickyA, stickyB}, exitcode.Inconclusive,
			[]string{"RESULT: UNTESTABLE", "? untestable: the runs are worth ", "too few to show either a change or none"}, nil},
		{"success rate 100% then 50%", []string{"report", "diff", healthy, broken}, exitcode.Fail,
			[]string{"RESULT: CHANGED (", "success rate ≥ 99%)", "regression: success rate ≥ 99% has a worse verdict in run B", "≠ changed: successRate 100% → 50%"}, nil},
		{"success rate 100% twice", []string{"report", "diff", healthy, healthy}, exitcode.Pass, []string{"RESULT: no change within the margins"}, nil},
		{"negative count", []string{"report", "diff", healthy, negative}, exitcode.InvalidInput, nil,
			[]string{"run B", "dimensions[0] (cluster from body).buckets[0] (c", "count -5, errors 0, want 0 or more"}},
		{"overflowing counts", []string{"report", "diff", overflow, healthy}, exitcode.InvalidInput, nil,
			[]string{"run A", ".count: the counts add up past 9223372036854775807"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.inProcess(t) })
	}
}
