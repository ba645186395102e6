package metricsout_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/internal/promtest"
	"github.com/mesh-verify/mesh-verify/metricsout"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/tally"
)

// judged is a report as a run writes it: a 70/30 split by cluster that
// FAILed an equal split, 99% success.
func judged(runID string) *reports.Report {
	return &reports.Report{
		RunID:    runID,
		Scenario: reports.ScenarioInfo{Name: "checkout-canary"},
		Tool:     reports.Tool{Version: "v0.0.0-test"},
		Metrics: reports.Metrics{Requests: 1000, Successes: 990, Success: 0.99,
			Latency: reports.Latency{P50: 2 * time.Millisecond, P90: 5 * time.Millisecond, P95: 7 * time.Millisecond, P99: 12 * time.Millisecond, Max: 40 * time.Millisecond}},
		Dimensions: []reports.Dimension{{Name: "cluster", Source: "body", Attributed: 990, Buckets: []reports.Bucket{
			{Name: "c1", Cluster: "c1", Count: 693, Share: 0.7}, {Name: "c2", Cluster: "c2", Count: 297, Share: 0.3}}}},
		Expectation: []reports.Expectation{
			{Name: "equal", Kind: "split", Verdict: assert.Fail, Model: &assert.Shares{Shares: map[string]float64{"c1": 0.5, "c2": 0.5}}},
			{Kind: "successRate", Verdict: assert.Pass},
		},
		Verdict: assert.Fail, Gate: assert.Fail, ExitCode: 1,
	}
}

// TestRemoteWriteToPrometheus writes a judged run into a real Prometheus
// (remote-write receiver on) and reads it back with PromQL: the shares,
// the expected shares, the verdict state sets and the success ratio are
// the report's, and labelled with its run id.
func TestRemoteWriteToPrometheus(t *testing.T) {
	t.Parallel()
	prom := promtest.Start(t, "")
	rep := judged("run-rw-1")
	if err := metricsout.Write(context.Background(), metricsout.Remote{URL: prom.WriteURL()}, metricsout.FromReport(rep), time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		promql string
		want   float64
	}{
		{`mesh_verify_bucket_share{run_id="run-rw-1",dimension="cluster",bucket="c1"}`, 0.7},
		{`mesh_verify_bucket_share{run_id="run-rw-1",dimension="cluster",bucket="c2"}`, 0.3},
		{`mesh_verify_bucket_requests_total{run_id="run-rw-1",bucket="c2"}`, 297},
		{`mesh_verify_expected_share{run_id="run-rw-1",expectation="equal",bucket="c1"}`, 0.5},
		{`mesh_verify_expectation_verdict{run_id="run-rw-1",expectation="equal",verdict="FAIL"}`, 1},
		{`mesh_verify_expectation_verdict{run_id="run-rw-1",expectation="equal",verdict="PASS"}`, 0},
		{`mesh_verify_expectation_verdict{run_id="run-rw-1",expectation="successRate#2",verdict="PASS"}`, 1},
		{`mesh_verify_gate_verdict{run_id="run-rw-1",scenario="checkout-canary",verdict="FAIL"}`, 1},
		{`mesh_verify_success_ratio{run_id="run-rw-1"}`, 0.99},
		{`mesh_verify_requests_total{run_id="run-rw-1",outcome="failure"}`, 10},
		{`mesh_verify_latency_seconds{run_id="run-rw-1",quantile="0.99"}`, 0.012},
	} {
		got := prom.Eventually(t, tc.promql, 10*time.Second, func(s []promtest.Sample) bool { return len(s) == 1 })
		if got[0].Value != tc.want {
			t.Errorf("%s = %v, want %v", tc.promql, got[0].Value, tc.want)
		}
	}
}

// TestScrapedWhileRunning: a real Prometheus scraping the exposition
// endpoint sees the live counts grow as the tally counts.
func TestScrapedWhileRunning(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	gather := func() []*dto.MetricFamily {
		c := n.Load()
		return metricsout.FromSnapshot(metricsout.Run{ID: "run-live", Scenario: "s"}, tally.Snapshot{
			Total: c,
			Dimensions: map[string]assert.Counts{
				tally.Outcome: {Buckets: []string{tally.Success}, N: []int64{c}},
				"cluster":     {Buckets: []string{"c1", "c2"}, N: []int64{c / 2, c - c/2}},
			},
		})
	}
	srv, err := metricsout.Listen("127.0.0.1:0", gather)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close(context.Background()) })
	prom := promtest.Start(t, srv.Addr())
	n.Store(100)
	prom.Eventually(t, `mesh_verify_bucket_requests_total{run_id="run-live",bucket="c2"}`, 20*time.Second,
		func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value == 50 })
	n.Store(400)
	prom.Eventually(t, `mesh_verify_requests_total{run_id="run-live",outcome="success"}`, 20*time.Second,
		func(s []promtest.Sample) bool { return len(s) == 1 && s[0].Value == 400 })
}

