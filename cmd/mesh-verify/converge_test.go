package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
)

func convergeScenario(t *testing.T, dir, url string) string {
	t.Helper()
	return writeFile(t, dir, "s.yaml", `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: gate}
clusters: [{name: c1}]
target: {url: "`+url+`"}
attack: {concurrency: 2, repetitions: 10}
attribution: {rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]}
expect: [{reached: {buckets: [c1]}}]
`)
}

// A gate that misses its deadline after a passing attempt exits 2, and
// report.json (gate) and junit.xml (a failed converge case) say so; the
// output is one line per attempt and the final report once.
func TestConvergeMissedDeadlineAgrees(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "I'm callme-service v1 (pod callme-c1-0 in c1)")
	}))
	t.Cleanup(ts.Close)
	for _, output := range []string{outputTable, outputJSON} {
		t.Run(output, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			out := filepath.Join(dir, "runs")
			// No second attempt starts after a deadline of 1 ms.
			cmd := exec.Command(binary, "run", convergeScenario(t, dir, ts.URL), "--out", out, "--quiet", "-o", output, "--converge", "3", "--within", "1ms")
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if code := cmd.ProcessState.ExitCode(); code != exitcode.Inconclusive {
				t.Fatalf("exit %d (%v), want 2\n%s\n%s", code, err, stdout.String(), stderr.String())
			}
			if !strings.HasPrefix(stderr.String(), "converge: re-running the whole scenario until 3 consecutive runs pass within 1ms: no split follows the mesh object") {
				t.Errorf("the first line does not say the gate re-runs whole scenarios:\n%s", stderr.String())
			}
			if n := strings.Count(stderr.String(), "converge: attempt "); n != 1 {
				t.Errorf("%d attempt lines on stderr, want 1:\n%s", n, stderr.String())
			}
			switch output {
			case outputTable:
				if n := strings.Count(stdout.String(), "VERDICT:"); n != 1 {
					t.Errorf("stdout holds %d reports, want the final one once:\n%s", n, stdout.String())
				}
			case outputJSON:
				var rep reports.Report
				if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil || rep.ExitCode != exitcode.Inconclusive {
					t.Errorf("stdout is not the final report (%v, exit %d):\n%s", err, rep.ExitCode, stdout.String())
				}
			}
			runs, _ := os.ReadDir(out)
			if len(runs) != 1 {
				t.Fatalf("%d run directories, want 1", len(runs))
			}
			run := filepath.Join(out, runs[0].Name())
			rep, err := reports.ReadJSON(filepath.Join(run, "report.json"))
			if err != nil {
				t.Fatal(err)
			}
			if rep.ExitCode != exitcode.Inconclusive || rep.Gate == assert.Pass || rep.Converge == nil || rep.Converge.Converged || !rep.Converge.Done {
				t.Errorf("report.json: exit %d, gate %s, converge %+v", rep.ExitCode, rep.Gate, rep.Converge)
			}
			b, err := os.ReadFile(filepath.Join(run, "junit.xml"))
			if err != nil {
				t.Fatal(err)
			}
			var ju junitDoc
			if err := xml.Unmarshal(b, &ju); err != nil {
				t.Fatal(err)
			}
			if ju.Suite.Failures+ju.Suite.Errors == 0 || !strings.Contains(string(b), `type="converge"`) {
				t.Errorf("junit.xml passes a gate that exited 2:\n%s", b)
			}
		})
	}
}

type junitDoc struct {
	Suite struct {
		Failures int `xml:"failures,attr"`
		Errors   int `xml:"errors,attr"`
	} `xml:"testsuite"`
}

// Ctrl-C while the gate waits between attempts ends it with 130 and no
// new attempt.
func TestConvergeInterruptBetweenAttempts(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/"
	ln.Close() // every attempt is refused: exit 3, then a back-off of 1, 2, 4 s
	dir := t.TempDir()
	out := filepath.Join(dir, "runs")
	cmd := exec.Command(binary, "run", convergeScenario(t, dir, closed), "--out", out, "--quiet", "--converge", "2", "--within", "2m")
	var stdout bytes.Buffer
	stderr := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = &stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// The third attempt's line starts a 4 s wait.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(stderr.String(), "converge: attempt 3 "); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no third attempt within a minute:\n%s", stderr.String())
		}
	}
	_ = cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatalf("the gate did not stop within 3 s of Ctrl-C:\n%s", stderr.String())
	}
	if code := cmd.ProcessState.ExitCode(); code != exitcode.Interrupted {
		t.Errorf("exit %d, want 130\n%s", code, stderr.String())
	}
	if n := strings.Count(stderr.String(), "converge: attempt "); n != 3 {
		t.Errorf("%d attempts, want 3 (none after Ctrl-C):\n%s", n, stderr.String())
	}
	if runs, _ := os.ReadDir(out); len(runs) != 3 {
		t.Errorf("%d run directories, want 3", len(runs))
	}
}

// --converge chooses how it gates and says so in its first line: one run
// judged in windows for a split that follows its mesh object, whole runs
// repeated otherwise; --converge-window is refused without --converge or
// outside its limits, naming the flag, before anything runs.
func TestConvergeSaysHowItGates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	follow := writeFile(t, dir, "follow.yaml", `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: follow}
clusters: [{name: c1, context: kind-c1}]
target: {url: "http://127.0.0.1:1/"}
attack: {rate: 10/s, duration: 5s, keepAlive: false}
attribution: {preset: tutorial}
expect:
  - split: {by: version, fromMesh: {virtualService: demo/reviews}, windows: {follow: true}}
`)
	plain := convergeScenario(t, dir, "http://127.0.0.1:1/")
	for _, c := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"window without converge", []string{"run", plain, "--converge-window", "5s"}, exitcode.InvalidInput, "--converge-window 5s needs --converge N"},
		{"window too short", []string{"run", follow, "--converge", "2", "--within", "1m", "--converge-window", "500ms"}, exitcode.InvalidInput, "--converge-window 500ms: want at least 1s"},
		{"too many looks", []string{"run", follow, "--converge", "2", "--within", "10m", "--converge-window", "2s"}, exitcode.InvalidInput, "300 looks, at most 100"},
		{"within past the longest attack", []string{"run", follow, "--converge", "2", "--within", "25h", "--converge-window", "15m"}, exitcode.InvalidInput, "--within 25h0m0s: the attack of a gate"},
		{"window shorter than the poll", []string{"run", follow, "--converge", "2", "--within", "1m", "--converge-window", "1s"}, exitcode.InvalidInput, "--converge-window 1s: shorter than split.windows.poll 2s"},
		{"window longer than within", []string{"run", follow, "--converge", "2", "--within", "5s", "--converge-window", "6s"}, exitcode.InvalidInput, "longer than --within 5s"},
		// No cluster to reach: the one run fails to connect (exit 3) after saying how it gates.
		{"a followed split: one run", []string{"run", follow, "--converge", "2", "--within", "20s", "--kubeconfig", filepath.Join(dir, "none"), "--out", filepath.Join(dir, "a"), "-q"},
			exitcode.Setup, `converge: one run, judging the windows of split "split by version`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := execute(c.args, &stdout, &stderr)
			if code != c.code || !strings.Contains(stderr.String(), c.want) {
				t.Errorf("exit %d, stderr:\n%s\nwant %d saying %q", code, stderr.String(), c.code, c.want)
			}
			if c.code == exitcode.Setup && !strings.HasPrefix(stderr.String(), c.want) {
				t.Errorf("the first line does not say how the gate runs:\n%s", stderr.String())
			}
		})
	}
}
