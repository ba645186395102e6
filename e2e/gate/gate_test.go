package gate_test

import (
	"context"
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
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
