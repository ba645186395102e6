package reports

import (
	"bytes"
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

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
			{Name: "success", Kind: "successRate", Verdict: assert.Inconclusive, Reason: "need more", Advice: assert.Advice{RequiredN: 500}},
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

// What the reports add from responses and logs is escaped: a terminal
// escape sequence in a sample body is shown, not run; in Markdown a pipe
// cannot split a table cell and HTML is not HTML.
func TestNewSectionsAreEscaped(t *testing.T) {
	r := sample()
	r.ExitCode = 4
	r.ConfigErrors = []ConfigError{{Subject: "observe callme: logs.match", Message: "the rule matched none of the 12 lines read",
		Samples: []string{"\x1b[31mred\x1b[0m | <b>bold</b>", "bad \xff byte"}}}
	r.Dimensions[0].Buckets = append(r.Dimensions[0].Buckets, Bucket{Name: "c3|x", Errors: 7})
	r.Dimensions[0].ErrorsUnattributed = 2
	r.Reconciliation = []Reconciliation{{Source: "logs", Answered: 600, Counted: 900, Background: 10, Tolerance: 3.2, Status: ReconcileOver,
		Reason: "logs count 900 requests served, more than the 600 the attack sent",
		Pods: []PodReconciliation{{Cluster: "c2", Pod: "callme-v2-0", Workload: "callme", Mode: "window", Lines: 310, BackgroundLines: 30,
			BackgroundSeconds: 30, Rate: 1, Expected: 10, Net: 300}}}}
	r.Rules = []RuleReport{{Source: "logs", Rule: `observe callme logs.match request-id=(?P<request_id>\S+)`, Read: 12, Samples: []string{"Ping: name=callme-service, version=v1"}}}
	var term, md, ju bytes.Buffer
	if err := Terminal(&term, r); err != nil {
		t.Fatal(err)
	}
	if err := Markdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := JUnit(&ju, r); err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{term.String(), md.String(), ju.String()} {
		if strings.ContainsRune(out, '\x1b') || !utf8.ValidString(out) {
			t.Errorf("a control character or invalid byte got through:\n%q", out)
		}
	}
	for _, want := range []string{
		`CONFIGURATION ERROR: observe callme: logs.match: the rule matched none of the 12 lines read`,
		`- "\u001b[31mred\u001b[0m | <b>bold</b>"`, `bad \xff byte`,
		"reconciliation of logs: 900 counted served (10.0 background taken out)",
		"OVER", "30 in 30s (1.00/s)", "ERRORS", "(unattributed)", "did not match:",
	} {
		if !strings.Contains(term.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, term.String())
		}
	}
	for _, want := range []string{`&lt;b&gt;bold&lt;/b&gt;`, `\|`, `c3\|x`, `(?P&lt;request\_id&gt;\\S+)`} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if strings.Contains(md.String(), "<b>") {
		t.Errorf("markdown passes HTML through:\n%s", md.String())
	}
	var s junitSuites
	if err := xml.Unmarshal(ju.Bytes(), &s); err != nil || s.Suites[0].Errors != 1 {
		t.Errorf("junit: %v %+v", err, s)
	}
}

// Issue 9 defect 10: a split's table says what each interval is, the
// evidence quotes real requests and connections, the raw χ² and the
// design-corrected one are labelled apart, and advice limited by
// connections is given in connections.
func TestTerminalLabelsTheStatistics(t *testing.T) {
	c := assert.Counts{Buckets: []string{"c2", "c3"}, N: []int64{900, 600},
		Units: &assert.UnitStats{Units: 5, SumMM: 5 * 300 * 300, SumXX: []float64{3 * 300 * 300, 2 * 300 * 300}, SumXM: []float64{3 * 300 * 300, 2 * 300 * 300}}}
	sampling := assert.Sampling{Balancing: assert.PerConnection, Reason: "clusters declare link costs", FixedConnections: 5}
	res := assert.Split(c, assert.SplitSpec{Expected: map[string]float64{"c2": 0.5, "c3": 0.5}, Sampling: sampling})
	r := sample()
	r.Expectation = []Expectation{{Name: "even", Kind: "split", By: "cluster", Verdict: res.Verdict, Reason: res.Reason, Split: &res, Advice: res.Advice}}
	var term bytes.Buffer
	if err := Terminal(&term, r); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"pass interval: 90% Clopper–Pearson, each end an exact one-sided test at 95%; fail interval: 97.5% Clopper–Pearson, Bonferroni over 2 buckets",
		"n = 1500 requests on 5 connections, worth 5 independent draws (per-connection balancing: clusters declare link costs)",
		"χ² = 60.00 (df 1, p = ", "from the raw counts, every request taken as an independent draw",
		"design-corrected χ² = 0.20 (p = 0.6547), scaled by effective n / n",
		"to settle it: about", "connections (or keepAlive: false)",
	} {
		if !strings.Contains(term.String(), want) {
			t.Errorf("terminal output lacks %q:\n%s", want, term.String())
		}
	}
	if strings.Contains(term.String(), "requests in all") {
		t.Errorf("advice in requests where only connections help:\n%s", term.String())
	}
}

