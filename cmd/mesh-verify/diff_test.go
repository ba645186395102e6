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
	"github.com/mesh-verify/mesh-verify/reports"
)

// splitServer answers on 127.0.0.1 with the cluster that served, c1 for
// the first ofC1 of every `of` requests and c2 for the others, in order of
// arrival: an exact split whatever the connections. The scenario's 31
// workers, a number prime to the period of 10, keep a worker's requests
// from falling on the same place of the period every time, which would
// make its connection sticky.
func splitServer(t *testing.T, ofC1, of int64) string {
	t.Helper()
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := "c2"
		if (n.Add(1)-1)%of < ofC1 {
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
	file := writeFile(t, t.TempDir(), "scenario.yaml", fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: diff-test}
clusters: [{name: c1}, {name: c2}]
target: {url: %q}
attack:
  concurrency: 31
  repetitions: 20
attribution:
  rules: [{body: '(?P<version>v\d) \(pod (?P<pod>\S+) in (?P<cluster>c\d)\)'}]
expect:
  - split: {by: cluster, model: equal}
`, url))
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", file, "--out", out, "--quiet"}, &stdout, &stderr)
	if code != exitPass && code != exitFail && code != exitInconclusive {
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
	for _, c := range []struct {
		name   string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"50/50 then 80/20", []string{"report", "diff", even, skewed}, exitFail,
			[]string{"significant change (cluster from body; pod from body)", "cluster, from body", "c1 ", "c2 ", "50.0%", "80.0%", "20.0%",
				"▲ significant", "▼ significant", "+30.0 pp", "-30.0 pp", "cluster-robust variance", "p (Holm)",
				"split by cluster", "RESULT: significant change"}, nil},
		// The run directory or its report.json, in either order.
		{"80/20 then 50/50, report.json paths", []string{"report", "diff", filepath.Join(skewed, "report.json"), filepath.Join(even, "report.json")}, exitFail,
			[]string{"-30.0 pp", "+30.0 pp"}, nil},
		{"the same split twice", []string{"report", "diff", even, evenAgain}, exitPass,
			[]string{"RESULT: no significant change", "+0.0 pp", "not significant"}, nil},
		{"json", []string{"report", "diff", even, skewed, "--format", "json"}, exitFail, []string{`"schema": "` + reports.DiffSchema + `"`}, nil},
		{"html", []string{"report", "diff", even, skewed, "-f", "html"}, exitFail, []string{"<!DOCTYPE html>", "▲ significant"}, nil},
		// The parent still renders one saved run.
		{"report RUN_DIR", []string{"report", even}, rep0(t, even), []string{"mesh-verify: diff-test", "VERDICT:"}, nil},
		{"report as HTML", []string{"report", even, "--format", "html"}, rep0(t, even), []string{"<!DOCTYPE html>", "diff-test"}, nil},
		{"report as vegeta's plot", []string{"report", even, "--format", "plot"}, rep0(t, even), []string{"<html>", "c1"}, nil},
		{"report into files", []string{"report", even, "--format", "html,json,junit,markdown,plot", "--out", filepath.Join(base, "again")}, rep0(t, even),
			[]string{"again/report.html", "again/report.json", "again/junit.xml", "again/summary.md", "again/plot.html"}, nil},
		{"report table with others", []string{"report", even, "--format", "table,json"}, exitInvalidInput, nil, []string{"--format table prints on stdout"}},
		{"report unknown format", []string{"report", even, "--format", "pdf"}, exitInvalidInput, nil, []string{`--format "pdf"`}},
		{"report with two runs", []string{"report", even, skewed}, exitInvalidInput, nil, []string{"accepts 1 arg"}},
		{"diff with one run", []string{"report", "diff", even}, exitInvalidInput, nil, []string{"accepts 2 arg"}},
		{"unreadable", []string{"report", "diff", even, filepath.Join(base, "missing")}, exitInvalidInput, nil, []string{"read report"}},
		{"other schema", []string{"report", "diff", notReport, even}, exitInvalidInput, nil, []string{"schema"}},
		{"bad confidence", []string{"report", "diff", even, skewed, "--confidence", "95"}, exitInvalidInput, nil, []string{"--confidence 95"}},
		{"bad format", []string{"report", "diff", even, skewed, "-f", "pdf"}, exitInvalidInput, nil, []string{`--format "pdf"`}},
		{"nothing to compare", []string{"report", "diff", empty, even}, exitInconclusive, []string{"nothing could be compared", "not compared: cluster from body"}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(c.args, &stdout, &stderr)
			if code != c.code {
				t.Errorf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout.String(), stderr.String())
			}
			for _, s := range c.stdout {
				if !strings.Contains(stdout.String(), s) {
					t.Errorf("stdout lacks %q:\n%s", s, stdout.String())
				}
			}
			for _, s := range c.stderr {
				if !strings.Contains(stderr.String(), s) {
					t.Errorf("stderr lacks %q:\n%s", s, stderr.String())
				}
			}
		})
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
