package reports

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/internal/schematest"
)

// windowsReport is a split judged in three windows, the object's name
// and resourceVersion hostile (they come from the cluster).
func windowsReport() *Report {
	r := sample()
	obj := "TrafficRoute \x1b[31mred\x1b[0m <b>x</b> | y"
	win := func(i int, from, to time.Duration, c1 float64, rv string, settling bool, v assert.Verdict) Window {
		return Window{Index: i, Start: from, End: to, Settling: settling, Judged: !settling, Verdict: v,
			Expected: map[string]float64{"c1": c1, "c2": 1 - c1},
			Source:   &WindowSource{Object: obj, ResourceVersion: rv},
			Split: assert.SplitResult{Verdict: v, Evidence: assert.Evidence{N: 1000},
				Buckets: []assert.BucketResult{{Bucket: "c1", Observed: 0.5, PassInterval: assert.Interval{Lo: 0.47, Hi: 0.53}}, {Bucket: "c2", Observed: 0.5}}}}
	}
	r.Expectation[0].Windows = &Windows{Mode: "follow", Settle: 5 * time.Second, Judged: 2, Deciding: 3,
		Windows: []Window{
			win(1, 0, 12*time.Second, 0.9, "100", false, assert.Pass),
			win(2, 12*time.Second, 18*time.Second, 0.5, "101\x1b]8;;", true, assert.Pass),
			win(3, 18*time.Second, 36*time.Second, 0.9, "102", false, assert.Fail),
		},
		Converge: []Convergence{{At: 12 * time.Second, ResourceVersion: "101", Window: 3, NotConverged: true,
			Text: "change at 12s (resourceVersion 101): not converged: window 3 (18s–36s) FAILs"}}}
	r.Expectation[0].Reason = "window 3 of 3 (18s–36s, expected c1=90%, c2=10% from " + obj + " resourceVersion 102): FAIL: …"
	return r
}

// The terminal and Markdown show every window (time, expected shares,
// object and resourceVersion, requests, observed with interval, verdict)
// and the convergence; JUnit names the deciding window and lists them
// all; nothing taken from the cluster gets through unescaped.
func TestWindowsRendered(t *testing.T) {
	t.Parallel()
	r := windowsReport()
	var term, md, ju bytes.Buffer
	for _, w := range []struct {
		f   func(*bytes.Buffer, *Report) error
		out *bytes.Buffer
	}{
		{func(b *bytes.Buffer, r *Report) error { return Terminal(b, r) }, &term},
		{func(b *bytes.Buffer, r *Report) error { return Markdown(b, r) }, &md},
		{func(b *bytes.Buffer, r *Report) error { return JUnit(b, r) }, &ju},
	} {
		if err := w.f(w.out, r); err != nil {
			t.Fatal(err)
		}
		if out := w.out.String(); strings.ContainsRune(out, '\x1b') || !utf8.ValidString(out) {
			t.Errorf("a control character got through:\n%q", out)
		}
	}
	for _, want := range []string{"WINDOW", "0s–12s", "12s–18s", "settling (not judged)", "c1 90.0%, c2 10.0%", "@102", "c1 50.0% (47.0%–53.0%)",
		"2 of 3 windows judged", "not converged: window 3 (18s–36s) FAILs"} {
		if !strings.Contains(term.String(), want) {
			t.Errorf("terminal lacks %q:\n%s", want, term.String())
		}
	}
	if strings.Contains(md.String(), "<b>") || !strings.Contains(md.String(), "&lt;b&gt;") || !strings.Contains(md.String(), `\|`) {
		t.Errorf("markdown passes HTML or a cell separator through:\n%s", md.String())
	}
	var js bytes.Buffer
	if err := WriteJSON(&js, r); err != nil {
		t.Fatal(err)
	}
	sch, err := schematest.Compile("report.schema.json", JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	if err := schematest.Validate(sch, js.Bytes()); err != nil {
		t.Errorf("report.json with windows does not match the schema: %v", err)
	}
	var s junitSuites
	if err := xml.Unmarshal(ju.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	c := s.Suites[0].Cases[0]
	if c.Failure == nil || !strings.HasPrefix(c.Failure.Message, "window 3 of 3") || strings.Count(c.Failure.Text, "\n") != 4 {
		t.Errorf("junit case %+v: want the failure naming window 3 and the 3 windows and the change listed", c.Failure)
	}
}