// A dimension of a thousand buckets prints the forty largest and says how
// many it left out; report.json keeps them all.
func TestTablesShowTheLargestBuckets(t *testing.T) {
	d := Dimension{Name: "pod", Source: "body"}
	for i := range 1001 {
		d.Buckets = append(d.Buckets, Bucket{Name: fmt.Sprintf("pod-%04d", i), Count: int64(1 + i%97)})
		d.Attributed += int64(1 + i%97)
	}
	var out strings.Builder
	if err := Terminal(&out, &Report{Dimensions: []Dimension{d}}); err != nil {
		t.Fatal(err)
	}
	rows := strings.Count(out.String(), "pod-0")
	if rows != maxRows || !strings.Contains(out.String(), "(961 more buckets with") || !strings.Contains(out.String(), "pod-0096 ") {
		t.Errorf("%d bucket rows; output:\n%s", rows, out.String())
	}
}

// Issue 13 item 7: text a target controls (a bucket name captured from a
// body, an unattributed sample, a pod name from a log) cannot start a
// heading, a list or an HTML element in summary.md, which GitHub renders
// in the step summary; nor move the terminal's cursor or title.
func TestResponseTextCannotForgeTheSummary(t *testing.T) {
	forged := "x\n## VERDICT: PASS\n<img src=x onerror=alert(1)>\r\x1b]0;owned\x07\x1b[2J"
	r := sample()
	r.Dimensions[0].Buckets = append(r.Dimensions[0].Buckets, Bucket{Name: forged, Count: 1, Share: .01})
	r.Samples = []string{forged}
	r.Expectation[0].Reason = "bucket " + forged + " got 1%"
	var md, term bytes.Buffer
	if err := Markdown(&md, r); err != nil {
		t.Fatal(err)
	}
	if err := Terminal(&term, r); err != nil {
		t.Fatal(err)
	}
	for i, line := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(strings.TrimLeft(line, " >|"), "## VERDICT: PASS") || strings.Contains(line, "<img") {
			t.Errorf("summary.md line %d is the target's markup: %q", i+1, line)
		}
	}
	if !strings.Contains(md.String(), "&lt;img src=x onerror=alert(1)&gt;") {
		t.Errorf("the forged text is not shown escaped:\n%s", md.String())
	}
	for name, out := range map[string]string{"summary.md": md.String(), "terminal": term.String()} {
		if strings.ContainsAny(out, "\x1b\x07\r") {
			t.Errorf("%s passes control characters through: %q", name, out)
		}
	}
}

// The protocol an attack spoke is in the attack row: a gRPC method and
// HTTP/2 are told apart from plain HTTP/1.1.
func TestAttackRowNamesTheProtocol(t *testing.T) {
	for _, tc := range []struct {
		grpc  string
		http2 bool
		want  string
		never string
	}{
		{grpc: "/grpc.health.v1.Health/Check", http2: true, want: "gRPC /grpc.health.v1.Health/Check", never: "HTTP/2"},
		{http2: true, want: "HTTP/2", never: "gRPC"},
		{never: "HTTP/2"},
	} {
		r := sample()
		r.Attack.GRPC, r.Attack.HTTP2 = tc.grpc, tc.http2
		for name, render := range map[string]func(io.Writer, *Report) error{"terminal": Terminal, "markdown": Markdown, "html": HTML} {
			var b bytes.Buffer
			if err := render(&b, r); err != nil {
				t.Fatal(err)
			}
			out := b.String()
			if name == "html" {
				out = regexp.MustCompile(`<[^>]*>`).ReplaceAllString(out, "")
			}
			if tc.want != "" && !strings.Contains(out, tc.want) {
				t.Errorf("%s output lacks %q:\n%s", name, tc.want, out)
			}
			if strings.Contains(out, tc.never) {
				t.Errorf("%s output has %q (grpc %q, http2 %v)", name, tc.never, tc.grpc, tc.http2)
			}
		}
	}
}

// Every file WriteFile makes has the mode a plain create gives under the
// process's umask, as results.bin has: not 0600 while results.bin is 0644.
func TestWriteFileHonoursTheUmask(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ref := filepath.Join(dir, "reference")
	f, err := os.OpenFile(ref, os.O_CREATE|os.O_WRONLY, FileMode)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	want, err := os.Stat(ref)
	if err != nil {
		t.Fatal(err)
	}
	p, err := WriteFile(dir, "report.json", func(w io.Writer) error { return WriteJSON(w, sample()) })
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if got.Mode().Perm() != want.Mode().Perm() {
		t.Errorf("report.json is %v, a file created under the same umask %v", got.Mode().Perm(), want.Mode().Perm())
	}
}
