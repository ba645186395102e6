package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// Against a target that never answers: the first Ctrl-C waits for the
// requests in flight (up to the 30 s timeout) and says so; the second
// stops at once, writes the reports and exits 130, with the abandoned
// requests not counted as the target's failures.
func TestSecondInterruptStopsNow(t *testing.T) {
	hangURL, arrived := hangingServer(t)
	dir := t.TempDir()
	sc := writeFile(t, dir, "s.yaml", `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: hang}
clusters: [{name: c1}]
target: {url: "`+hangURL+`/?token=s3cr3t"}
attack: {rate: 20/s, duration: 30s, timeout: 30s}
attribution: {preset: tutorial}
expect: [{successRate: {atLeast: 99%}}]
`)
	out := filepath.Join(dir, "runs")
	cmd, stdout, stderr, done := startUntilArrived(t, arrived, 30*time.Second, "run", sc, "--out", out, "--progress", "plain")
	_ = cmd.Process.Signal(syscall.SIGINT)
	// This second is what is tested: the run must not end within it.
	select {
	case err := <-done:
		t.Fatalf("the first Ctrl-C ended the run while requests were in flight: %v\n%s", err, stderr.String())
	case <-time.After(time.Second):
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("still running 10 s after the second Ctrl-C\n%s", stderr.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitcode.Interrupted {
		t.Fatalf("exit %v, want 130\n%s\n%s", err, stdout.String(), stderr.String())
	}
	for _, want := range []string{"Ctrl-C again to stop now", "stopping now"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr.String())
		}
	}
	runs, _ := filepath.Glob(filepath.Join(out, "*", "report.json"))
	if len(runs) != 1 {
		t.Fatalf("report.json files: %v", runs)
	}
	b, _ := os.ReadFile(runs[0])
	var rep struct {
		ExitCode int `json:"exitCode"`
		Metrics  struct {
			Requests int64 `json:"requests"`
		} `json:"metrics"`
		Attack struct {
			Aborted int64 `json:"aborted"`
		} `json:"attack"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ExitCode != exitcode.Interrupted || rep.Attack.Aborted == 0 || rep.Metrics.Requests != 0 {
		t.Errorf("report: exit %d, %d aborted, %d requests counted", rep.ExitCode, rep.Attack.Aborted, rep.Metrics.Requests)
	}
	// The scenario as run keeps no credential either.
	scenario, _ := os.ReadFile(filepath.Join(filepath.Dir(runs[0]), "scenario.yaml"))
	if bytes.Contains(scenario, []byte("s3cr3t")) || !bytes.Contains(scenario, []byte("token=")) {
		t.Errorf("scenario.yaml:\n%s", scenario)
	}
}

func TestRunAndReportRefuseWhatTheyCannotMean(t *testing.T) {
	dir := t.TempDir()
	edited := writeFile(t, dir, "report.json", `{"schema": "mesh-verify.io/report/v1", "exitCode": 256}`)
	for _, c := range []e2e{
		{"--progress bogus", []string{"run", "skupper-1", "--progress", "bogus"}, exitcode.InvalidInput, nil, []string{`--progress "bogus": want auto, tty or plain`}},
		{"an exit code none of ours", []string{"report", edited}, exitcode.InvalidInput, nil, []string{"exitCode 256 is not one mesh-verify gives"}},
	} {
		t.Run(c.name, func(t *testing.T) { c.run(t) })
	}
}

// --converge: passes that never reach N in a row before --within ends are
// no PASS (the last attempt passed, the gate did not see convergence); a
// scenario the runner finds invalid stops the loop at its first attempt.
func TestConvergeOutcomes(t *testing.T) {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Write([]byte("I'm callme-service v1"))
	}))
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	sc := writeFile(t, dir, "s.yaml", `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: conv}
clusters: [{name: c1}]
target: {url: "`+ts.URL+`/"}
attack: {rate: 100/s, requests: 5}
attribution: {preset: tutorial}
expect: [{successRate: {atLeast: 99%}}]
`)
	for _, c := range []e2e{
		{"passes, never enough in a row", []string{"run", sc, "--out", filepath.Join(dir, "a"), "-q", "--converge", "1000", "--within", "2s"}, exitcode.Inconclusive,
			nil, []string{"consecutive passes of 1000 when --within 2s ended"}},
		{"invalid at the first attempt", []string{"run", sc, "--out", filepath.Join(dir, "b"), "-q", "--converge", "2", "--within", "30s",
			"--set", "target.url=https://127.0.0.1:1", "--set", "target.tls.ca=/nonexistent.pem"}, exitcode.InvalidInput,
			nil, []string{"converge: attempt 1", "target.tls.ca"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			start := time.Now()
			c.run(t)
			if el := time.Since(start); el > 20*time.Second {
				t.Errorf("took %s", el)
			}
		})
	}
	if runs, _ := filepath.Glob(filepath.Join(dir, "b", "*")); len(runs) != 1 {
		t.Errorf("the invalid scenario made %d attempts, want 1", len(runs))
	}
}

// After the second Ctrl-C the signals are mesh-verify's no longer: a third
// kills a process that is stuck after its second (here: one that never
// finishes writing), as Ctrl-C kills any program. The child is this test
// binary running interrupts() alone, so the third signal cannot hit the
// test process itself.
func TestThirdInterruptKills(t *testing.T) {
	if os.Getenv("MV_INTERRUPT_CHILD") == "1" {
		ctx, abort, stop := interrupts(context.Background(), os.Stderr, time.Second)
		defer stop()
		os.Stdout.WriteString("ready\n")
		<-ctx.Done()
		<-abort.Done()
		os.Stdout.WriteString("aborted\n")
		select {} // stuck writing the reports
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestThirdInterruptKills$")
	cmd.Env = append(os.Environ(), "MV_INTERRUPT_CHILD=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	lines := make(chan string, 4)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	expect := func(want string) {
		t.Helper()
		select {
		case l := <-lines:
			if l != want {
				t.Fatalf("child said %q, want %q (stderr: %s)", l, want, stderr.String())
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("child did not say %q (stderr: %s)", want, stderr.String())
		}
	}
	expect("ready")
	// The second Ctrl-C once the first is seen (its message), not after a
	// fixed pause.
	_ = cmd.Process.Signal(syscall.SIGINT)
	waitFor(t, 10*time.Second, "the first Ctrl-C's message", func() bool { return strings.Contains(stderr.String(), "Ctrl-C again to stop now") })
	_ = cmd.Process.Signal(syscall.SIGINT)
	expect("aborted")
	_ = cmd.Process.Signal(syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGINT {
			t.Errorf("child ended with %v, want killed by SIGINT", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the third Ctrl-C did not end the process")
	}
	if !strings.Contains(stderr.String(), "Ctrl-C again kills") {
		t.Errorf("the second Ctrl-C did not say what a third does: %s", stderr.String())
	}
}

// waitFor polls cond until it holds, failing the test naming what it
// waited for when within has passed: a test waits on what it needs, not a
// fixed time.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(within); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, within)
		}
	}
}

// startUntilArrived starts the binary with args and returns once a
// request has reached the target (arrived): the attack, and its Ctrl-C
// handling, has started. It fails the test when the process ends first or
// nothing arrives within wait; the process is killed at the test's end.
func startUntilArrived(t *testing.T, arrived <-chan struct{}, wait time.Duration, args ...string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer, done chan error) {
	t.Helper()
	cmd = exec.Command(binary, args...)
	stdout, stderr = &bytes.Buffer{}, &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case <-arrived:
	case err := <-done:
		t.Fatalf("mesh-verify ended before a request reached the target: %v\n%s", err, stderr.String())
	case <-time.After(wait):
		t.Fatalf("no request reached the target within %s\n%s", wait, stderr.String())
	}
	return cmd, stdout, stderr, done
}

// hangingServer is a real HTTP server that never answers: each request
// waits until its client gives up or the test ends. arrived gets a value
// when a request has come.
func hangingServer(t *testing.T) (url string, arrived <-chan struct{}) {
	t.Helper()
	hold := make(chan struct{})
	came := make(chan struct{}, 1)
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case came <- struct{}{}:
		default:
		}
		select {
		case <-hold:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(hold); ts.Close() })
	return ts.URL, came
}
