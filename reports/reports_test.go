package reports

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
)

func sample() *Report {
	return &Report{
		Schema: Schema, RunID: "20261130T000000Z-abcdef", Scenario: ScenarioInfo{Name: "demo"},
		Target: "http://127.0.0.1:8080/", Attack: AttackInfo{Summary: attack.Summary{Requests: 100, Elapsed: time.Second}, Mode: "open-loop", KeepAlive: true},
		Metrics:    Metrics{Requests: 100, Successes: 100, Success: 1},
		Dimensions: []Dimension{{Name: "cluster", Attributed: 100, Buckets: []Bucket{{Name: "c1", Count: 60, Share: .6}, {Name: "c2", Count: 40, Share: .4}}}},
		Statistics: StatisticsInfo{Inconclusive: "fail"},
		Expectation: []Expectation{
			{Name: "even <split>", Kind: "split", By: "cluster", Verdict: assert.Fail, Reason: "c1 got 60% & more"},
			{Name: "reached", Kind: "reached", Verdict: assert.Pass, Reason: "ok"},
			{Name: "success", Kind: "successRate", Verdict: assert.Inconclusive, Reason: "need more", RequiredN: 500},
		},
		Verdict: assert.Fail, Gate: assert.Fail, ExitCode: 1,
	}
}

func TestJSONRoundTripAndSchemaCheck(t *testing.T) {
	dir := t.TempDir()
	r := sample()
	p, err := WriteFile(dir, "report.json", func(w io.Writer) error { return WriteJSON(w, r) })
	if err != nil {
		t.Fatal(err)
	}
	back, err := ReadJSON(p)
	if err != nil {
		t.Fatal(err)
	}
	if back.Verdict != assert.Fail || back.Expectation[2].Verdict != assert.Inconclusive || back.Dimensions[0].Buckets[1].Count != 40 {
		t.Errorf("round trip lost data: %+v", back)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".report.json.*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
	bad := filepath.Join(dir, "old.json")
	os.WriteFile(bad, []byte(`{"schema":"mesh-verify.io/report/v0"}`), 0o644)
	if _, err := ReadJSON(bad); err == nil || !strings.Contains(err.Error(), "schema") {
		t.Errorf("old schema accepted: %v", err)
	}
}

func TestJUnitIsValidAndCountsVerdicts(t *testing.T) {
	for _, tc := range []struct {
		inconclusive      string
		failures, skipped int
	}{{"fail", 2, 0}, {"pass", 1, 1}} {
		r := sample()
		r.Statistics.Inconclusive = tc.inconclusive
		var b bytes.Buffer
		if err := JUnit(&b, r); err != nil {
			t.Fatal(err)
		}
		var s junitSuites
		if err := xml.Unmarshal(b.Bytes(), &s); err != nil {
			t.Fatalf("invalid XML: %v\n%s", err, b.String())
		}
		got := s.Suites[0]
		if got.Tests != 3 || got.Failures != tc.failures || got.Skipped != tc.skipped {
			t.Errorf("inconclusive=%s: tests %d failures %d skipped %d", tc.inconclusive, got.Tests, got.Failures, got.Skipped)
		}
		if got.Cases[0].Failure == nil || got.Cases[0].Failure.Message != "c1 got 60% & more" {
			t.Errorf("failure message lost: %+v", got.Cases[0])
		}
	}
}

func TestTerminalAndMarkdown(t *testing.T) {
	var term, md bytes.Buffer
	if err := Terminal(&term, sample()); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, sample()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VERDICT: FAIL", "exit code 1", "even <split>: FAIL", "about 500 requests"} {
		if !strings.Contains(term.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, term.String())
		}
	}
	if !strings.Contains(md.String(), "| c1 ") || !strings.HasPrefix(md.String(), "## mesh-verify: demo") {
		t.Errorf("markdown:\n%s", md.String())
	}
}
