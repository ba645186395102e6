// Package profile holds the benchmark bench/run.sh's reader profiles for
// issue 14: mesh-verify's whole run (attack, attribution, tally, the run
// directory's recorder) against a real nginx in another process, so a
// -cpuprofile or -memprofile shows the client's hot path only.
package profile

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/nginxbin"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// startNginx runs nginx `return 200` with one worker on a free loopback
// port, as bench/bench.py does; it is stopped by its pid at cleanup.
func startNginx(b *testing.B) string {
	b.Helper()
	bin, err := nginxbin.Find()
	if err != nil {
		b.Skip(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d := b.TempDir()
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fcgi;
  uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  server {
    listen 127.0.0.1:%[2]d;
    keepalive_requests 10000000;
    location / { return 200 "I'm callme-service v1 (pod callme-c1-0 in c1)\n"; }
  }
}
`, d, port)
	if err := os.WriteFile(filepath.Join(d, "nginx.conf"), []byte(conf), 0o600); err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", d, "-c", filepath.Join(d, "nginx.conf"))
	// Its own process group: SIGKILL to the master alone would leave its
	// worker running, holding the port, after the benchmark.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	b.Cleanup(func() {
		// SIGTERM: the master stops its worker and exits; past 5 s the
		// whole group is killed (the master is not reaped yet, so the
		// group id is still its own).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr + "/callme/ping"
		}
		time.Sleep(50 * time.Millisecond)
	}
	b.Fatalf("nginx does not answer on %s (log %s/error.log)", addr, d)
	return ""
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
