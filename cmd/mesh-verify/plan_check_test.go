package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/kube"
)

// binary is the mesh-verify built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	// In-process runs name this test binary as the exec plugin wrapper
	// (kube.ExecWrapper): answer as mesh-verify would.
	if kube.IsExecWrapperCall(os.Args) {
		return kube.RunExecWrapper(os.Args[2:], os.Stdin, os.Stdout, os.Stderr)
	}
	if os.Getenv("MV_INTERRUPT_CHILD") == "1" {
		return m.Run() // a child of TestThirdInterruptKills needs no binary
	}
	dir, err := os.MkdirTemp("", "mesh-verify-e2e")
	if err != nil {
		fmt.Println(err)
		return 1
	}
	defer os.RemoveAll(dir)
	binary = filepath.Join(dir, "mesh-verify")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		fmt.Printf("go build: %v\n%s", err, out)
		return 1
	}
	// The lab program beside the binary (`mesh-verify lab` runs it) and,
	// for the in-process runs, on PATH.
	if out, err := exec.Command("go", "build", "-o", filepath.Join(dir, labProgram), "../../lab/cmd/mesh-verify-lab").CombinedOutput(); err != nil {
		fmt.Printf("go build ../../lab/cmd/mesh-verify-lab (the lab module, through go.work): %v\n%s", err, out)
		return 1
	}
	if err := os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH")); err != nil {
		fmt.Println(err)
		return 1
	}
	return m.Run()
}

type e2e struct {
	name   string
	args   []string
	code   int
	stdout []string // substrings
	stderr []string
}

