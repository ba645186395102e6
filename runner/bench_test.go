package runner

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/tally"
)

// BenchmarkUniquePods is issue 13's unique-pod target: a real run (the
// attack, attribution, tally, results.bin and attribution.jsonl written
// to a temporary run directory) of 1,000,000 requests against a local
// net/http server that names a new pod in every response, the worst case
// for memory (every value past tally.MaxBuckets goes to "(other)"). It
// reports the process's peak RSS during the run (VmHWM, reset before it),
// report.json's size and the rate. README.md, "Limits", has the numbers;
// the bounds are RSS < 150 MB and report.json < 1 MB:
//
//	go test -run '^$' -bench UniquePods -benchtime 1x ./runner
//
// MESH_VERIFY_BENCH_REQUESTS changes the count (a quick look: 100000).
func BenchmarkUniquePods(b *testing.B) {
	requests := 1_000_000
	if v := os.Getenv("MESH_VERIFY_BENCH_REQUESTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			b.Fatalf("MESH_VERIFY_BENCH_REQUESTS=%q: want a positive count", v)
		}
		requests = n
	}
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%d in c1)", n.Add(1))
	}))
	b.Cleanup(ts.Close)
	for i := 0; i < b.N; i++ {
		sc := load(b, ts.URL, fmt.Sprintf("  concurrency: 32\n  requests: %d\n  keepAlive: true", requests),
			"  confidence: 0.95", "  - reached: {by: cluster, buckets: [c1]}\n  - successRate: {atLeast: 99%}")
		dir := b.TempDir()
		rec, err := runlog.Create(dir)
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		debug.FreeOSMemory()
		if err := resetPeakRSS(); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		rep, err := Run(context.Background(), sc, Options{Record: rec})
		elapsed := time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		peak, err := peakRSS()
		if err != nil {
			b.Fatal(err)
		}
		path, err := reports.WriteFile(dir, "report.json", func(w io.Writer) error { return reports.WriteJSON(w, rep) })
		if err != nil {
			b.Fatal(err)
		}
		st, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		var pods int
		for _, d := range rep.Dimensions {
			if d.Name == "pod" && d.Source == "body" {
				pods = len(d.Buckets)
			}
		}
		if rep.Metrics.Successes != int64(requests) || pods != tally.MaxBuckets+1 || rep.ExitCode != exitcode.Pass {
			b.Fatalf("%d of %d answered, %d pod buckets, exit %d: %q", rep.Metrics.Successes, requests, pods, rep.ExitCode, rep.Warnings)
		}
		lines, err := countLines(filepath.Join(dir, runlog.AttributionFile))
		if err != nil || lines != requests {
			b.Fatalf("attribution.jsonl: %d lines of %d, %v", lines, requests, err)
		}
		b.ReportMetric(float64(peak)/(1<<20), "peak-RSS-MiB")
		b.ReportMetric(float64(st.Size())/1024, "report-KiB")
		b.ReportMetric(float64(requests)/elapsed.Seconds(), "req/s")
		if peak >= 150<<20 || st.Size() >= 1<<20 {
			b.Errorf("peak RSS %d MiB (bound 150 MB), report.json %d KiB (bound 1 MB)", peak>>20, st.Size()>>10)
		}
	}
}

// resetPeakRSS makes VmHWM start again from the current RSS (Linux's
// clear_refs, value 5), so it measures the run, not the process's past.
func resetPeakRSS() error {
	return os.WriteFile("/proc/self/clear_refs", []byte("5"), 0)
}

// peakRSS is VmHWM from /proc/self/status, in bytes.
func peakRSS() (int64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmHWM in /proc/self/status")
}

func countLines(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	n := 0
	buf := make([]byte, 1<<20)
	for {
		k, err := f.Read(buf)
		n += bytes.Count(buf[:k], []byte{'\n'})
		if err != nil {
			return n, nil
		}
	}
}
