package runner

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Hand-computed reconciliations: tolerance = 3σ of the background's
// Poisson noise + max(2, 0.2% of the answered requests).
func TestReconcile(t *testing.T) {
	cases := []struct {
		name                     string
		answered, failed         int64
		counted, variance        float64
		wantTolerance            float64
		wantStatus, reasonPhrase string
	}{
		// The istio-mirror lab: 300 shadow copies counted as served.
		{"copies counted as served", 600, 0, 900, 0, 2, reports.ReconcileOver, "more than the 600 the attack sent"},
		// A scaled-down pod's last 2 s dropped: 1292 of 1318.
		{"a deleted pod's lines lost", 1318, 0, 1292, 0, 2.636, reports.ReconcileUnder, "fewer than the 1318 the attack got answered"},
		{"exact", 600, 0, 600, 0, 2, reports.ReconcileOK, ""},
		{"within the slack", 600, 0, 598, 0, 2, reports.ReconcileOK, ""},
		{"just beyond the slack", 600, 0, 597.9, 0, 2, reports.ReconcileUnder, "lines were lost"},
		// Failed requests may have been served and logged.
		{"failures logged", 600, 10, 612, 0, 2, reports.ReconcileOK, ""},
		{"more than sent", 600, 10, 612.1, 0, 2, reports.ReconcileOver, "610 the attack sent (600 answered, 10 failed)"},
		// 1 probe/s for 20 s against 25 s of background: σ² = 20·(1+20/25) = 36.
		{"background noise", 600, 0, 582, 36, 20, reports.ReconcileOK, ""},
		{"beyond the noise", 600, 0, 579.9, 36, 20, reports.ReconcileUnder, "tolerance of 20"},
		{"large run: 0.2%", 10000, 0, 9979, 0, 20, reports.ReconcileUnder, ""},
	}
	for _, c := range cases {
		r := &reports.Reconciliation{Source: "logs", Answered: c.answered, Failed: c.failed, Counted: c.counted}
		reconcile(r, c.variance, slack(c.answered))
		if math.Abs(r.Tolerance-c.wantTolerance) > 1e-9 || r.Status != c.wantStatus || !strings.Contains(r.Reason, c.reasonPhrase) {
			t.Errorf("%s: tolerance %v status %s reason %q; want %v %s %q", c.name, r.Tolerance, r.Status, r.Reason, c.wantTolerance, c.wantStatus, c.reasonPhrase)
		}
	}
}

// successes builds a body snapshot with n answered requests.
func successes(n int64) tally.Snapshot {
	return tally.Snapshot{Dimensions: map[string]assert.Counts{tally.Outcome: {Buckets: []string{tally.Success}, N: []int64{n}}}}
}

// What the mirror expectation is judged on, per evidence, most precise
// first; every count here is written out by hand.
func TestMirrorCounts(t *testing.T) {
	v1 := podlogs.Target{Cluster: "c1", Namespace: "default", Pod: "callme-v1-0"}
	v2 := podlogs.Target{Cluster: "c2", Namespace: "default", Pod: "callme-v2-0"}
	yes, no := true, false
	shadow := func(v *bool, defaulted bool) *scenarios.MirrorExpect {
		m := &scenarios.MirrorExpect{To: "callme-v2", Percent: 0.5, Shadow: v}
		if defaulted {
			m = defaultedMirror(t, v)
		}
		return m
	}
	window := func(copies, served podlogs.ClassCount) *logEvidence {
		return &logEvidence{
			pods:   map[podlogs.Target]podlogs.PodCount{v2: {Copies: copies, Served: served}, v1: {Served: podlogs.ClassCount{Window: 600}}},
			owner:  map[podlogs.Target]string{v1: "callme-v1", v2: "callme-v2"},
			idMode: map[string]bool{}, slack: 2,
		}
	}
	cases := []struct {
		name     string
		le       *logEvidence
		m        *scenarios.MirrorExpect
		k, n     int64
		basis    string
		unusable string
	}{
		{"no logs", nil, shadow(&yes, false), 0, 0, "", "no pod logs were read"},
		{"this run's ids, primaries logged", &logEvidence{totals: podlogs.Totals{Requests: 600, Mirrored: 310, MirroredServed: 297},
			idMode: map[string]bool{"callme-v2": true}, slack: 2}, shadow(&yes, false), 297, 600, "requests seen served in the logs", ""},
		{"this run's ids, primaries not logged", &logEvidence{totals: podlogs.Totals{Mirrored: 310},
			idMode: map[string]bool{"callme-v2": true}, slack: 2}, shadow(&yes, false), 310, 600, "requests answered", ""},
		{"the data plane's ids", &logEvidence{totals: podlogs.Totals{DataPlanePrimaries: 598, DataPlaneCopies: 301, DataPlaneBoth: 300},
			idMode: map[string]bool{}, slack: 2}, shadow(&yes, false), 300, 598, "joined by the data plane's request id", ""},
		// 310 copy lines, 10 of them background (1/3 per second over 30 s).
		{"window, less the background", window(podlogs.ClassCount{Window: 310, Expected: 10, Variance: 13.3}, podlogs.ClassCount{}),
			shadow(&yes, false), 300, 600, "copies counted in callme-v2's logs in the attack window", ""},
		{"window: more copies than primaries", window(podlogs.ClassCount{Window: 900}, podlogs.ClassCount{}),
			shadow(&no, false), 0, 0, "", "900 copies, more than the 600 primary requests answered"},
		{"window: within the tolerance, capped at n", window(podlogs.ClassCount{Window: 601}, podlogs.ClassCount{}),
			shadow(&no, false), 600, 600, "requests answered", ""},
		// Istio ≥ 1.28 marks no copy: a defaulted shadow gets a hint, not 0%.
		{"no -shadow host", window(podlogs.ClassCount{}, podlogs.ClassCount{Window: 300}),
			shadow(&yes, true), 0, 0, "", "none with a -shadow host"},
		{"the target's pods belong to another workload", &logEvidence{pods: map[podlogs.Target]podlogs.PodCount{v2: {Copies: podlogs.ClassCount{Window: 300}}},
			owner: map[podlogs.Target]string{v2: "callme"}, idMode: map[string]bool{}, slack: 2}, shadow(&yes, false), 0, 0, "", "no pod of callme-v2 was observed"},
		{"no -shadow host, shadow written out: mirror off", window(podlogs.ClassCount{}, podlogs.ClassCount{Window: 300}),
			shadow(&yes, false), 0, 600, "requests answered", ""},
	}
	for _, c := range cases {
		ev := evidence{body: successes(600), logInfo: c.le, config: map[string][]reports.ConfigError{}}
		got := ev.mirrorCounts(c.m)
		if got.k != c.k || got.n != c.n || !strings.Contains(got.basis, c.basis) || !strings.Contains(got.unusable, c.unusable) || (c.unusable == "") != (got.unusable == "") {
			t.Errorf("%s: got %+v, want k=%d n=%d basis %q unusable %q", c.name, got, c.k, c.n, c.basis, c.unusable)
		}
	}
}

