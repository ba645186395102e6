package e2e

import (
	"context"
	"fmt"
	"github.com/mesh-verify/mesh-verify/runlog"
	vegeta "github.com/tsenart/vegeta/v12/lib"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
)

// threeClusters starts one pod per cluster c1..c3 behind nginx with the
// given upstream weights (0 = not in the upstream).
func threeClusters(t *testing.T, w1, w2, w3 int) (*nginxProxy, []*pod) {
	pods := []*pod{
		startPod(t, "callme-c1-0", "c1", "v1"),
		startPod(t, "callme-c2-0", "c2", "v2"),
		startPod(t, "callme-c3-0", "c3", "v2"),
	}
	ws := map[*pod]int{}
	for i, w := range []int{w1, w2, w3} {
		if w > 0 {
			ws[pods[i]] = w
		}
	}
	return startNginx(t, upstreamLines(ws)), pods
}

func scenario(url, attack, expect string) string {
	return fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata:
  name: nginx-split
clusters:
  - name: c1
  - name: c2
  - name: c3
target:
  url: %s/callme/ping?id={{.RequestID}}
attack:
%s
attribution:
  preset: tutorial
  rules:
    - body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'
statistics:
  confidence: 0.95
  margin: 5%%
expect:
%s
`, url, attack, expect)
}

func served(pods []*pod) (total int64, per map[string]int64) {
	per = map[string]int64{}
	for _, p := range pods {
		n := p.hits.Load()
		total += n
		per[p.cluster] += n
	}
	return total, per
}

func TestRunVerdictsAgainstNginx(t *testing.T) {
	proxy, pods := threeClusters(t, 2, 1, 1) // nginx: 50% c1, 25% c2, 25% c3
	cases := []struct {
		name    string
		attack  string
		expect  string
		code    int
		verdict assert.Verdict
	}{
		{
			name:    "true split passes",
			attack:  "  rate: 400/s\n  requests: 2400\n  duration: 30s",
			expect:  "  - name: weighted\n    split:\n      weights: {c1: 2, c2: 1, c3: 1}",
			code:    0,
			verdict: assert.Pass,
		},
		{
			// Each request on its own connection: nginx's smooth round robin
			// meets keep-alive connections in a pattern the data show as
			// dependence, which makes the evidence of 2400 requests worth
			// far fewer draws (docs/statistics.md §3.3); one connection per
			// request is one draw per request.
			name:    "wrong split fails",
			attack:  "  rate: 400/s\n  requests: 2400\n  duration: 30s\n  keepAlive: false",
			expect:  "  - name: even\n    split:\n      model: equal",
			code:    1,
			verdict: assert.Fail,
		},
		{
			name:    "too few requests are inconclusive",
			attack:  "  concurrency: 2\n  repetitions: 10",
			expect:  "  - name: weighted\n    split:\n      weights: {c1: 2, c2: 1, c3: 1}",
			code:    2,
			verdict: assert.Inconclusive,
		},
		{
			// siege's default, a connection per request: over 5 keep-alive
			// connections the data could not show the requests independent,
			// and a clean success rate would be worth 5 draws
			// (docs/statistics.md §3.3).
			name:    "siege-style closed loop passes reached and success",
			attack:  "  concurrency: 5\n  repetitions: 200\n  keepAlive: false",
			expect:  "  - reached: {buckets: [c1, c2, c3]}\n  - successRate: {atLeast: 95%}\n  - latency: {percentile: 99, below: 2s}\n  - never: {by: version, buckets: [v9]}",
			code:    0,
			verdict: assert.Pass,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, beforePer := served(pods)
			f := writeScenario(t, scenario(proxy.url, tc.attack, tc.expect))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := runBinary(t, ctx, "run", f)
			if r.Code != tc.code {
				t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.Code, tc.code, r.Stdout, r.Stderr)
			}
			if r.Report() == nil {
				t.Fatalf("no report.json written\n%s", r.Stderr)
			}
			if r.Report().Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s\n%s", r.Report().Verdict, tc.verdict, r.Stdout)
			}
			after, afterPer := served(pods)
			if got, want := r.Report().Metrics.Requests, after-before; got != want {
				t.Errorf("report counts %d requests, the servers saw %d", got, want)
			}
			// The per-cluster counts in the report are the servers' own.
			for _, d := range r.Report().Dimensions {
				if d.Name != "cluster" {
					continue
				}
				for _, b := range d.Buckets {
					if want := afterPer[b.Name] - beforePer[b.Name]; b.Count != want {
						t.Errorf("cluster %s: report %d, servers %d", b.Name, b.Count, want)
					}
				}
			}
			if !strings.Contains(r.Stdout, "VERDICT: "+tc.verdict.String()) {
				t.Errorf("terminal summary lacks the verdict:\n%s", r.Stdout)
			}
			for _, f := range []string{"report.json", "junit.xml", "summary.md"} {
				if _, err := os.Stat(filepath.Join(r.Dir(), f)); err != nil {
					t.Errorf("run directory lacks %s: %v", f, err)
				}
			}
		})
	}
}

func TestRequestIDsReachTheServers(t *testing.T) {
	proxy, pods := threeClusters(t, 1, 1, 1)
	f := writeScenario(t, scenario(proxy.url, "  concurrency: 3\n  repetitions: 30", "  - reached: {buckets: [c1, c2, c3]}"))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runBinary(t, ctx, "run", f)
	if r.Code != 0 {
		t.Fatalf("exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	seen := 0
	for _, p := range pods {
		p.mu.Lock()
		for id, n := range p.ids {
			if !strings.HasPrefix(id, r.Report().RunID+"-") {
				t.Errorf("pod %s saw request id %q, not of run %s", p.name, id, r.Report().RunID)
			}
			if n != 1 {
				t.Errorf("request id %s seen %d times", id, n)
			}
			seen++
		}
		p.mu.Unlock()
	}
	if seen != 90 {
		t.Errorf("servers saw %d distinct request ids, want 90", seen)
	}
}

func TestUnreachableTargetIsASetupError(t *testing.T) {
	port := freePort(t) // nothing listens there any more
	f := writeScenario(t, scenario(fmt.Sprintf("http://127.0.0.1:%d", port), "  rate: 10/s\n  duration: 30s", "  - reached: {buckets: [c1]}"))
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := runBinary(t, ctx, "run", f)
	if r.Code != 3 {
		t.Fatalf("exit %d, want 3\n%s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, "cannot reach target") || !strings.Contains(r.Stderr, "connection refused") {
		t.Errorf("stderr does not explain: %s", r.Stderr)
	}
	if el := time.Since(start); el > 20*time.Second {
		t.Errorf("took %s to give up", el)
	}
}

func TestInterruptWritesWhatWasMeasured(t *testing.T) {
	proxy, pods := threeClusters(t, 1, 1, 0)
	f := writeScenario(t, scenario(proxy.url, "  rate: 100/s\n  duration: 60s", "  - reached: {buckets: [c1, c2]}"))
	out := t.TempDir()
	cmd := exec.Command(mv.Path, "run", f, "--out", out, "--progress", "plain")
	var so strings.Builder
	cmd.Stdout = &so
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Interrupt mid-attack: once the servers have seen requests.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if n, _ := served(pods); n >= 50 {
			break
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			t.Fatal("the attack did not start within 30s")
		}
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("mesh-verify did not stop after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130\n%s", code, so.String())
	}
	rep, runDir := readReport(t, out)
	if rep == nil {
		t.Fatal("interrupted run wrote no report")
	}
	total, _ := served(pods)
	if rep.Metrics.Requests != total || total == 0 {
		t.Errorf("report has %d requests, servers saw %d", rep.Metrics.Requests, total)
	}
	if !rep.Attack.Interrupted {
		t.Error("report does not say the run was interrupted")
	}
	// The streamed results hold every request measured, and the saved run
	// renders again in every format with the run's exit code.
	var recorded int64
	if err := runlog.ReadResults(runDir, func(*vegeta.Result, runlog.Attribution) error { recorded++; return nil }); err != nil {
		t.Fatalf("read the run's results: %v", err)
	}
	if recorded != rep.Metrics.Requests {
		t.Errorf("results.bin holds %d results, report.json counts %d requests", recorded, rep.Metrics.Requests)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	again := runBinary(t, ctx, "report", runDir, "--format", "html,json,junit,md,plot", "--out", t.TempDir())
	if again.Code != 130 || strings.Count(again.Stdout, "wrote ") != 5 {
		t.Errorf("report of the interrupted run: exit %d, want 130 and 5 files\n%s\n%s", again.Code, again.Stdout, again.Stderr)
	}
}

func TestInvalidScenarioExitsWithInputError(t *testing.T) {
	f := writeScenario(t, "apiVersion: mesh-verify.io/v1alpha1\nkind: Scenario\nmetadata: {name: x}\nattack:\n  rate: fast\n")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runBinary(t, ctx, "run", f)
	if r.Code != 4 {
		t.Fatalf("exit %d, want 4: %s", r.Code, r.Stderr)
	}
	if !strings.Contains(r.Stderr, f+":5:") || !strings.Contains(r.Stderr, "attack.rate") {
		t.Errorf("error does not name file:line and field: %s", r.Stderr)
	}
}