func (c e2e) run(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(binary, c.args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	c.check(t, code, out.String(), errb.String())
	return out.String()
}

// check holds a command's exit code and outputs to the case.
func (c e2e) check(t *testing.T, code int, stdout, stderr string) {
	t.Helper()
	if code != c.code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, stdout, stderr)
	}
	for _, s := range c.stdout {
		if !strings.Contains(stdout, s) {
			t.Errorf("stdout does not contain %q:\n%s", s, stdout)
		}
	}
	for _, s := range c.stderr {
		if !strings.Contains(stderr, s) {
			t.Errorf("stderr does not contain %q:\n%s", s, stderr)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckE2E(t *testing.T) {
	dir := t.TempDir()
	okCSV := writeFile(t, dir, "ok.csv", "bucket,count\nc2,5000\n# a comment\nc3,5000\n")
	badCSV := writeFile(t, dir, "bad.csv", "bucket,count\nc2,480\nc3,lots\n")
	okJSON := writeFile(t, dir, "counts.json", `{"c2": 700, "c3": 300}`)
	badJSON := writeFile(t, dir, "bad.json", "{\n  \"c2\": 480,\n  \"c3\": 1.5\n}\n")
	hugeCSV := writeFile(t, dir, "huge.csv", "bucket,count\n"+strings.Repeat("# padding\n", 120_000))

	for _, c := range []e2e{
		{"pass", []string{"check", "--counts", "c2=5000,c3=5000", "--expect", "equal"}, exitcode.Pass,
			[]string{"BUCKET", "PASS INTERVAL", "pass interval: 90% Clopper–Pearson", "fail interval: 97.5% Clopper–Pearson", "verdict: PASS"}, nil},
		// Issue 9 defect 4: 5 of 5 on one side is what a correct 50/50
		// mesh does 6.25% of the time, more than α: not a FAIL.
		{"c2=5,c3=0 is inconclusive", []string{"check", "--counts", "c2=5,c3=0", "--expect", "equal"}, exitcode.Inconclusive,
			[]string{"verdict: INCONCLUSIVE"}, nil},
		// Counts over 5 keep-alive connections of a per-connection balancer
		// are 5 draws: the advice is connections, not requests.
		{"per connection", []string{"check", "--counts", "c2=600,c3=400", "--expect", "equal", "--balancing", "connection", "--connections", "5"}, exitcode.Inconclusive,
			[]string{"1000 requests on 5 connections, worth 5 independent draws", "connections would", "design-corrected χ² = 0.20"}, nil},
		{"bad balancing", []string{"check", "--counts", "c2=1", "--expect", "equal", "--balancing", "pod"}, exitcode.InvalidInput, nil, []string{`balancing "pod"`}},
		{"bad connections", []string{"check", "--counts", "c2=1", "--expect", "equal", "--connections", "-2"}, exitcode.InvalidInput, nil, []string{"--connections -2"}},
		{"fail", []string{"check", "--counts", "c2=700,c3=300", "--weights", "c2=1,c3=1", "--margin", "5%"}, exitcode.Fail,
			[]string{"verdict: FAIL", "c2 got 70%"}, nil},
		{"inconclusive", []string{"check", "--counts", "c2=48,c3=52", "--expect", "equal", "--margin", "0.05"}, exitcode.Inconclusive,
			[]string{"verdict: INCONCLUSIVE", "requests in total would settle it"}, nil},
		{"clopper-pearson from csv with header", []string{"check", "--file", okCSV, "--expect", "equal", "--interval", "clopper-pearson"}, exitcode.Pass,
			[]string{"verdict: PASS"}, nil},
		{"unexpected bucket fails", []string{"check", "--counts", "c2=450,c3=450,c4=100", "--weights", "c2=1,c3=1"}, exitcode.Fail,
			[]string{"bucket c4 got 10%", "χ² infinite"}, nil},
		{"bad --counts item", []string{"check", "--counts", "c2=70,c3=x", "--expect", "equal"}, exitcode.InvalidInput,
			nil, []string{`"c3=x"`}},
		{"bad csv line", []string{"check", "--file", badCSV, "--expect", "equal"}, exitcode.InvalidInput,
			nil, []string{badCSV + ":3:", `"lots"`}},
		{"bad json line", []string{"check", "--file", badJSON, "--expect", "equal"}, exitcode.InvalidInput,
			nil, []string{badJSON + ":3:", `"c3"`}},
		{"no expectation", []string{"check", "--counts", "c2=1"}, exitcode.InvalidInput, nil, []string{"--expect equal or --weights"}},
		{"ambiguous margin", []string{"check", "--counts", "c2=1", "--expect", "equal", "--margin", "5"}, exitcode.InvalidInput, nil, []string{"ambiguous"}},
		{"unknown interval", []string{"check", "--counts", "c2=1", "--expect", "equal", "--interval", "wald"}, exitcode.InvalidInput, nil, []string{"wald"}},
		// Sums of counts near int64's limit overflowed into a negative n.
		{"counts beyond a trillion", []string{"check", "--counts", "c2=4611686018427387904,c3=4611686018427387904", "--expect", "equal"}, exitcode.InvalidInput,
			nil, []string{`"c2=4611686018427387904"`, "from 0 to 1000000000000"}},
		{"counts at the bound", []string{"check", "--counts", "c2=1000000000000,c3=1000000000000", "--expect", "equal"}, exitcode.Pass, []string{"verdict: PASS"}, nil},
		{"weight 1e308", []string{"check", "--counts", "c2=5,c3=5", "--weights", "c2=1e308,c3=1"}, exitcode.InvalidInput, nil, []string{"from 0 to 1e+09"}},
		{"huge counts file", []string{"check", "--file", hugeCSV, "--expect", "equal"}, exitcode.InvalidInput, nil, []string{"larger than 1 MiB, the limit of a counts file"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}

	t.Run("json", func(t *testing.T) {
		out := e2e{args: []string{"check", "--file", okJSON, "--expect", "equal", "--json"}, code: exitcode.Fail}.run(t)
		var doc struct {
			Verdict string `json:"verdict"`
			N       int64  `json:"n"`
			Buckets []struct {
				Bucket string `json:"bucket"`
			} `json:"buckets"`
			Model struct {
				Model string `json:"model"`
			} `json:"model"`
		}
		if err := json.Unmarshal([]byte(out), &doc); err != nil {
			t.Fatalf("--json output is not JSON: %v\n%s", err, out)
		}
		if doc.Verdict != "FAIL" || doc.N != 1000 || len(doc.Buckets) != 2 || doc.Buckets[0].Bucket != "c2" || doc.Model.Model != "equal" {
			t.Errorf("json document %+v", doc)
		}
	})
}

func TestPlanE2E(t *testing.T) {
	// plan prints what the planner computes; the planner's numbers are
	// checked against exact binomial sums in assert/plan_test.go.
	half := assert.SplitSpec{Expected: map[string]float64{"c2": 0.5, "c3": 0.5}}
	n := strconv.FormatInt(assert.RequiredDraws(half), 10)
	for _, c := range []e2e{
		{"equal", []string{"plan", "--expect", "equal", "--buckets", "c2,c3"}, exitcode.Pass, []string{n + " requests", "PASS with probability exact 0.8"}, nil},
		{"interval", []string{"plan", "--weights", "c2=1,c3=1", "--interval", "clopper-pearson"}, exitcode.Pass, []string{n + " requests"}, nil},
		// Issue 9 defects 2 and 9: under per-connection balancing the draws
		// are connections, and 5 keep-alive connections are not enough.
		{"connections", []string{"plan", "--weights", "c2=1,c3=1", "--balancing", "connection", "--connections", "5"}, exitcode.Pass,
			[]string{n + " connections", "the attack holds 5 keep-alive connections: NOT enough: needs " + n + " connections (or keepAlive: false"}, nil},
		{"looks", []string{"plan", "--expect", "equal", "--buckets", "c2,c3", "--looks", "4"}, exitcode.Pass,
			[]string{"O'Brien-Fleming", "LOOK", "| 4    |"}, nil},
		{"equal without buckets", []string{"plan", "--expect", "equal"}, exitcode.InvalidInput, nil, []string{"--buckets"}},
		{"bad weights", []string{"plan", "--weights", "c2=-1,c3=1"}, exitcode.InvalidInput, nil, []string{`weight "-1": want a number from 0 to 1e+09`}},
		{"bad looks", []string{"plan", "--expect", "equal", "--buckets", "a,b", "--looks", "0"}, exitcode.InvalidInput, nil, []string{"--looks"}},
		{"bad interval", []string{"plan", "--expect", "equal", "--buckets", "a,b", "--interval", "wald"}, exitcode.InvalidInput, nil, []string{"wald"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}

func TestPlanScenarioE2E(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "apiVersion: mesh-verify.io/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nattack: {rate: fast}\n")
	// The scenario's confidence 0.99 with 5 looks: the last look's level.
	lastOf5 := strconv.FormatFloat(100*assert.SpendingLevels(5, 0.99)[4], 'g', 6, 64) + "%"
	for _, c := range []e2e{
		// siege -c 5 -r 200 with keep-alive through Skupper's router: 5
		// connections, each one draw; the split needs hundreds.
		{"siege-sized run is too small", []string{"plan", "../../scenarios/testdata/good/closed-loop-siege.yaml"}, exitcode.Pass,
			[]string{" connections (expected c2 50%", "the attack holds 5 keep-alive connections: NOT enough", "or keepAlive: false"}, nil},
		// Issue 9 defect 6: the scenario's interval, confidence, looks and
		// every kind of expectation are planned, not only splits.
		{"early stopping plans for the last look", []string{"plan", "../../scenarios/testdata/good/open-loop-rate.yaml"}, exitcode.Pass,
			[]string{"the attack sends 20000 requests: enough", "LOOK", "FAIL is judged with clopper-pearson intervals",
				"only cluster c1: ", "success rate ≥ 99.5%: ", lastOf5 + " confidence"}, nil},
		{"invalid scenario", []string{"plan", bad}, exitcode.InvalidInput, nil, []string{bad + ":4:"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}
