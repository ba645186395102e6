package reports_test

import (
	"bytes"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
)

// longRun is the report of a 1,000,000-request run at its largest: the
// tally keeps at most 600 time slices (coarsening the width), every slice
// with per-cluster counts, logs counts and latency series, plus 60 pods
// across 3 clusters. Nothing in a report grows with the number of
// requests beyond that, so this is what rendering a 1M-request run costs.
func longRun(clusters, pods int) *reports.Report {
	const requests = 1_000_000
	r := &reports.Report{Schema: reports.Schema, RunID: "20261130T000000Z-abcdef",
		Scenario: reports.ScenarioInfo{Name: "long"}, Target: "http://127.0.0.1:8080/ping",
		Metrics: reports.Metrics{Requests: requests, Successes: requests, Success: 1, StatusCodes: map[string]int{"200": requests}},
		Tool:    reports.Tool{Name: "mesh-verify", Version: "v1.0.0"}}
	r.Attack.Requests = requests
	r.Attack.Elapsed = 1200 * time.Second
	names := make([]string, clusters)
	for c := range names {
		names[c] = fmt.Sprintf("cluster-%d", c+1)
	}
	share := 1 / float64(clusters)
	cd := reports.Dimension{Name: "cluster", Source: "body", Attributed: requests, Units: 32}
	pd := reports.Dimension{Name: "pod", Source: "body", Attributed: requests, Units: 32}
	var buckets []assert.BucketResult
	for _, n := range names {
		cd.Buckets = append(cd.Buckets, reports.Bucket{Name: n, Count: requests / int64(clusters), Share: share, Sources: []string{"body"}})
		buckets = append(buckets, assert.BucketResult{Bucket: n, Count: requests / int64(clusters), Observed: share, Expected: share,
			PassInterval: assert.Interval{Lo: share - 0.01, Hi: share + 0.01}, FailInterval: assert.Interval{Lo: share - 0.012, Hi: share + 0.012},
			Allowed: assert.Interval{Lo: share - 0.05, Hi: share + 0.05}, Verdict: assert.Pass})
	}
	for p := range pods {
		pd.Buckets = append(pd.Buckets, reports.Bucket{Name: fmt.Sprintf("callme-service-v1-7b469b5ddc-%05d", p), Cluster: names[p%clusters],
			Count: requests / int64(pods), Share: 1 / float64(pods), Sources: []string{"body"}})
	}
	r.Dimensions = []reports.Dimension{cd, pd}
	split := &assert.SplitResult{Verdict: assert.Pass, Buckets: buckets, PassLevel: 0.9, FailLevel: 0.983, FailMethod: assert.ClopperPearson,
		Evidence: assert.Evidence{N: requests, EffectiveN: requests, DesignEffect: 1, Balancing: assert.PerRequest}}
	r.Expectation = []reports.Expectation{{Name: "equal by cluster", Kind: "split", By: "cluster", Verdict: assert.Pass, Split: split, Planned: 2000, PlannedUnit: "requests"}}
	r.Timeline.SliceWidth = 2 * time.Second
	for i := range 600 {
		s := reports.Slice{Start: time.Duration(i) * r.Timeline.SliceWidth, Requests: requests / 600,
			Clusters: map[string]int64{}, Sources: map[string]map[string]int64{"logs": {}}, Latency: map[string]reports.SliceLatency{}}
		for c, n := range names {
			s.Clusters[n] = requests / 600 / int64(clusters)
			s.Sources["logs"][n] = s.Clusters[n]
			d := time.Duration(1+c) * time.Millisecond
			s.Latency[n] = reports.SliceLatency{N: s.Clusters[n], P50: d, P90: 2 * d, P99: 3 * d, Max: 4 * d}
		}
		r.Timeline.Slices = append(r.Timeline.Slices, s)
	}
	r.Verdict, r.Gate = assert.Pass, assert.Pass
	return r
}

// renderAll renders every format of a run directory.
func renderAll(w io.Writer, r *reports.Report) error {
	for _, f := range []func(io.Writer, *reports.Report) error{reports.WriteJSON, reports.HTML, reports.JUnit, reports.Markdown, reports.Terminal} {
		if err := f(w, r); err != nil {
			return err
		}
	}
	return nil
}

// The HTML of the largest report a run can make stays under 3 MB: the
// timeline is bounded (600 slices) and the per-slice latency series
// (16 per slice, docs/architecture.md); 16 clusters is that bound.
func TestHTMLOfTheLargestRunStaysSmall(t *testing.T) {
	var b bytes.Buffer
	if err := reports.HTML(&b, longRun(16, 200)); err != nil {
		t.Fatal(err)
	}
	if b.Len() > 3<<20 {
		t.Fatalf("report.html is %.1f MB for the largest timeline, want < 3 MB", float64(b.Len())/(1<<20))
	}
	t.Logf("report.html: %.2f MB", float64(b.Len())/(1<<20))
}

// BenchmarkRenderAll1M renders report.json, report.html, junit.xml,
// summary.md and the terminal tables of a 1,000,000-request run; the goal
// is < 2 s (make bench prints it).
func BenchmarkRenderAll1M(b *testing.B) {
	r := longRun(3, 60)
	var size int
	for b.Loop() {
		var buf bytes.Buffer
		if err := renderAll(&buf, r); err != nil {
			b.Fatal(err)
		}
		size = buf.Len()
	}
	b.ReportMetric(float64(size)/(1<<20), "MB-all-formats")
}
