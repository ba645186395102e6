package runlog_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

var (
	vegetaOnce sync.Once
	vegetaBin  string
	vegetaErr  error
	vegetaDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if vegetaDir != "" {
		os.RemoveAll(vegetaDir)
	}
	os.Exit(code)
}

// vegetaCLI builds the vegeta CLI from the module version mesh-verify
// uses (bench/vegeta pins it), once per test binary.
func vegetaCLI(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go is not on PATH: cannot build the vegeta CLI to check the run log against")
	}
	vegetaOnce.Do(func() {
		if vegetaDir, vegetaErr = os.MkdirTemp("", "runlog-vegeta-"); vegetaErr != nil {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		bin := filepath.Join(vegetaDir, "vegeta")
		cmd := exec.CommandContext(ctx, goBin, "build", "-o", bin, "github.com/tsenart/vegeta/v12")
		cmd.Dir = filepath.Join("..", "bench", "vegeta")
		if out, err := cmd.CombinedOutput(); err != nil {
			vegetaErr = fmt.Errorf("building the vegeta CLI: %v\n%s", err, out)
			return
		}
		vegetaBin = bin
	})
	if vegetaErr != nil {
		t.Fatal(vegetaErr)
	}
	return vegetaBin
}

func vegeta_(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, vegetaCLI(t), args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("vegeta %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out
}

// mesh is a local server standing for three clusters: it answers at random
// from one, names the pod and cluster in the body, and fails one request in
// ten with a 503 that names them too. It remembers who answered what.
type mesh struct {
	*httptest.Server
	hits     atomic.Int64
	mu       sync.Mutex
	answered map[string]string // request id -> cluster
	onHit    func(n int64)
}

func newMesh(t testing.TB) *mesh {
	m := &mesh{answered: map[string]string{}}
	m.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := m.hits.Add(1)
		c := fmt.Sprintf("c%d", 1+rand.IntN(3))
		m.mu.Lock()
		m.answered[r.Header.Get("X-Request-Id")] = c
		m.mu.Unlock()
		if rand.IntN(10) == 0 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
		if m.onHit != nil {
			m.onHit(n)
		}
	}))
	t.Cleanup(m.Close)
	return m
}