// defaultedMirror parses a mirror expectation whose shadow is left out, so
// ApplyDefaults chooses it (true with an authority group).
func defaultedMirror(t *testing.T, want *bool) *scenarios.MirrorExpect {
	t.Helper()
	sc, err := scenarios.Parse("m.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: m}
clusters: [{name: c1, context: kind-c1}, {name: c2, context: kind-c2}]
target: {url: "http://127.0.0.1:1/"}
attack: {rate: 10, requests: 100}
attribution: {preset: tutorial}
observe:
  - {name: callme-v2, selector: app=callme, logs: {preset: istio-proxy}}
expect:
  - mirror: {to: callme-v2, percent: 50%}
`))
	if err != nil {
		t.Fatal(err)
	}
	m := sc.Expect[0].Mirror
	if !m.ShadowDefaulted() || *m.Shadow != *want {
		t.Fatalf("shadow %v defaulted %v", *m.Shadow, m.ShadowDefaulted())
	}
	return m
}

// The metrics: per-pod counter deltas summed against the requests answered,
// with the slack only (no background is measured for a counter).
func TestReconcileMetrics(t *testing.T) {
	deltas := func(ds ...float64) []metricsDelta {
		var out []metricsDelta
		for i, d := range ds {
			out = append(out, metricsDelta{workload: "callme", delta: kube.PodDelta{Cluster: fmt.Sprintf("c%d", 2-i%2), Pod: fmt.Sprintf("callme-%d", i), Delta: d}})
		}
		return out
	}
	for _, c := range []struct {
		name   string
		ds     []metricsDelta
		status string
	}{
		{"equal", deltas(300, 200, 100), reports.ReconcileOK},
		{"probes on top, within the slack", deltas(301, 200, 101), reports.ReconcileOK},
		{"mirror copies counted at the target", deltas(300, 200, 100, 300), reports.ReconcileOver},
		{"a pod not scraped after", deltas(300, 200), reports.ReconcileUnder},
	} {
		r := reconcileMetrics(c.ds, 600, 0)
		if r.Status != c.status || len(r.Pods) != len(c.ds) || r.Pods[0].Cluster != "c1" {
			t.Errorf("%s: %s, pods %+v", c.name, r.Status, r.Pods)
		}
	}
}

// The catalog's istio-mirror observes only callme-v2, whose every line is
// a copy: the logs count no served request, which is no loss; observing
// the same pod for served lines, 0 of 1900 is.
func TestReconcileLogsOfCopiesOnly(t *testing.T) {
	v2 := podlogs.Target{Cluster: "c2", Namespace: "default", Pod: "callme-v2-0"}
	for _, c := range []struct {
		copiesOnly bool
		want       string
	}{{true, reports.ReconcileOK}, {false, reports.ReconcileUnder}} {
		le := &logEvidence{pods: map[podlogs.Target]podlogs.PodCount{v2: {}}, owner: map[podlogs.Target]string{v2: "callme-v2"},
			idMode: map[string]bool{}, slack: slack(1900), copiesOnly: c.copiesOnly}
		if r := reconcileLogs(le, 1900, 0); r.Status != c.want || len(r.Pods) != 1 {
			t.Errorf("copies only %v: %s (%q), %d pods; want %s", c.copiesOnly, r.Status, r.Reason, len(r.Pods), c.want)
		}
	}
}
