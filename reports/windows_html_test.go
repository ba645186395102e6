package reports_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
)

// windowsHTMLReport is a 30-second run with a split by cluster judged in
// three windows (the second settling after a change) over a timeline of
// one-second slices, and the same by version; the object's name carries
// markup, as a cluster's could.
func windowsHTMLReport(evil string) *reports.Report {
	slices := make([]reports.Slice, 30)
	for i := range slices {
		c1 := int64(90)
		if i >= 12 {
			c1 = 50
		}
		slices[i] = reports.Slice{Start: time.Duration(i) * time.Second, Requests: 100, Clusters: map[string]int64{"c1": c1, "c2": 100 - c1}}
	}
	bucket := func(b string, exp, obs float64) assert.BucketResult {
		return assert.BucketResult{Bucket: b, Expected: exp, Observed: obs, Allowed: assert.Interval{Lo: exp - 0.08, Hi: exp + 0.08}, Verdict: assert.Pass}
	}
	win := func(i int, from, to time.Duration, exp, obs float64, rv string, settling bool, by [2]string) reports.Window {
		return reports.Window{Index: i, Start: from, End: to, Settling: settling, Judged: !settling, Verdict: assert.Pass,
			Expected: map[string]float64{by[0]: exp, by[1]: 1 - exp},
			Source:   &reports.WindowSource{Object: evil, ResourceVersion: rv},
			Split:    assert.SplitResult{Verdict: assert.Pass, Evidence: assert.Evidence{N: 1000}, Buckets: []assert.BucketResult{bucket(by[0], exp, obs), bucket(by[1], 1-exp, 1-obs)}}}
	}
	windows := func(by [2]string) *reports.Windows {
		w := &reports.Windows{Mode: "follow", Settle: 6 * time.Second, Judged: 2,
			Windows: []reports.Window{
				win(1, 0, 12*time.Second, 0.9, 0.9, "100", false, by),
				win(2, 12*time.Second, 18*time.Second, 0.5, 0.55, "101", true, by),
				win(3, 18*time.Second, 30*time.Second, 0.5, 0.5, "101", false, by),
			},
			Converge: []reports.Convergence{{At: 12 * time.Second, ResourceVersion: "101", Window: 3, Converged: true, Within: 6 * time.Second,
				Text: "change at 12s (resourceVersion 101): converged within 6s (window 3 PASSes from 18s)"}}}
		// A failover timeline's phases, in the windows table.
		w.Windows[0].Phase, w.Windows[2].Phase = "before", "after"
		return w
	}
	return &reports.Report{Schema: reports.Schema, RunID: "r", Scenario: reports.ScenarioInfo{Name: "follow"},
		Metrics:  reports.Metrics{Requests: 3000, Successes: 3000, Success: 1},
		Timeline: reports.Timeline{SliceWidth: time.Second, Slices: slices},
		Expectation: []reports.Expectation{
			{Name: "by zone", Kind: "split", By: "cluster", Source: "body", Verdict: assert.Pass, Reason: "every one of the 2 windows judged PASSes", Windows: windows([2]string{"c1", "c2"})},
			{Name: "by version", Kind: "split", By: "version", Source: "body", Verdict: assert.Pass, Reason: "every one of the 2 windows judged PASSes", Windows: windows([2]string{"v1", "v2"})},
		},
		Verdict: assert.Pass, Gate: assert.Pass}
}

// The split-over-time chart draws, in headless Chromium, each window's
// allowed band and expected share over the split by cluster, a mark at
// the weight change and at the convergence; a split by version gets its
// own chart from its windows; the object's name stays text.
func TestWindowsChartInChromium(t *testing.T) {
	bin := chromium(t)
	rec, hits := recorder(t)
	script, _ := hostile(rec)
	r := windowsHTMLReport("TrafficRoute " + script)
	page := filepath.Join(t.TempDir(), "report.html")
	f, err := os.Create(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := reports.HTML(f, r); err != nil {
		t.Fatal(err)
	}
	f.Close()
	dom, _ := headless(t, bin, "--dump-dom", "file://"+page)
	for _, want := range []string{
		`class="wband s0"`, `class="wband s1"`, `class="wexp s0"`, `class="wchange"`, `class="wconv"`,
		"expected share and allowed band per window", "Split by version over time, per window",
		"converged within 6s", "window 3 (18s–30s, PASS): c1 expected 50.0%, allowed 42.0%–58.0%",
		"1 (before)", "3 (after)", "settling (not judged)",
		domText(script),
	} {
		if !strings.Contains(dom, want) {
			t.Errorf("the rendered page lacks %q", want)
		}
	}
	// Two charts with windows, each: 2 buckets × 2 judged windows of bands.
	if n := strings.Count(dom, `class="wband `); n != 8 {
		t.Errorf("%d bands drawn, want 8 (the settling window has none)", n)
	}
	if strings.Contains(dom, "<script") {
		t.Errorf("the object's name became an element:\n%s", excerpt(dom, "<script"))
	}
	if n := hits.Load(); n > 0 {
		t.Errorf("the page made %d requests", n)
	}
}
