package reports

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/internal/schematest"
)

func convergeSample() *Report {
	r := sample()
	start := time.Date(2026, 12, 1, 4, 0, 0, 0, time.UTC)
	r.Converge = &Converge{Need: 2, Within: 90 * time.Second, Reason: "1 consecutive passes of 2 when --within 1m30s ended, after 3 attempts",
		Attempts: []Attempt{
			{RunID: "20261201T040000Z-aaaaaa", Start: start, Duration: 2100 * time.Millisecond, Verdict: assert.Fail, ExitCode: 1, Reason: "half | <b>: FAIL: v1 got 100%"},
			{RunID: "20261201T040003Z-bbbbbb", Start: start.Add(3 * time.Second), Duration: 2 * time.Second, Verdict: assert.Inconclusive, ExitCode: 3, Reason: "setup: cannot reach target"},
			{RunID: "20261201T040006Z-cccccc", Start: start.Add(6 * time.Second), Duration: 2 * time.Second, Verdict: assert.Pass},
		}}
	return r
}

// renderAll renders r in the terminal, Markdown, HTML and JSON formats.
func renderAll(t *testing.T, r *Report) (term, md, html, js *bytes.Buffer) {
	t.Helper()
	term, md, html, js = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	for _, f := range []func() error{
		func() error { return Terminal(term, r) },
		func() error { return Markdown(md, r) },
		func() error { return HTML(html, r) },
		func() error { return WriteJSON(js, r) },
	} {
		if err := f(); err != nil {
			t.Fatal(err)
		}
	}
	return term, md, html, js
}

// Every attempt shows in the terminal, Markdown and HTML output, its
// reason escaped, and report.json carries them as the schema says.
func TestConvergeAttemptsRendered(t *testing.T) {
	r := convergeSample()
	term, md, html, js := renderAll(t, r)
	for name, out := range map[string]string{"terminal": term.String(), "markdown": md.String(), "html": html.String()} {
		for _, want := range []string{"did not converge", "20261201T040000Z-aaaaaa", "20261201T040003Z-bbbbbb", "20261201T040006Z-cccccc", "04:00:03", "INCONCLUSIVE", "setup: cannot reach target"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s output lacks %q:\n%s", name, want, out)
			}
		}
	}
	if strings.Contains(html.String(), "<b>: FAIL") || strings.Contains(md.String(), "half | <b>") {
		t.Errorf("an attempt's reason is not escaped")
	}
	sch, err := schematest.Compile("report.schema.json", JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	if err := schematest.Validate(sch, js.Bytes()); err != nil {
		t.Errorf("report.json with attempts does not match the schema: %v", err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Converge == nil || len(back.Converge.Attempts) != 3 || back.Converge.Attempts[1].ExitCode != 3 {
		t.Errorf("round trip: %+v", back.Converge)
	}
	var table bytes.Buffer
	if err := ConvergeTable(&table, r.Converge); err != nil || !strings.Contains(table.String(), "20261201T040006Z-cccccc") || strings.Contains(table.String(), "VERDICT:") {
		t.Errorf("ConvergeTable: %v\n%s", err, table.String())
	}
}

// A gate that judged one run's windows shows its mode, looks, level and
// why the attack stopped in every output, its reason escaped, without an
// attempts table; report.json matches the schema.
func TestConvergeWindowsRendered(t *testing.T) {
	r := sample()
	at, conv, ttc := 6500*time.Millisecond, 22*time.Second, 15500*time.Millisecond
	r.Converge = &Converge{Need: 3, Within: time.Minute, Mode: ConvergeWindows, Window: 4 * time.Second, Looks: 15, Level: 1 - 0.05/15,
		Judged: 5, Stopped: "converged", LastChange: 3, ChangeAt: &at, ConvergedAt: &conv, TimeToConverge: &ttc, Windows: []int{4, 5, 6},
		Converged: true, Done: true, Reason: "converge gate: 3 consecutive windows PASS after <b>the change</b> \x1b[31m"}
	term, md, html, js := renderAll(t, r)
	for name, out := range map[string]string{"terminal": term.String(), "markdown": md.String(), "html": html.String()} {
		for _, want := range []string{"3 consecutive windows passing within 1m0s", "windows of 4s", "15 looks", "99.667%", "stopped: converged", "converged"} {
			if !strings.Contains(out, want) {
				t.Errorf("%s output lacks %q:\n%s", name, want, out)
			}
		}
		if strings.Contains(out, "<th>attempt</th>") || strings.Contains(out, "ATTEMPT") {
			t.Errorf("%s output has an attempts table for a gate without attempts", name)
		}
	}
	if strings.Contains(html.String(), "<b>the change</b>") || strings.Contains(md.String(), "<b>the change</b>") || strings.Contains(term.String(), "\x1b[31m") {
		t.Errorf("the reason (which may name objects from the cluster) is not escaped in HTML, Markdown or the terminal")
	}
	sch, err := schematest.Compile("report.schema.json", JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	if err := schematest.Validate(sch, js.Bytes()); err != nil {
		t.Errorf("report.json of a windows gate does not match the schema: %v", err)
	}
}
