package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
)

// batchScenario is a scenario against url (a real HTTP server answering
// as the tutorial's v1 in c1) that expects the buckets reached: [c1]
// passes, [c2] fails.
func batchScenario(name, url, reached string) string {
	return fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: %s}
clusters: [{name: c1}, {name: c2}]
target: {url: %q}
attack: {requests: 20, rate: 200/s, timeout: 2s}
attribution:
  preset: tutorial
  map: [{from: version, to: cluster, values: {v1: c1}}]
expect: [{reached: {buckets: [%s]}}]
`, name, url, reached)
}

func v1Server(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "I'm callme-service v1")
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// batchDir is the one batch-* directory under out.
func batchDir(t *testing.T, out string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(out, "batch-*"))
	if err != nil || len(m) != 1 {
		t.Fatalf("batch directories under %s: %v (%v)", out, m, err)
	}
	return m[0]
}

// TestRunBatch: several scenarios in one run — a directory's files in
// sorted order, a run directory each, one combined exit code (the worst:
// a setup error or bad input outranks a FAIL), one JSON document on
// stdout, one JUnit file with a suite per scenario, one summary that
// starts with the outcome. Real HTTP servers; no fake.
func TestRunBatch(t *testing.T) {
	t.Parallel()
	url := v1Server(t)
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close() // nothing listens there any more: a setup error (exit 3)
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int
		codes []int
	}{
		{"all pass", map[string]string{"a.yaml": batchScenario("a", url, "c1"), "b.yml": batchScenario("b", url, "c1")}, exitcode.Pass, []int{0, 0}},
		{"a fail", map[string]string{"b.yaml": batchScenario("b", url, "c2"), "a.yaml": batchScenario("a", url, "c1")}, exitcode.Fail, []int{0, 1}},
		{"setup error over fail", map[string]string{"a.yaml": batchScenario("a", url, "c2"), "b.yaml": batchScenario("b", refusedURL, "c1")}, exitcode.Setup, []int{1, 3}},
		{"invalid input over fail", map[string]string{"a.yaml": batchScenario("a", url, "c2"), "b.yaml": "kind: Nonsense\n", "c.yaml": batchScenario("c", url, "c1")}, exitcode.InvalidInput, []int{1, 4, 0}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			scen := filepath.Join(dir, "scenarios")
			if err := os.Mkdir(scen, 0o755); err != nil {
				t.Fatal(err)
			}
			for n, c := range tc.files {
				writeFile(t, scen, n, c)
			}
			writeFile(t, scen, "notes.txt", "not a scenario")
			out := filepath.Join(dir, "runs")
			var stdout, stderr bytes.Buffer
			code := execute([]string{"run", scen, "--out", out, "-q", "-o", "json"}, &stdout, &stderr)
			if code != tc.want {
				t.Errorf("exit %d, want %d\n%s", code, tc.want, stderr.String())
			}
			var b reports.Batch
			dec := json.NewDecoder(&stdout)
			dec.DisallowUnknownFields()
			if err := dec.Decode(&b); err != nil {
				t.Fatalf("stdout is not one batch document: %v\n%s", err, stdout.String())
			}
			if dec.More() {
				t.Errorf("stdout holds more than one JSON document")
			}
			if b.Kind != reports.BatchKind || b.ExitCode != tc.want || b.Outcome != exitcode.Name(tc.want) || len(b.Runs) != len(tc.codes) {
				t.Fatalf("batch %s exit %d outcome %s, %d runs; want exit %d, %d runs", b.Kind, b.ExitCode, b.Outcome, len(b.Runs), tc.want, len(tc.codes))
			}
			prev := ""
			for i, r := range b.Runs {
				if r.Scenario <= prev {
					t.Errorf("runs not in sorted order: %s after %s", r.Scenario, prev)
				}
				prev = r.Scenario
				if r.ExitCode != tc.codes[i] {
					t.Errorf("run %d (%s): exit %d, want %d", i, r.Scenario, r.ExitCode, tc.codes[i])
				}
				switch {
				case r.ExitCode == exitcode.InvalidInput:
					if r.Report != nil || !strings.Contains(r.Error, filepath.Base(r.Scenario)) {
						t.Errorf("run %s: invalid scenario with report %v, error %q (want none, naming the file)", r.Scenario, r.Report != nil, r.Error)
					}
				case r.Report == nil || r.RunDir == "":
					t.Errorf("run %s: no report or run directory", r.Scenario)
				default:
					if _, err := os.Stat(filepath.Join(r.RunDir, "report.json")); err != nil {
						t.Errorf("run %s: %v", r.Scenario, err)
					}
				}
			}
			bd := batchDir(t, out)
			var suites struct {
				Suites []struct {
					Name string `xml:"name,attr"`
				} `xml:"testsuite"`
			}
			if x, err := os.ReadFile(filepath.Join(bd, batchJUnitFile)); err != nil {
				t.Fatal(err)
			} else if err := xml.Unmarshal(x, &suites); err != nil || len(suites.Suites) != len(tc.codes) {
				t.Errorf("junit.xml: %d suites (%v), want one per scenario, %d\n%s", len(suites.Suites), err, len(tc.codes), x)
			}
			md, err := os.ReadFile(filepath.Join(bd, batchSummaryFile))
			if first, _, _ := strings.Cut(string(md), "\n"); err != nil || !strings.Contains(first, exitcode.Name(tc.want)) {
				t.Errorf("summary.md's first line %q does not give the outcome %s (%v)", first, exitcode.Name(tc.want), err)
			}
		})
	}
}

// TestRunBatchTableAndStepSummary: on the terminal the batch ends with
// its outcome and a line per scenario; $GITHUB_STEP_SUMMARY gets one
// summary starting with the outcome, not one per run. Not parallel: it
// sets an environment variable.
func TestRunBatchTableAndStepSummary(t *testing.T) {
	url := v1Server(t)
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", batchScenario("first", url, "c1"))
	b := writeFile(t, dir, "b.yaml", batchScenario("second", url, "c2"))
	summary := filepath.Join(dir, "step-summary.md")
	t.Setenv("GITHUB_STEP_SUMMARY", summary)
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", a, b, "--out", filepath.Join(dir, "runs"), "-q"}, &stdout, &stderr)
	if code != exitcode.Fail {
		t.Errorf("exit %d, want %d\n%s", code, exitcode.Fail, stderr.String())
	}
	if !strings.Contains(stdout.String(), "2 scenarios: FAIL (exit code 1)") || !strings.Contains(stdout.String(), "SCENARIO") {
		t.Errorf("stdout lacks the batch's outcome table:\n%s", stdout.String())
	}
	if !strings.Contains(stderr.String(), "scenario 2 of 2: "+b) {
		t.Errorf("stderr does not say which scenario runs:\n%s", stderr.String())
	}
	got, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(got), "## mesh-verify: 2 scenarios — FAIL · exit code 1\n") {
		t.Errorf("step summary starts %q", strings.SplitN(string(got), "\n", 2)[0])
	}
	if n := strings.Count(string(got), "## mesh-verify: 2 scenarios"); n != 1 {
		t.Errorf("step summary holds %d batch summaries, want 1", n)
	}
}

// TestRunBatchBadArgs: an empty directory and a bad -o are clear errors
// before anything runs.
func TestRunBatchBadArgs(t *testing.T) {
	t.Parallel()
	empty := t.TempDir()
	for _, tc := range []e2e{
		{name: "empty directory", args: []string{"run", empty, "--out", t.TempDir()}, code: exitcode.InvalidInput, stderr: []string{"scenario directory " + empty + ": no .yaml or .yml file"}},
		{name: "bad -o", args: []string{"run", empty, "-o", "xml"}, code: exitcode.InvalidInput, stderr: []string{`--output "xml": want table, json or md`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			tc.check(t, execute(tc.args, &stdout, &stderr), stdout.String(), stderr.String())
		})
	}
}

// TestRunBatchInterrupt: Ctrl-C during the second of three scenarios
// stops it as it stops one run, starts no third, and still writes the
// batch's files naming the one not run; the exit code is 130. The real
// binary, signalled as a terminal would.
func TestRunBatchInterrupt(t *testing.T) {
	t.Parallel()
	url := v1Server(t)
	hangURL, arrived := hangingServer(t)
	dir := t.TempDir()
	files := []string{
		writeFile(t, dir, "1.yaml", batchScenario("one", url, "c1")),
		writeFile(t, dir, "2.yaml", strings.Replace(batchScenario("two", hangURL, "c1"), "requests: 20", "duration: 30s", 1)),
		writeFile(t, dir, "3.yaml", batchScenario("three", url, "c1")),
	}
	out := filepath.Join(dir, "runs")
	// Ctrl-C once a request of the second scenario is in flight.
	cmd, stdout, stderr, done := startUntilArrived(t, arrived, 60*time.Second, append(append([]string{"run"}, files...), "--out", out, "--progress", "plain", "-o", "json")...)
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("the batch did not end within 30 s of Ctrl-C\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitcode.Interrupted {
		t.Errorf("exit %d, want %d\n%s", code, exitcode.Interrupted, stderr.String())
	}
	var b reports.Batch
	if err := json.Unmarshal(stdout.Bytes(), &b); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout.String())
	}
	if len(b.Runs) != 2 || b.Runs[0].ExitCode != exitcode.Pass || b.Runs[1].ExitCode != exitcode.Interrupted || len(b.NotRun) != 1 || b.NotRun[0] != files[2] {
		t.Errorf("batch after Ctrl-C: runs %+v, not run %v; want one pass, one interrupted, %s not run", b.Runs, b.NotRun, files[2])
	}
	if b.Runs[1].Report == nil {
		t.Errorf("the interrupted scenario has no report: what was measured is lost")
	}
	x, err := os.ReadFile(filepath.Join(batchDir(t, out), batchJUnitFile))
	if err != nil || !strings.Contains(string(x), "not run") {
		t.Errorf("junit.xml does not name the scenario not run (%v):\n%s", err, x)
	}
}

// TestRunBatchConverge: --converge gates each scenario of a batch on its
// own; the batch's document holds each gate's final report, which lists
// its attempts, and the exit code combines the gates'.
func TestRunBatchConverge(t *testing.T) {
	t.Parallel()
	url := v1Server(t)
	dir := t.TempDir()
	a := writeFile(t, dir, "a.yaml", batchScenario("a", url, "c1"))
	b := writeFile(t, dir, "b.yaml", batchScenario("b", url, "c2"))
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", a, b, "--converge", "2", "--within", "3s", "--out", filepath.Join(dir, "runs"), "-q", "-o", "json"}, &stdout, &stderr)
	if code != exitcode.Fail {
		t.Errorf("exit %d, want %d (b never passes)\n%s", code, exitcode.Fail, stderr.String())
	}
	var doc reports.Batch
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout.String())
	}
	if len(doc.Runs) != 2 {
		t.Fatalf("%d runs, want 2", len(doc.Runs))
	}
	if r := doc.Runs[0]; r.ExitCode != exitcode.Pass || r.Report == nil || r.Report.Converge == nil || !r.Report.Converge.Converged || len(r.Report.Converge.Attempts) != 2 {
		t.Errorf("a: exit %d, report %+v; want a converged gate of 2 attempts", r.ExitCode, r.Report)
	}
	if r := doc.Runs[1]; r.ExitCode != exitcode.Fail || r.Report == nil || r.Report.Converge == nil || r.Report.Converge.Converged {
		t.Errorf("b: exit %d; want a gate that did not converge", r.ExitCode)
	}
}

// TestValidateDirectory: validate takes a directory as run does, every
// scenario file in it in sorted order, and names the invalid one.
func TestValidateDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, dir, "b.yaml", batchScenario("b", "http://127.0.0.1:1/", "c1"))
	writeFile(t, dir, "a.yml", "kind: Nonsense\n")
	writeFile(t, dir, "README.md", "not a scenario")
	var stdout, stderr bytes.Buffer
	code := execute([]string{"validate", dir, "-o", "json"}, &stdout, &stderr)
	var doc validateDoc
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
		t.Fatalf("stdout: %v\n%s", err, stdout.String())
	}
	if code != exitcode.InvalidInput || doc.Invalid != 1 || len(doc.Files) != 2 ||
		doc.Files[0].File != filepath.Join(dir, "a.yml") || doc.Files[0].Valid || !strings.Contains(doc.Files[0].Error, "a.yml") ||
		doc.Files[1].File != filepath.Join(dir, "b.yaml") || !doc.Files[1].Valid {
		t.Errorf("validate %s: exit %d, %+v; want a.yml invalid (named), b.yaml valid, exit %d", dir, code, doc, exitcode.InvalidInput)
	}
}

// validate -o json names the clusters a scenario's workers attack from
// (what scripts/demo.sh grants RBAC in): every source of attack.sources
// once, attack.from for attack.workers alone, none for a run from this
// process.
func TestValidateWorkerClusters(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		scenario string
		want     []string
	}{
		{"../../scenarios/catalog/cilium-affinity.yaml", []string{"c1", "c2"}},
		{"../../scenarios/catalog/cilium-rebel-base.yaml", []string{"c1"}},
		{"../../scenarios/catalog/skupper-2.yaml", nil},
	} {
		t.Run(filepath.Base(c.scenario), func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := execute([]string{"validate", c.scenario, "-o", "json"}, &stdout, &stderr)
			var doc validateDoc
			if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil {
				t.Fatalf("stdout: %v\n%s", err, stdout.String())
			}
			if code != exitcode.Pass || len(doc.Files) != 1 || !slices.Equal(doc.Files[0].WorkerClusters, c.want) {
				t.Errorf("validate %s: exit %d, %+v; want worker clusters %v", c.scenario, code, doc, c.want)
			}
		})
	}
}

// --junit writes the junit.xml to a fixed path too: one run's (its test
// suite), a batch's (a suite per scenario), parent directories created;
// an empty path or a directory is refused as bad input before anything
// runs. A real HTTP server; no fake.
func TestRunJUnitPath(t *testing.T) {
	t.Parallel()
	url := v1Server(t)
	dir := t.TempDir()
	scen := filepath.Join(dir, "scenarios")
	if err := os.Mkdir(scen, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, scen, "a.yaml", batchScenario("a", url, "c1"))
	writeFile(t, scen, "b.yaml", batchScenario("b", url, "c2"))
	suites := func(path string) []string {
		t.Helper()
		var x struct {
			Suites []struct {
				Name string `xml:"name,attr"`
			} `xml:"testsuite"`
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := xml.Unmarshal(b, &x); err != nil {
			t.Fatalf("%s: %v\n%s", path, err, b)
		}
		var names []string
		for _, s := range x.Suites {
			names = append(names, s.Name)
		}
		return names
	}

	one := filepath.Join(dir, "ci", "reports", "one.xml")
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"run", filepath.Join(scen, "a.yaml"), "--out", filepath.Join(dir, "runs"), "-q", "--junit", one}, &stdout, &stderr); code != exitcode.Pass {
		t.Fatalf("exit %d\n%s", code, stderr.String())
	}
	if got := suites(one); len(got) != 1 || !strings.Contains(stdout.String(), "wrote "+one) {
		t.Errorf("one run's --junit: suites %v; stdout:\n%s", got, stdout.String())
	}

	batch := filepath.Join(dir, "ci", "batch.xml")
	stdout.Reset()
	stderr.Reset()
	if code := execute([]string{"run", scen, "--out", filepath.Join(dir, "runs"), "-q", "--junit", batch}, &stdout, &stderr); code != exitcode.Fail {
		t.Fatalf("exit %d, want 1 (b fails)\n%s", code, stderr.String())
	}
	if got := suites(batch); len(got) != 2 || !strings.Contains(stdout.String(), "wrote "+batch) {
		t.Errorf("a batch's --junit: suites %v, want one per scenario; stdout:\n%s", got, stdout.String())
	}

	for _, bad := range []struct{ path, want string }{
		{"", "--junit: want a file path"},
		{dir, "--junit " + dir + ": a directory"},
	} {
		stderr.Reset()
		code := execute([]string{"run", filepath.Join(scen, "a.yaml"), "--out", filepath.Join(dir, "bad"), "-q", "--junit", bad.path}, &stdout, &stderr)
		if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), bad.want) {
			t.Errorf("--junit %q: exit %d, stderr %q; want 4 and %q", bad.path, code, stderr.String(), bad.want)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "bad")); err == nil {
		t.Error("a refused --junit still ran the scenario")
	}
}
