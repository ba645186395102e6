package gate_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/reports"
)

// --set changes what runs: another entry (gate-c, 50/50 from the start),
// another rate and duration; the report and the scenario as run say so,
// and report.json's command keeps the flags.
func TestSetChangesWhatRuns(t *testing.T) {
	r := runGate(t, time.Minute, "--set", "target.portForward.resource=svc/gate-c",
		"--set", "attack.rate=60/s", "--set", "attack.duration=3s")
	rep := r.Report()
	if rep == nil {
		t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if r.Code != 0 || rep.Verdict != assert.Pass {
		t.Fatalf("exit %d, verdict %s; want a PASS through gate-c\n%s\n%s", r.Code, rep.Verdict, r.Stdout, r.Stderr)
	}
	if a := rep.Attack; math.Abs(a.RequestedRate-60) > 0.5 || rep.Metrics.Requests < 170 || rep.Metrics.Requests > 190 {
		t.Errorf("attack: requested %.1f/s, %d requests; want 60/s for 3 s (180)", a.RequestedRate, rep.Metrics.Requests)
	}
	if got := strings.Join(rep.Command, " "); !strings.Contains(got, "--set attack.rate=60/s") || !strings.Contains(got, "--set target.portForward.resource=svc/gate-c") {
		t.Errorf("report command %q lost the --set flags", got)
	}
	if rep.Kubernetes == nil || !strings.Contains(rep.Target, "gate-c") {
		t.Errorf("target %q, want gate-c", rep.Target)
	}
	t.Logf("--set run: %d requests in %s", rep.Metrics.Requests, r.Took.Round(time.Millisecond))

	// An unknown field through --set is invalid input naming the flag.
	bad := runGate(t, 30*time.Second, "--set", "attack.rat=5")
	if bad.Code != 4 || !strings.Contains(bad.Stderr, `--set attack.rat=5: attack.rat: unknown field, did you mean "rate"?`) || len(bad.Reports) != 0 {
		t.Errorf("--set attack.rat=5: exit %d, %d reports, stderr:\n%s", bad.Code, len(bad.Reports), bad.Stderr)
	}
}

// --wait-ready gives up in the time given, exit 3, naming what is not
// ready: here a selector that matches no pod.
func TestWaitReadyNamesWhatIsNotReady(t *testing.T) {
	r := runGate(t, time.Minute, "--set", "observe[0].selector=app=callme-service,version=v9",
		"--wait-ready", "3s")
	if r.Code != 3 {
		t.Fatalf("exit %d, want 3\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	for _, w := range []string{"--wait-ready 3s: not ready in time", "cluster c1: namespace sample: no pod matches selector app=callme-service,version=v9",
		"cluster c2: namespace sample: no pod matches selector", "wait-ready: "} {
		if !strings.Contains(r.Stderr, w) {
			t.Errorf("stderr does not say %q:\n%s", w, r.Stderr)
		}
	}
	if r.Took < 3*time.Second || r.Took > 20*time.Second {
		t.Errorf("took %s, want a little over 3 s", r.Took)
	}
	// Everything ready: the run goes on and passes (gate-c is 50/50).
	ok := runGate(t, time.Minute, "--set", "target.portForward.resource=svc/gate-c", "--wait-ready", "30s")
	if ok.Code != 0 || !strings.Contains(ok.Stderr, "wait-ready: every observed workload is ready") {
		t.Errorf("ready lab: exit %d\n%s", ok.Code, ok.Stderr)
	}
}

// --converge 2 --within 90s through gate-a, whose VirtualService sends
// everything to v1 until the test patches it to 50/50 with kubectl once
// the first attempt has written its report: that attempt FAILs, then two
// pass, exit 0, and the last report.json lists every attempt.
func TestConvergeAfterPush(t *testing.T) {
	l := gateLab(t)
	out := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var pushErr error
	go func() { defer close(done); pushErr = pushAfterFirstAttempt(ctx, t, l, out) }()
	// The push is over before the test ends, however it ends.
	defer func() { cancel(); <-done }()
	r := runGateIn(t, l, 2*time.Minute, "--converge", "2", "--within", "90s", "--out", out)
	cancel() // a run that ended before any report.json: the push gives up
	<-done
	if pushErr != nil {
		t.Fatalf("%v\n%s\n%s", pushErr, r.Stdout, r.Stderr)
	}
	t.Logf("patched VirtualService sample/callme-a to 50/50 after the first attempt")
	rep := r.Report()
	if rep == nil || rep.Converge == nil {
		t.Fatalf("no converge report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	c := rep.Converge
	logAttempts(t, c.Attempts)
	if r.Code != 0 || !c.Converged || rep.ExitCode != 0 {
		t.Fatalf("exit %d, converged %v, report exit %d; want 0, true, 0\n%s", r.Code, c.Converged, rep.ExitCode, r.Stderr)
	}
	n := len(c.Attempts)
	if n < 3 || c.Attempts[0].Verdict != assert.Fail || c.Attempts[0].ExitCode != 1 {
		t.Fatalf("%d attempts, first %+v; want a FAIL before the push, then passes", n, c.Attempts[0])
	}
	if c.Attempts[n-1].Verdict != assert.Pass || c.Attempts[n-2].Verdict != assert.Pass {
		t.Errorf("the last two attempts are not both PASS")
	}
	// Every attempt has its own run directory with its report.
	for i, a := range c.Attempts {
		if got, ok := r.Reports[a.RunID]; !ok || got.RunID != a.RunID {
			t.Errorf("attempt %d (%s) has no run directory with its report.json", i+1, a.RunID)
		}
	}
	if c.Need != 2 || c.Within != 90*time.Second || !strings.Contains(c.Reason, "2 consecutive passes") {
		t.Errorf("converge record %+v", c)
	}
	if !strings.HasPrefix(r.Stderr, "converge: re-running the whole scenario until 2 consecutive runs pass within 1m30s: no split follows") {
		t.Errorf("the first line does not say the gate re-runs whole scenarios:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stdout, "converge: 2 consecutive passes within 1m30s — converged") {
		t.Errorf("stdout does not list the attempts:\n%s", r.Stdout)
	}
}

// A deadline too short for any pass on a route nobody patches (gate-b's,
// all to v1): every attempt FAILs, exit 1, and the report lists them all.
func TestConvergeDeadlineTooShort(t *testing.T) {
	r := runGate(t, time.Minute, "--set", "target.portForward.resource=svc/gate-b",
		"--converge", "2", "--within", "4s")
	rep := r.Report()
	if rep == nil || rep.Converge == nil {
		t.Fatalf("no converge report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	c := rep.Converge
	logAttempts(t, c.Attempts)
	if r.Code != 1 || c.Converged || rep.ExitCode != 1 {
		t.Fatalf("exit %d, converged %v, report exit %d; want 1, false, 1\n%s", r.Code, c.Converged, rep.ExitCode, r.Stderr)
	}
	for i, a := range c.Attempts {
		if a.Verdict != assert.Fail || a.ExitCode != 1 || a.Reason == "" {
			t.Errorf("attempt %d: %+v; want a FAIL with its reason", i+1, a)
		}
		if _, ok := r.Reports[a.RunID]; !ok {
			t.Errorf("attempt %d (%s) has no run directory", i+1, a.RunID)
		}
	}
	if len(c.Attempts) != len(r.Reports) || !strings.Contains(c.Reason, "when --within 4s ended") {
		t.Errorf("%d attempts, %d run directories, reason %q", len(c.Attempts), len(r.Reports), c.Reason)
	}
}

func TestGateFlagsInvalid(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--within", "5s"}, "--within 5s needs --converge N"},
		{[]string{"--converge", "0", "--within", "5s"}, "--converge 0: want N ≥ 1"},
		{[]string{"--converge", "2"}, "--converge 2 needs --within"},
	} {
		r := runGate(t, 30*time.Second, tc.args...)
		if r.Code != 4 || !strings.Contains(r.Stderr, tc.want) || len(r.Reports) != 0 {
			t.Errorf("%v: exit %d, %d reports, stderr %q; want 4 naming %q", tc.args, r.Code, len(r.Reports), r.Stderr, tc.want)
		}
	}
}

// pushAfterFirstAttempt waits for the first attempt's report.json under
// out, then moves gate-a's VirtualService to 50/50 with kubectl patch, as
// a user's `kubectl apply` of a new weight reaches istiod.
func pushAfterFirstAttempt(ctx context.Context, t *testing.T, l *lab.Lab, out string) error {
	for {
		if done, _ := filepath.Glob(filepath.Join(out, "*", "report.json")); len(done) > 0 {
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no attempt wrote its report.json under %s: %w", out, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
	patch := `[{"op": "replace", "path": "/spec/http/0/route/0/weight", "value": 50},` +
		`{"op": "replace", "path": "/spec/http/0/route/1/weight", "value": 50}]`
	if o, err := e2etest.KubectlErr(t, l, nil, "c1", "-n", "sample", "patch", "virtualservice", "callme-a", "--type", "json", "-p", patch); err != nil {
		return fmt.Errorf("kubectl patch virtualservice callme-a: %w\n%s", err, o)
	}
	return nil
}

func logAttempts(t *testing.T, as []reports.Attempt) {
	t.Helper()
	for i, a := range as {
		t.Logf("attempt %d %s: %s exit %d in %s — %s", i+1, a.RunID, a.Verdict, a.ExitCode, a.Duration.Round(time.Millisecond), a.Reason)
	}
}

// followScenario expects what gate-d's VirtualService says, following it
// through the run: a split a converge gate judges in the windows of one
// run. Reads are bounded at 500ms so that the answers are held back
// 1.5 s (poll + 2 reads) before a window can seal.
const followScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata:
  name: gate-follow
  description: "the split gate-d's VirtualService sets, followed through a push"
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: sample, resource: svc/gate-d, port: "8080"}
  path: /callme/ping
attack:
  rate: 100/s
  duration: 5s
  keepAlive: false
attribution:
  preset: tutorial
observe:
  - name: callme
    namespace: sample
    selector: app=callme-service
expect:
  - name: as the VirtualService says
    split:
      by: version
      fromMesh: {virtualService: sample/callme-d, gateway: sample/gate-d}
      margin: 15%
      windows: {follow: true, poll: 500ms, readTimeout: 500ms, settle: 2s}
`

// --converge 3 --within 60s on a split that follows gate-d's
// VirtualService (100/0) makes one run: the test patches the object to
// 50/50 with kubectl once the gate has judged window 1, the run follows
// the change (a settling window, then windows against 50/50), and the
// gate PASSes when three windows in a row after the change pass,
// stopping the attack long before 60 s; report.json lists the windows,
// the change with its resourceVersion and the time to converge.
func TestConvergeOneRunAfterPush(t *testing.T) {
	l := gateLab(t)
	restoreGateD(t, l)
	g := startFollowGate(t, l, "--converge", "3", "--within", "60s", "--converge-window", "4s")
	g.waitWindow1(t)
	if !strings.Contains(g.stderr.String(), "converge: window 1 (0s–4s): PASS") {
		t.Errorf("window 1 did not PASS against 100/0:\n%s", g.stderr.String())
	}
	patched := time.Since(g.began)
	e2etest.Kubectl(t, l, "c1", "-n", "sample", "patch", "virtualservice", "callme-d", "--type", "json", "-p", weights(50, 50))
	err := <-g.exited
	took := time.Since(g.began)
	code := g.cmd.ProcessState.ExitCode()
	out, stdout, stderr := g.out, &g.stdout, &g.stderr
	t.Logf("patched after %s; the run ended after %s (%v)", patched.Round(time.Millisecond), took.Round(time.Millisecond), err)
	if !strings.HasPrefix(stderr.String(), `converge: one run, judging the windows of split "as the VirtualService says" as they seal`) {
		t.Errorf("the first line does not say how the gate runs:\n%s", stderr.String())
	}
	reps := e2etest.ReadReports(t, out)
	if len(reps) != 1 {
		t.Fatalf("%d run directories, want one run\n%s", len(reps), stderr.String())
	}
	var rep *reports.Report
	for _, r := range reps {
		rep = r
	}
	c := rep.Converge
	if code != 0 || rep.ExitCode != 0 || c == nil || !c.Converged || c.Mode != reports.ConvergeWindows || c.Stopped != "converged" {
		t.Fatalf("exit %d, report exit %d, converge %+v; want 0, converged in one run, stopped on convergence\n%s\n%s", code, rep.ExitCode, c, stdout.String(), stderr.String())
	}
	// It stopped early, with the run complete (not interrupted).
	if d := rep.Attack.Elapsed; d > 45*time.Second || rep.Attack.Interrupted || took > 55*time.Second {
		t.Errorf("the attack lasted %s (interrupted %v), the run %s: want a stop well before --within 60s", d, rep.Attack.Interrupted, took)
	}
	e := rep.Expectation[0]
	ws := e.Windows
	if ws == nil || c.LastChange < 2 || c.ChangeAt == nil || c.TimeToConverge == nil || c.ConvergedAt == nil || len(c.Windows) != 3 {
		t.Fatalf("converge record %+v, windows %+v", c, ws)
	}
	change := ws.Windows[c.LastChange-1]
	first := ws.Windows[0]
	if !change.Settling || change.Source == nil || first.Source == nil || change.Source.ResourceVersion == first.Source.ResourceVersion ||
		first.Expected["v1"] != 1 || change.Expected["v2"] != 0.5 {
		t.Errorf("window 1 %+v, the change's window %+v: want 100/0, then a settling window at 50/50 with a new resourceVersion", first, change)
	}
	for _, i := range c.Windows {
		if w := ws.Windows[i-1]; w.Verdict != assert.Pass || w.Expected["v2"] != 0.5 || i <= c.LastChange {
			t.Errorf("window %d of the streak: %s expecting %v", i, w.Verdict, w.Expected)
		}
	}
	if *c.TimeToConverge != *c.ConvergedAt-*c.ChangeAt || *c.TimeToConverge <= 0 {
		t.Errorf("time to converge %s, converged at %s, change at %s", *c.TimeToConverge, *c.ConvergedAt, *c.ChangeAt)
	}
	t.Logf("change at %s (window %d, resourceVersion %s → %s); converged at %s, %s after it; %d windows, %d requests; %s",
		*c.ChangeAt, c.LastChange, first.Source.ResourceVersion, change.Source.ResourceVersion, *c.ConvergedAt, *c.TimeToConverge, len(ws.Windows), rep.Metrics.Requests, c.Reason)
}

// weights is the JSON patch that sets gate-d's two route weights.
func weights(v1, v2 int) string {
	const vsPath = "/spec/http/0/route/%d/weight"
	return fmt.Sprintf(`[{"op": "replace", "path": "`+vsPath+`", "value": %d}, {"op": "replace", "path": "`+vsPath+`", "value": %d}]`, 0, v1, 1, v2)
}

// restoreGateD puts gate-d's VirtualService back as the shared lab has
// it, 100/0 and obeyed by the data plane, when the test ends.
func restoreGateD(t *testing.T, l *lab.Lab) {
	t.Helper()
	t.Cleanup(func() {
		e2etest.Kubectl(t, l, "c1", "-n", "sample", "patch", "virtualservice", "callme-d", "--type", "json", "-p", weights(100, 0))
		e2etest.Kubectl(t, l, "c1", "-n", "sample", "annotate", "virtualservice", "callme-d", daemon.FreezeAnnotation+"-")
	})
}

// followGate is `mesh-verify run --converge` on followScenario in the
// lab, started and not waited for.
type followGate struct {
	cmd            *exec.Cmd
	out            string
	stdout, stderr e2etest.SyncBuffer
	began          time.Time
	exited         chan error
}

func startFollowGate(t *testing.T, l *lab.Lab, args ...string) *followGate {
	t.Helper()
	sc := e2etest.WriteFile(t, "scenario.yaml", followScenario)
	g := &followGate{out: t.TempDir(), exited: make(chan error, 1)}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	g.cmd = exec.CommandContext(ctx, mv.Path, append([]string{"run", sc, "--kubeconfig", l.Kubeconfig, "--out", g.out, "--progress", "plain"}, args...)...)
	g.cmd.Stdout, g.cmd.Stderr = &g.stdout, &g.stderr
	g.began = time.Now()
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { g.exited <- g.cmd.Wait() }()
	return g
}

// waitWindow1 waits until the gate has judged window 1.
func (g *followGate) waitWindow1(t *testing.T) {
	t.Helper()
	e2etest.Poll(t, 50*time.Second, "the gate to judge window 1", func() error {
		if strings.Contains(g.stderr.String(), "converge: window 1 ") {
			return nil
		}
		select {
		case err := <-g.exited:
			g.exited <- err
			return fmt.Errorf("the run ended first (%v)\n%s\n%s", err, g.stdout.String(), g.stderr.String())
		default:
		}
		return errors.New("not yet")
	})
}

// report is the one report.json the gate wrote.
func (g *followGate) report(t *testing.T) *reports.Report {
	t.Helper()
	reps := e2etest.ReadReports(t, g.out)
	if len(reps) != 1 {
		t.Fatalf("%d run directories, want one run\n%s", len(reps), g.stderr.String())
	}
	for _, r := range reps {
		return r
	}
	return nil
}

// Ctrl-C during a gate that judges one run's windows ends it as any
// interrupted run: no new requests, the reports written with what was
// measured, exit 130; report.json says the attack stopped on the
// interruption with the windows judged so far, and renders again in
// every format with the same exit code.
func TestConvergeOneRunInterrupted(t *testing.T) {
	l := gateLab(t)
	g := startFollowGate(t, l, "--converge", "3", "--within", "60s", "--converge-window", "4s")
	g.waitWindow1(t)
	if err := g.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.exited:
	case <-time.After(30 * time.Second):
		_ = g.cmd.Process.Kill()
		t.Fatalf("mesh-verify did not stop within 30s of SIGINT\n%s", g.stderr.String())
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 130 {
		t.Fatalf("exit %d, want 130\n%s\n%s", code, g.stdout.String(), g.stderr.String())
	}
	rep := g.report(t)
	c := rep.Converge
	if rep.ExitCode != 130 || !rep.Attack.Interrupted || c == nil || c.Mode != reports.ConvergeWindows || c.Stopped != "interrupted" || !c.Done || c.Converged || c.Judged < 1 {
		t.Fatalf("report exit %d, interrupted %v, converge %+v; want 130, an interrupted windows gate with window 1 judged\n%s", rep.ExitCode, rep.Attack.Interrupted, c, g.stderr.String())
	}
	e := rep.Expectation[0]
	if e.Windows == nil || len(e.Windows.Windows) < 2 || e.Windows.Windows[0].Verdict != assert.Pass || rep.Metrics.Requests == 0 {
		t.Errorf("windows %+v, %d requests: want window 1 PASS and the window open at the interruption", e.Windows, rep.Metrics.Requests)
	}
	if !strings.Contains(e.Reason, "by the interruption") {
		t.Errorf("split's reason %q does not say the gate ended at the interruption", e.Reason)
	}
	dirs, _ := filepath.Glob(filepath.Join(g.out, "*", "report.json"))
	md := filepath.Join(t.TempDir(), "md")
	again := mv.Run(t, e2etest.Cmd{Timeout: time.Minute}, "report", filepath.Dir(dirs[0]), "--format", "html,json,md", "--out", md)
	if again.Code != 130 || strings.Count(again.Stdout, "wrote ") != 3 {
		t.Errorf("report of the interrupted gate: exit %d, want 130 and 3 files\n%s\n%s", again.Code, again.Stdout, again.Stderr)
	}
	t.Logf("interrupted after %s: %d windows, %d judged, %d requests; %s", rep.Attack.Elapsed.Round(time.Millisecond), len(e.Windows.Windows), c.Judged, rep.Metrics.Requests, c.Reason)
}

// A data plane that disobeys the object (the lab's fault switch keeps
// 100/0 while the VirtualService says 50/50) fails the gate at
// --within: every window FAILs, the gate never converges, and the run
// exits 1 (a mesh failure, not INCONCLUSIVE nor an infrastructure
// fault) naming the windows that failed.
func TestConvergeOneRunFailsAtDeadline(t *testing.T) {
	l := gateLab(t)
	restoreGateD(t, l)
	e2etest.Kubectl(t, l, "c1", "-n", "sample", "annotate", "--overwrite", "virtualservice", "callme-d", daemon.FreezeAnnotation+"=true")
	e2etest.Kubectl(t, l, "c1", "-n", "sample", "patch", "virtualservice", "callme-d", "--type", "json", "-p", weights(50, 50))
	g := startFollowGate(t, l, "--converge", "2", "--within", "12s", "--converge-window", "4s")
	select {
	case <-g.exited:
	case <-time.After(90 * time.Second):
		_ = g.cmd.Process.Kill()
		t.Fatalf("the gate did not end within 90s\n%s", g.stderr.String())
	}
	code := g.cmd.ProcessState.ExitCode()
	rep := g.report(t)
	c := rep.Converge
	if code != 1 || rep.ExitCode != 1 || c == nil || c.Converged || len(c.FailedWindows) == 0 || c.Looks != 3 || rep.Attack.Interrupted {
		t.Fatalf("exit %d, report exit %d, converge %+v; want 1, not converged, the failed windows named\n%s\n%s", code, rep.ExitCode, c, g.stdout.String(), g.stderr.String())
	}
	if c.Stopped != "deadline" && c.Stopped != "looks spent" {
		t.Errorf("stopped %q, want the deadline or the looks spent", c.Stopped)
	}
	if e := rep.Expectation[0]; e.Verdict != assert.Fail || !strings.Contains(e.Reason, "FAILed") {
		t.Errorf("split %s: %q, want FAIL naming the windows", e.Verdict, e.Reason)
	}
	t.Logf("stopped (%s) after %s: %s", c.Stopped, rep.Attack.Elapsed.Round(time.Millisecond), c.Reason)
}

// A batch gates each scenario on its own: two scenarios whose split
// follows gate-d's VirtualService (100/0, as the lab routes) each make
// one run that converges on two windows and stops early, each with its
// own run directory and converge record, and the batch exits 0.
func TestConvergeOneRunBatch(t *testing.T) {
	l := gateLab(t)
	var files []string
	for _, n := range []string{"a", "b"} {
		files = append(files, e2etest.WriteFile(t, n+".yaml", strings.Replace(followScenario, "name: gate-follow", "name: gate-follow-"+n, 1)))
	}
	r := mv.Run(t, e2etest.Cmd{Timeout: 2 * time.Minute}, "run", files[0], files[1], "--kubeconfig", l.Kubeconfig,
		"--converge", "2", "--within", "30s", "--converge-window", "4s")
	if r.Code != 0 {
		t.Fatalf("batch exit %d, want 0\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	if n := strings.Count(r.Stderr, "converge: one run, judging the windows"); n != 2 {
		t.Errorf("%d scenarios said they gate on one run's windows, want 2:\n%s", n, r.Stderr)
	}
	reps := e2etest.ReadReports(t, r.Out)
	if len(reps) != 2 {
		t.Fatalf("%d run directories, want one per scenario", len(reps))
	}
	for id, rep := range reps {
		c := rep.Converge
		if c == nil || c.Mode != reports.ConvergeWindows || !c.Converged || c.Stopped != "converged" || rep.ExitCode != 0 || rep.Attack.Elapsed > 25*time.Second {
			t.Errorf("run %s (%s): exit %d, attack %s, converge %+v; want converged in one run, stopped early", id, rep.Scenario.Name, rep.ExitCode, rep.Attack.Elapsed, c)
		}
	}
}
