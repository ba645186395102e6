package e2e

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/promtest"
)

// TestMetricsOutToPrometheus runs a scenario through nginx (2:1:1) with
// --remote-write to a real Prometheus and --metrics-listen scraped by the
// same Prometheus, then reads the split back with PromQL: the remote-written
// shares and verdicts are report.json's, and the scraped live counts saw
// the run's requests while it lasted.
func TestMetricsOutToPrometheus(t *testing.T) {
	proxy, _ := threeClusters(t, 2, 1, 1)
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	prom := promtest.Start(t, metricsAddr)
	sc := writeScenario(t, scenario(proxy.url, "  rate: 200/s\n  duration: 6s",
		"  - name: weighted\n    split:\n      weights: {c1: 2, c2: 1, c3: 1}\n  - successRate: {atLeast: 99%}"))
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runBinary(t, ctx, "run", sc, "--out", out, "-q", "--metrics-listen", metricsAddr,
		"--remote-write", prom.WriteURL(), "--remote-write-header", "X-Scope-OrgID: e2e")
	if r.Code != 0 {
		t.Fatalf("run: exit %d\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "wrote metrics to "+prom.WriteURL()) {
		t.Errorf("stderr does not say the metrics were written:\n%s", r.Stderr)
	}
	rep, _ := readReport(t, out)
	sel := fmt.Sprintf(`run_id=%q,scenario="nginx-split"`, rep.RunID)

	for _, d := range rep.Dimensions {
		if d.Name != "cluster" || d.Source != "body" {
			continue
		}
		for _, b := range d.Buckets {
			q := fmt.Sprintf(`mesh_verify_bucket_share{%s,dimension="cluster",source="body",bucket=%q}`, sel, b.Name)
			got := prom.Eventually(t, q, 10*time.Second, func(s []promtest.Sample) bool { return len(s) == 1 })
			if math.Abs(got[0].Value-b.Share) > 1e-9 {
				t.Errorf("%s = %v, report.json says %v", q, got[0].Value, b.Share)
			}
		}
	}
	q := fmt.Sprintf(`mesh_verify_expectation_verdict{%s,expectation="weighted",verdict="PASS"}`, sel)
	if got := prom.Eventually(t, q, 10*time.Second, func(s []promtest.Sample) bool { return len(s) == 1 }); got[0].Value != 1 {
		t.Errorf("%s = %v, want 1 (the report's verdict is %v)", q, got[0].Value, rep.Expectation[0].Verdict)
	}
	// The scrape job saw the live counters; the last scrape before the run
	// ended is at most one scrape interval short of the total.
	live := fmt.Sprintf(`max_over_time(mesh_verify_requests_total{job="mesh-verify",%s,outcome="success"}[5m])`, sel)
	got := prom.Eventually(t, live, 10*time.Second, func(s []promtest.Sample) bool { return len(s) == 1 })
	if got[0].Value <= 0 || got[0].Value > float64(rep.Metrics.Requests) {
		t.Errorf("scraped live successes %v, want some of the run's %d requests", got[0].Value, rep.Metrics.Requests)
	}
}

// TestRemoteWriteRefusals: a credential header on the command line and a
// bad URL are refused before the attack (exit 4) without echoing secrets;
// a receiver that is down leaves the verdict's exit code alone.
func TestRemoteWriteRefusals(t *testing.T) {
	proxy, _ := threeClusters(t, 1, 1, 1)
	sc := writeScenario(t, scenario(proxy.url, "  rate: 100/s\n  duration: 1s", "  - successRate: {atLeast: 90%}"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"credential header", []string{"--remote-write", "http://127.0.0.1:1/api/v1/write", "--remote-write-header", "Authorization: Bearer s3cret"}, 4, "MESH_VERIFY_REMOTE_WRITE_HEADERS"},
		{"bad url", []string{"--remote-write", "ftp://user:s3cret@example.com/"}, 4, "--remote-write"},
		{"header without url", []string{"--remote-write-header", "X-Scope-OrgID: a"}, 4, "needs --remote-write"},
		{"receiver down", []string{"--remote-write", fmt.Sprintf("http://user:s3cret@127.0.0.1:%d/api/v1/write", freePort(t)), "--remote-write-retries", "0"}, 0, "warning: remote write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := runBinary(t, ctx, append([]string{"run", sc, "--out", t.TempDir(), "-q"}, tc.args...)...)
			if r.Code != tc.code || !strings.Contains(r.Stderr, tc.want) || strings.Contains(r.Stderr+r.Stdout, "s3cret") {
				t.Errorf("exit %d, want %d with %q on stderr and no secret:\n%s%s", r.Code, tc.code, tc.want, r.Stdout, r.Stderr)
			}
		})
	}
}