// TestRemoteWriteErrors: a receiver that refuses, and bad settings, are
// errors that name the receiver without its credentials; a 5xx is retried
// as many times as asked, a 4xx not at all.
func TestRemoteWriteErrors(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	var gotAuth atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		gotAuth.Store(r.Header.Get("X-Scope-OrgID"))
		_, _ = io.Copy(io.Discard, r.Body)
		if strings.HasSuffix(r.URL.Path, "/bad") {
			http.Error(w, "out of bounds\nsecond line", http.StatusBadRequest)
			return
		}
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	fams := metricsout.FromReport(judged("run-err"))
	withCreds := strings.Replace(srv.URL, "http://", "http://user:s3cret@", 1)

	calls.Store(0)
	err := metricsout.Write(context.Background(), metricsout.Remote{URL: withCreds + "/bad", Headers: http.Header{"X-Scope-Orgid": {"tenant-1"}}}, fams, time.Now())
	if err == nil || !strings.Contains(err.Error(), "400") || strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), "\n") {
		t.Errorf("400: %v; want one line naming the status, no password", err)
	}
	if calls.Load() != 1 || gotAuth.Load() != "tenant-1" {
		t.Errorf("400: %d calls with X-Scope-OrgID %v, want 1 call with the header", calls.Load(), gotAuth.Load())
	}

	calls.Store(0)
	err = metricsout.Write(context.Background(), metricsout.Remote{URL: withCreds + "/busy", Retries: 2}, fams, time.Now())
	if err == nil || strings.Contains(err.Error(), "s3cret") {
		t.Errorf("503: %v; want an error without the password", err)
	}
	if c := calls.Load(); c != 3 {
		t.Errorf("503 with 2 retries: %d calls, want 3", c)
	}

	// No retries means one call, never "retry forever" (the remote API's
	// MaxRetries of 0).
	calls.Store(0)
	done := make(chan error, 1)
	go func() {
		done <- metricsout.Write(context.Background(), metricsout.Remote{URL: srv.URL + "/busy", Retries: 0}, fams, time.Now())
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "503") || calls.Load() != 1 {
			t.Errorf("503 with 0 retries: %v after %d calls, want the 503 after 1 call", err, calls.Load())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("503 with 0 retries: still retrying after 30 s")
	}

	for _, r := range []metricsout.Remote{
		{URL: "ftp://example.com/write"},
		{URL: "http://user:s3cret@%zz/"},
		{URL: srv.URL, Retries: metricsout.MaxRetries + 1},
		{URL: srv.URL, Timeout: -time.Second},
		{URL: srv.URL, Timeout: metricsout.MaxTimeout + time.Second},
	} {
		err := r.Validate()
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("Validate(%+v) = %v, want an error without the password", r, err)
		}
	}
}

// TestExpositionFormat: the endpoint speaks the text format a curl sees
// and only on /metrics; an address without a host is refused.
func TestExpositionFormat(t *testing.T) {
	t.Parallel()
	h := metricsout.Handler(func() []*dto.MetricFamily { return metricsout.FromReport(judged("run-text")) })
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	body := rec.Body.String()
	for _, want := range []string{
		"# TYPE mesh_verify_bucket_share gauge",
		`mesh_verify_bucket_share{run_id="run-text",scenario="checkout-canary",dimension="cluster",source="body",bucket="c1",cluster="c1"} 0.7`,
		"# TYPE mesh_verify_requests_total counter",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("exposition lacks %q:\n%s", want, body)
		}
	}
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("GET / = %d, want 404", rec.Code)
	}
	if _, err := metricsout.Listen(":9464", nil); err == nil || !strings.Contains(err.Error(), "interface") {
		t.Errorf("Listen(:9464) = %v, want a refusal asking for the interface", err)
	}
	if _, err := metricsout.Listen("nonsense", nil); err == nil {
		t.Error("Listen(nonsense) accepted")
	}
}
