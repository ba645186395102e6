package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binary is the mesh-verify built once for the end-to-end tests.
var binary string

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
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
	if code != c.code {
		t.Errorf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", code, c.code, out.String(), errb.String())
	}
	for _, s := range c.stdout {
		if !strings.Contains(out.String(), s) {
			t.Errorf("stdout does not contain %q:\n%s", s, out.String())
		}
	}
	for _, s := range c.stderr {
		if !strings.Contains(errb.String(), s) {
			t.Errorf("stderr does not contain %q:\n%s", s, errb.String())
		}
	}
	return out.String()
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

	for _, c := range []e2e{
		{"pass", []string{"check", "--counts", "c2=5000,c3=5000", "--expect", "equal"}, exitPass,
			[]string{"BUCKET", "49.02% - 50.98%", "verdict: PASS"}, nil},
		{"fail", []string{"check", "--counts", "c2=700,c3=300", "--weights", "c2=1,c3=1", "--margin", "5%"}, exitFail,
			[]string{"verdict: FAIL", "c2 got 70%"}, nil},
		{"inconclusive", []string{"check", "--counts", "c2=480,c3=520", "--expect", "equal", "--margin", "0.05"}, exitInconclusive,
			[]string{"verdict: INCONCLUSIVE", "requests in total would settle it"}, nil},
		{"clopper-pearson from csv with header", []string{"check", "--file", okCSV, "--expect", "equal", "--interval", "clopper-pearson"}, exitPass,
			[]string{"verdict: PASS"}, nil},
		{"unexpected bucket fails", []string{"check", "--counts", "c2=450,c3=450,c4=100", "--weights", "c2=1,c3=1"}, exitFail,
			[]string{"bucket c4 got 10%", "chi-square infinite"}, nil},
		{"bad --counts item", []string{"check", "--counts", "c2=70,c3=x", "--expect", "equal"}, exitInvalidInput,
			nil, []string{`"c3=x"`}},
		{"bad csv line", []string{"check", "--file", badCSV, "--expect", "equal"}, exitInvalidInput,
			nil, []string{badCSV + ":3:", `"lots"`}},
		{"bad json line", []string{"check", "--file", badJSON, "--expect", "equal"}, exitInvalidInput,
			nil, []string{badJSON + ":3:", `"c3"`}},
		{"no expectation", []string{"check", "--counts", "c2=1"}, exitInvalidInput, nil, []string{"--expect equal or --weights"}},
		{"ambiguous margin", []string{"check", "--counts", "c2=1", "--expect", "equal", "--margin", "5"}, exitInvalidInput, nil, []string{"ambiguous"}},
		{"unknown interval", []string{"check", "--counts", "c2=1", "--expect", "equal", "--interval", "wald"}, exitInvalidInput, nil, []string{"wald"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}

	t.Run("json", func(t *testing.T) {
		out := e2e{args: []string{"check", "--file", okJSON, "--expect", "equal", "--json"}, code: exitFail}.run(t)
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
	for _, c := range []e2e{
		// DESIGN.md §4 formula by hand: (1.959964+1.281552)²·0.25/0.05² = 1050.7.
		{"equal", []string{"plan", "--expect", "equal", "--buckets", "c2,c3"}, exitPass, []string{"1051 requests"}, nil},
		{"design effect", []string{"plan", "--weights", "c2=1,c3=1", "--design-effect", "2.5"}, exitPass, []string{"2627 requests"}, nil},
		{"looks", []string{"plan", "--expect", "equal", "--buckets", "c2,c3", "--looks", "4"}, exitPass,
			[]string{"O'Brien-Fleming", "LOOK", "| 4    |"}, nil},
		{"equal without buckets", []string{"plan", "--expect", "equal"}, exitInvalidInput, nil, []string{"--buckets"}},
		{"bad weights", []string{"plan", "--weights", "c2=-1,c3=1"}, exitInvalidInput, nil, []string{"negative weight -1"}},
		{"bad looks", []string{"plan", "--expect", "equal", "--buckets", "a,b", "--looks", "0"}, exitInvalidInput, nil, []string{"--looks"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}

func TestPlanScenarioE2E(t *testing.T) {
	dir := t.TempDir()
	bad := writeFile(t, dir, "bad.yaml", "apiVersion: mesh-verify.io/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nattack: {rate: fast}\n")
	for _, c := range []e2e{
		// siege -c 5 -r 200 sends 1000 requests; ±5 points at 95%/80% on a 50/50 split needs 1051.
		{"siege-sized run is too small", []string{"plan", "../../scenarios/testdata/good/closed-loop-siege.yaml"}, exitPass,
			[]string{"1051 requests", "the attack sends 1000 requests: NOT enough"}, nil},
		{"early stopping plans for the last look", []string{"plan", "../../scenarios/testdata/good/open-loop-rate.yaml"}, exitPass,
			[]string{"the attack sends 20000 requests: enough", "LOOK"}, nil},
		{"invalid scenario", []string{"plan", bad}, exitInvalidInput, nil, []string{bad + ":4:"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}