func scenario(t testing.TB, url, attack string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("runlog.yaml", []byte(fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: runlog}
clusters: [{name: c1}, {name: c2}, {name: c3}]
target: {url: %q}
attack:
%s
attribution:
  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
expect:
  - split: {model: equal}
`, url, attack)))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// seen is what the runner handed the recorder.
type seen struct {
	runner.Recorder
	n     int
	codes map[string]int
	ok    int
	by    map[uint64]runlog.Attribution // seq -> what it should read back as
}

func (s *seen) Record(r *attack.Result, id attribution.Identity, ok bool) {
	if s.codes == nil {
		s.codes, s.by = map[string]int{}, map[uint64]runlog.Attribution{}
	}
	s.n++
	s.codes[fmt.Sprint(r.Code)]++
	if ok {
		s.ok++
	}
	a := runlog.Attribution{Seq: r.Seq, RequestID: r.RequestID, ConnID: r.ConnID, Identity: id, Code: r.Code, OK: ok}
	if !id.Empty() {
		a.Source = runlog.SourceBody
	}
	s.by[r.Seq] = a
	s.Recorder.Record(r, id, ok)
}

func run(t *testing.T, ctx context.Context, sc *scenarios.Scenario, rec runner.Recorder) *reports.Report {
	t.Helper()
	rep, err := runner.Run(ctx, sc, runner.Options{Record: rec})
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func recordRun(t *testing.T, ctx context.Context, attackYAML string, m *mesh) (string, *seen, *reports.Report) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run")
	rec, err := runlog.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rec.Close() })
	s := &seen{Recorder: rec}
	rep := run(t, ctx, scenario(t, m.URL, attackYAML), s)
	for _, w := range rep.Warnings {
		if strings.Contains(w, "run log") {
			t.Errorf("warning: %s", w)
		}
	}
	return dir, s, rep
}

// Test 1: vegeta's own CLI reads the run log, and what it reports is what
// the recorder was given and what the run reported.
func TestVegetaReadsTheRunLog(t *testing.T) {
	m := newMesh(t)
	const n = 3000
	dir, s, rep := recordRun(t, context.Background(), fmt.Sprintf("  concurrency: 4\n  requests: %d", n), m)
	if s.n != n || rep.Metrics.Requests != n || m.hits.Load() != n {
		t.Fatalf("recorder %d, report %d, server %d requests; want %d", s.n, rep.Metrics.Requests, m.hits.Load(), n)
	}
	results := filepath.Join(dir, runlog.ResultsFile)

	var vm vegeta.Metrics
	if err := json.Unmarshal(vegeta_(t, "report", "-type=json", results), &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Requests != uint64(s.n) {
		t.Errorf("vegeta report: %d requests, recorded %d", vm.Requests, s.n)
	}
	if fmt.Sprint(vm.StatusCodes) != fmt.Sprint(s.codes) || fmt.Sprint(vm.StatusCodes) != fmt.Sprint(rep.Metrics.StatusCodes) {
		t.Errorf("status codes: vegeta %v, recorded %v, report %v", vm.StatusCodes, s.codes, rep.Metrics.StatusCodes)
	}
	if s.codes["503"] == 0 || s.codes["200"] == 0 {
		t.Fatalf("the server was to answer both 200 and 503: %v", s.codes)
	}
	if want := float64(s.ok) / float64(s.n); vm.Success != want || vm.Success != rep.Metrics.Success {
		t.Errorf("success: vegeta %v, recorded %v, report %v", vm.Success, want, rep.Metrics.Success)
	}
	if vm.Latencies.Mean != rep.Metrics.Latency.Mean || vm.Latencies.Max != rep.Metrics.Latency.Max || vm.BytesIn.Total != rep.Metrics.BytesIn {
		t.Errorf("vegeta mean %v max %v in %d, report mean %v max %v in %d", vm.Latencies.Mean, vm.Latencies.Max, vm.BytesIn.Total,
			rep.Metrics.Latency.Mean, rep.Metrics.Latency.Max, rep.Metrics.BytesIn)
	}

	// vegeta plot: every result drawn (3000 is under its 4000-point
	// threshold), OK and ERROR as the run counted them.
	page := vegeta_(t, "plot", "-title=runlog", results)
	counts := plotCounts(t, page)
	if counts[": OK"] != s.ok || counts[": ERROR"] != s.n-s.ok || len(counts) != 2 {
		t.Errorf("vegeta plot series %v, want %d OK and %d ERROR", counts, s.ok, s.n-s.ok)
	}

	// Our plot: one series per cluster, and its failures in red.
	var buf bytes.Buffer
	if err := runlog.Plot(&buf, dir, "run <1>"); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{}
	for _, a := range s.by {
		want[": "+runlog.PlotLabel(a)]++
	}
	if got := plotCounts(t, buf.Bytes()); fmt.Sprint(got) != fmt.Sprint(want) || len(got) != 6 {
		t.Errorf("runlog.Plot series %v, want %v", got, want)
	}
	if !bytes.Contains(buf.Bytes(), []byte("<title>run &lt;1&gt;</title>")) {
		t.Error("the title is not in the page, HTML-escaped")
	}
}

var (
	optsRE = regexp.MustCompile(`(?s)const opts = (\{.*?\});\s*const rowData = (\[.*?\]);`)
)

// plotCounts reads a vegeta plot page back: points per series label.
func plotCounts(t *testing.T, page []byte) map[string]int {
	t.Helper()
	if !bytes.HasPrefix(page, []byte("<!doctype html>")) {
		t.Fatalf("not an HTML page: %.100q", page)
	}
	m := optsRE.FindSubmatch(page)
	if m == nil {
		t.Fatal("no plot data in the page")
	}
	var opts struct{ Labels []string }
	var rows [][]*float64
	if err := json.Unmarshal(m[1], &opts); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(m[2], &rows); err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for _, row := range rows {
		for i, v := range row[1:] {
			if v != nil {
				counts[opts.Labels[i+1]]++
			}
		}
	}
	return counts
}

// Test 2: every result comes back with its own attribution, which is who
// the server says answered that request id.
func TestReadResultsJoins(t *testing.T) {
	m := newMesh(t)
	dir, s, _ := recordRun(t, context.Background(), "  concurrency: 4\n  requests: 2000", m)
	n, rids := 0, map[string]bool{}
	err := runlog.ReadResults(dir, func(r *vegeta.Result, a runlog.Attribution) error {
		n++
		want, ok := s.by[r.Seq]
		if !ok || a != want {
			return fmt.Errorf("seq %d: read %+v, recorded %+v", r.Seq, a, want)
		}
		if rids[a.RequestID] || a.ConnID == 0 || r.Code != a.Code || r.Body != nil {
			return fmt.Errorf("seq %d: duplicate id, no connection, code or a body: %+v %+v", r.Seq, a, r)
		}
		rids[a.RequestID] = true
		m.mu.Lock()
		c := m.answered[a.RequestID]
		m.mu.Unlock()
		if a.Cluster != c || a.Pod != "callme-"+c+"-0" {
			return fmt.Errorf("%s: attributed to %s/%s, the server answered from %s", a.RequestID, a.Cluster, a.Pod, c)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != s.n || n != 2000 {
		t.Errorf("read %d results, recorded %d", n, s.n)
	}
}

// Test 2: an interrupted run leaves both files whole, holding every result
// the run measured, and vegeta reads them.
func TestInterruptedRunIsComplete(t *testing.T) {
	m := newMesh(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.onHit = func(n int64) {
		if n == 1500 {
			cancel()
		}
	}
	dir, s, rep := recordRun(t, ctx, "  concurrency: 8\n  requests: 1000000", m)
	if !rep.Attack.Interrupted || rep.Metrics.Requests < 1500 || rep.Metrics.Requests > 100000 {
		t.Fatalf("not interrupted midway: %+v, %d requests", rep.Attack, rep.Metrics.Requests)
	}
	n := 0
	if err := runlog.ReadResults(dir, func(*vegeta.Result, runlog.Attribution) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	if int64(n) != rep.Metrics.Requests || n != s.n {
		t.Errorf("run log %d results, report %d, recorder %d", n, rep.Metrics.Requests, s.n)
	}
	var vm vegeta.Metrics
	if err := json.Unmarshal(vegeta_(t, "report", "-type=json", filepath.Join(dir, runlog.ResultsFile)), &vm); err != nil {
		t.Fatal(err)
	}
	if vm.Requests != uint64(n) {
		t.Errorf("vegeta reads %d results, ReadResults %d", vm.Requests, n)
	}
}

// Test 3: a disk that fills up stops the recording, not the attack: the
// counts are the attack's, and the report warns once.
func TestDiskFullWarnsAndTheRunGoesOn(t *testing.T) {
	full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
	if err != nil {
		t.Skip("no /dev/full:", err)
	}
	attr, err := os.Create(filepath.Join(t.TempDir(), runlog.AttributionFile))
	if err != nil {
		t.Fatal(err)
	}
	m := newMesh(t)
	const n = 4000
	rep := run(t, context.Background(), scenario(t, m.URL, fmt.Sprintf("  concurrency: 4\n  requests: %d", n)), runlog.NewOn(full, attr))
	if rep.Metrics.Requests != n || m.hits.Load() != n {
		t.Errorf("report %d requests, server %d; want %d", rep.Metrics.Requests, m.hits.Load(), n)
	}
	var warned []string
	for _, w := range rep.Warnings {
		if strings.HasPrefix(w, "run log: ") {
			warned = append(warned, w)
		}
	}
	if len(warned) != 1 || !strings.Contains(warned[0], "no space left on device") || !strings.Contains(warned[0], "the attack went on") {
		t.Errorf("warnings %q", rep.Warnings)
	}
}

// synthRun records n made-up results with the given cluster of each,
// recording none of the seqs skip says.
func synthRun(t testing.TB, n int, cluster func(i int) string, skip func(i int) bool) string {
	dir := t.TempDir()
	rec, err := runlog.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for i := range n {
		if skip != nil && skip(i) {
			continue
		}
		code, ok := uint16(200), i%49 != 7
		if !ok {
			code = 503
		}
		rec.Record(&attack.Result{Result: &vegeta.Result{Seq: uint64(i), Code: code,
			Timestamp: start.Add(time.Duration(i) * 50 * time.Microsecond), Latency: time.Duration(1e6 + (i*7919)%1e6)},
			RequestID: fmt.Sprint("r-", i), ConnID: uint64(i%16 + 1)},
			attribution.Identity{Cluster: cluster(i)}, ok)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// A plot of many requests stays small: each series is downsampled.
func TestPlotDownsamples(t *testing.T) {
	const n = 100_000
	dir := synthRun(t, n, func(i int) string { return []string{"c1", "c2", "c3", ""}[i%4] }, nil)
	var buf bytes.Buffer
	if err := runlog.Plot(&buf, dir, "big"); err != nil {
		t.Fatal(err)
	}
	counts := plotCounts(t, buf.Bytes())
	if len(counts) != 8 { // 3 clusters and unattributed, each OK and ERROR
		t.Errorf("series %v", counts)
	}
	for l, c := range counts {
		if c > runlog.PlotPoints || c < 100 {
			t.Errorf("%s: %d points", l, c)
		}
	}
	if buf.Len() > 2<<20 {
		t.Errorf("%d bytes for %d requests", buf.Len(), n)
	}
	t.Logf("%d requests: %d KB of HTML, series %v", n, buf.Len()>>10, counts)
}

// Results missing from a cut log do not stop the plot at the first gap
// (vegeta's plot waits for every earlier seq), and what a response said
// cannot break out of the page's script.
func TestPlotGapsAndHostileLabels(t *testing.T) {
	const n = 3000
	dir := synthRun(t, n, func(i int) string {
		if i%2 == 0 {
			return "</script><script>alert(1)</script>"
		}
		return "c\"1\n"
	}, func(i int) bool { return i >= 100 && i < 110 || i == 2000 })
	var buf bytes.Buffer
	if err := runlog.Plot(&buf, dir, "gaps"); err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, c := range plotCounts(t, buf.Bytes()) {
		total += c
	}
	if total != n-11 {
		t.Errorf("%d points plotted of %d recorded", total, n-11)
	}
	if bytes.Contains(buf.Bytes(), []byte("alert(1)</script>")) {
		t.Error("a cluster name broke out of the page's script")
	}
}

// A run killed before Close leaves its files cut anywhere: what was whole
// is read and plotted, the cut is an ErrTruncated.
func TestCutLogReadsUpToTheCut(t *testing.T) {
	dir := synthRun(t, 1000, func(int) string { return "c1" }, nil)
	p := filepath.Join(dir, runlog.ResultsFile)
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, data[:len(data)*2/3], 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := runlog.ReadResults(dir, func(*vegeta.Result, runlog.Attribution) error { n++; return nil })
	if !errors.Is(err, runlog.ErrTruncated) || n < 600 || n > 700 {
		t.Fatalf("%d results, %v", n, err)
	}
	var buf bytes.Buffer
	if err := runlog.Plot(&buf, dir, "cut"); !errors.Is(err, runlog.ErrTruncated) {
		t.Fatalf("Plot: %v", err)
	}
	total := 0
	for _, c := range plotCounts(t, buf.Bytes()) {
		total += c
	}
	if total != n {
		t.Errorf("plotted %d of the %d whole results", total, n)
	}
}

// What the report redacts does not reach the disk either.
func TestRedactedOnDisk(t *testing.T) {
	dir := t.TempDir()
	rec, err := runlog.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	raw := "http://user:hunter2@127.0.0.1:1/p?token=s3cret&x=1"
	for i := range 3 {
		rec.Record(&attack.Result{Result: &vegeta.Result{Seq: uint64(i), Timestamp: time.Now(), URL: raw,
			Error: `Get "` + raw + `": dial tcp 127.0.0.1:1: connect: connection refused`}}, attribution.Identity{}, false)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{runlog.ResultsFile, runlog.AttributionFile} {
		data, _ := os.ReadFile(filepath.Join(dir, f))
		if bytes.Contains(data, []byte("hunter2")) || bytes.Contains(data, []byte("s3cret")) {
			t.Errorf("%s holds a credential", f)
		}
	}
	err = runlog.ReadResults(dir, func(r *vegeta.Result, _ runlog.Attribution) error {
		if r.URL != "http://user:xxxxx@127.0.0.1:1/p?token=REDACTED&x=1" || !strings.Contains(r.Error, "connection refused") || !strings.Contains(r.URL, "REDACTED") {
			return fmt.Errorf("url %q error %q", r.URL, r.Error)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
