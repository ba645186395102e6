package podlogs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// ingestFile is BenchmarkIngestFile's input: $BENCH_INGEST_FILE (bench/bench.py
// writes one big Istio access log and names it), else a generated one of n
// lines, half of them inbound (the istio-proxy preset's lines).
func ingestFile(tb testing.TB, n int) (path, runID string, want int) {
	tb.Helper()
	if p := os.Getenv("BENCH_INGEST_FILE"); p != "" {
		want, err := strconv.Atoi(os.Getenv("BENCH_INGEST_WANT"))
		if err != nil {
			tb.Fatalf("BENCH_INGEST_WANT: %v", err)
		}
		return p, os.Getenv("BENCH_INGEST_RUN_ID"), want
	}
	runID = "20260101T000000Z-bench"
	path = filepath.Join(tb.TempDir(), "ingest.log")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range n {
		kind := "inbound|8080||"
		if i%2 == 1 {
			kind = "outbound|8080||callme-service.default.svc.cluster.local"
		} else {
			want++
		}
		fmt.Fprintf(w, `%s [2026-01-02T03:04:05.%03dZ] "GET /callme/ping HTTP/1.1" 200 - via_upstream - "-" 0 46 1 1 "-" "vegeta" "%s-%d" "callme-service:8080" "10.244.0.15:8080" %s 127.0.0.6:51234 10.244.0.15:8080 10.244.0.12:40112 - default`+"\n",
			start.Add(time.Duration(i)*time.Millisecond).Format("2006-01-02T15:04:05.000000000Z07:00"), i%1000, runID, i, kind)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path, runID, want
}

// BenchmarkIngestFile is the per-line work of following a sidecar's log, on
// one big file: read a line, decode the API server's timestamp, match the
// istio-proxy preset with its named groups, parse the run's request id and
// count the line for its pod (what Follower and the runner do per line,
// without the goroutines between them). It reports matched lines per
// second; bench/bench.py runs it with -cpu 1 for BENCHMARKS.md and compares
// it with grep -c on the same file.
func BenchmarkIngestFile(b *testing.B) {
	path, runID, want := ingestFile(b, 200_000)
	p, err := LookupPreset("istio-proxy")
	if err != nil {
		b.Fatal(err)
	}
	rule := NewRule(regexp.MustCompile(p.Match))
	target := Target{Cluster: "c1", Namespace: "default", Pod: "callme-service-0", Container: "istio-proxy"}
	var matched int
	var ids uint64
	cpu0 := processCPU()
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Open(path)
		if err != nil {
			b.Fatal(err)
		}
		c := NewCounter(CounterOptions{RunID: runID})
		br := bufio.NewReaderSize(f, 32<<10)
		d := decoder{format: FormatTimestamps, max: 64 << 10}
		var buf []byte
		n := 0
		for {
			raw, _, err := readLine(br, buf, 64<<10+64)
			if err != nil {
				break
			}
			buf = raw
			at, text, _, ok, derr := d.decode(raw)
			if derr != nil || !ok {
				continue
			}
			m, ok := rule.Match(Line{Target: target, Time: at, Text: string(text)})
			if !ok {
				continue
			}
			if _, ours := ParseRequestID(runID, m.RequestID); ours {
				ids++
			}
			c.Add(m)
			n++
		}
		f.Close()
		if n != want {
			b.Fatalf("matched %d lines of %s, want %d", n, path, want)
		}
		if got := c.Totals(Window{}).Requests; got != want {
			b.Fatalf("counted %d served requests, want %d", got, want)
		}
		matched += n
	}
	if ids != uint64(matched) {
		b.Fatalf("%d of %d matched lines carried the run's request id", ids, matched)
	}
	b.ReportMetric(float64(matched)/b.Elapsed().Seconds(), "matched-lines/s")
	// On a shared machine the wall clock counts other processes' turns;
	// the process's own CPU time (with -cpu 1, one core's) does not.
	b.ReportMetric(float64(matched)/(processCPU()-cpu0).Seconds(), "matched-lines/cpu-s")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
