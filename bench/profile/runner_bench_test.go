// Package profile holds the benchmark bench/run.sh's reader profiles for
// issue 14: mesh-verify's whole run (attack, attribution, tally, the run
// directory's recorder) against a real nginx in another process, so a
// -cpuprofile or -memprofile shows the client's hot path only.
package profile

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/nginxbin/nginxtest"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// startNginx runs nginx `return 200` with one worker, as bench/bench.py
// does.
func startNginx(b *testing.B) string {
	b.Helper()
	return nginxtest.Start(b, `    keepalive_requests 10000000;
    location / { return 200 "I'm callme-service v1 (pod callme-c1-0 in c1)\n"; }`) + "/callme/ping"
}

// BenchmarkRunnerMaxRate is `mesh-verify run --out DIR` of bench/bench.py's
// max-throughput scenario (attribution on, every result recorded), in
// process: one op is one run of $BENCH_PROFILE_REQUESTS (100,000) requests
// over $BENCH_PROFILE_CONCURRENCY (32) connections, closed loop. It reports
// req/s and the allocations per request of the whole client side.
func BenchmarkRunnerMaxRate(b *testing.B) {
	url := startNginx(b)
	requests := envInt(b, "BENCH_PROFILE_REQUESTS", 100_000)
	conc := envInt(b, "BENCH_PROFILE_CONCURRENCY", 32)
	attack := fmt.Sprintf("  concurrency: %d\n  requests: %d", conc, requests)
	if os.Getenv("BENCH_PROFILE_OPEN") != "" {
		attack = "  rate: 1000000/s\n" + attack
	}
	sc, err := scenarios.Parse("bench.yaml", []byte(fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: bench}
clusters: [{name: c1}]
target: {url: %q}
attack:
%s
attribution:
  preset: tutorial
  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
expect:
  - reached: {buckets: [c1]}
`, url, attack)))
	if err != nil {
		b.Fatal(err)
	}
	var elapsed time.Duration
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	for i := 0; i < b.N; i++ {
		rec, err := runlog.Create(filepath.Join(b.TempDir(), strconv.Itoa(i)))
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		rep, err := runner.Run(context.Background(), sc, runner.Options{Record: rec})
		elapsed += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		if rep.Metrics.Requests != int64(requests) || rep.Metrics.Successes != int64(requests) {
			b.Fatalf("%d requests, %d successes, want %d", rep.Metrics.Requests, rep.Metrics.Successes, requests)
		}
	}
	runtime.ReadMemStats(&ms1)
	n := float64(b.N * requests)
	b.ReportMetric(n/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/n, "allocs/req")
	b.ReportMetric(float64(ms1.TotalAlloc-ms0.TotalAlloc)/n, "B/req")
}

func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive whole number", name, s)
	}
	return n
}
