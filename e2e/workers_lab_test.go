package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/envoylog"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runlog"
)

// workersScenario is the kuma-canary lab's 90/10 split, attacked from
// worker pods in c1 (docs/distributed.md): the coordinator creates their
// Job, the lab daemon runs each pod as a process of the built binary, and
// they reach the mesh gateway by its Service's in-cluster name. %s is the
// attack's length.
const workersScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: kuma-canary-workers}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: kuma-demo, resource: svc/edge-gateway, port: "8080"}
  path: /
attack:
  rate: 200/s
  %s
attribution:
  preset: kuma-test-server
observe:
  - name: test-server
    namespace: kuma-demo
    selector: app=test-server
expect:
  - name: 90/10 by zone
    split: {weights: {c1: 90, c2: 10}}
  - successRate: {atLeast: 99%%}
`

// workersLab is the shared kuma-canary lab with what `mesh-verify rbac`
// prints for the distributed scenario applied in c1: the workers'
// ServiceAccount (their pods are refused without it) and Roles.
func workersLab(t *testing.T, scenario string) *lab.Lab {
	t.Helper()
	l := mv.SharedLab(t, e2etest.LabSpec{Topology: "kuma-canary"})
	applyRBAC(t, l, scenario, []string{"c1"}, "--set", "attack.workers=2")
	return l
}

// applyRBAC applies in each cluster what `mesh-verify rbac SCENARIO
// --cluster C` prints for it.
func applyRBAC(t *testing.T, l *lab.Lab, scenario string, clusters []string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, c := range clusters {
		r := runBinary(t, ctx, append([]string{"rbac", scenario, "--cluster", c}, args...)...)
		if r.Code != 0 || !strings.Contains(r.Stdout, "name: mesh-verify-worker") {
			t.Fatalf("mesh-verify rbac --cluster %s: exit %d\n%s\n%s", c, r.Code, r.Stdout, r.Stderr)
		}
		if out, err := e2etest.KubectlErr(t, l, []byte(r.Stdout), c, "apply", "-f", "-"); err != nil {
			t.Fatalf("apply the rbac manifest in %s: %v\n%s", c, err, out)
		}
	}
}

// sidecarCounts are the lab data plane's own record of a run: the
// requests with the run's ids that each test-server pod's kuma-sidecar
// logged, per cluster and per worker index.
func sidecarCounts(t *testing.T, l *lab.Lab, runID string) (byCluster map[string]int64, byWorker map[int]int64) {
	t.Helper()
	byCluster, _, byWorker = appSidecarCounts(t, l, runID, envoylog.Kuma)
	return byCluster, byWorker
}

// appSidecarCounts are what the app pods' sidecars (access-log format
// format) logged answering the run's requests: per cluster, per version
// and per worker index.
func appSidecarCounts(t *testing.T, l *lab.Lab, runID, format string) (byCluster, byVersion map[string]int64, byWorker map[int]int64) {
	t.Helper()
	st, err := daemon.ReadStatus(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	byCluster, byVersion, byWorker = map[string]int64{}, map[string]int64{}, map[int]int64{}
	for _, p := range st.Pods {
		if p.Role != daemon.RoleApp || p.SidecarLogFile == "" {
			continue
		}
		forLines(t, p.SidecarLogFile, func(line string) {
			parts := strings.SplitN(line, " ", 4)
			if len(parts) < 4 {
				return
			}
			e, err := envoylog.Parse(format, parts[3])
			if err != nil {
				return
			}
			i, ok := workerOf(t, runID, e.RequestID)
			if !ok || e.Code != 200 {
				return
			}
			byCluster[p.Cluster]++
			byVersion[p.Version]++
			byWorker[i]++
		})
	}
	return byCluster, byVersion, byWorker
}

// workerOf is the index of the worker that sent the run's request id
// (RUNID-wI-N); false for an id of another run.
func workerOf(t *testing.T, runID, requestID string) (int, bool) {
	t.Helper()
	rest, ok := strings.CutPrefix(requestID, runID+"-w")
	if !ok {
		return 0, false
	}
	idx, _, _ := strings.Cut(rest, "-")
	i, err := strconv.Atoi(idx)
	if err != nil {
		t.Errorf("request id %q: no worker index", requestID)
		return 0, false
	}
	return i, true
}

// noWorkersLeft waits until c1 holds no Job, pod, ConfigMap or Secret of the run
// and no worker process of it runs.
func noWorkersLeft(t *testing.T, l *lab.Lab, runID string) {
	t.Helper()
	noWorkersIn(t, l, runID, "kuma-demo", "c1")
}

// noWorkersIn waits until the clusters hold no Job, pod, ConfigMap or Secret of
// the run in namespace ns and no worker process of it runs.
func noWorkersIn(t *testing.T, l *lab.Lab, runID, ns string, clusters ...string) {
	t.Helper()
	sel := "mesh-verify.io/run=" + runID
	deadline := time.Now().Add(45 * time.Second)
	for {
		var out string
		for _, c := range clusters {
			out += e2etest.Kubectl(t, l, c, "get", "jobs,pods,configmaps,secrets", "-n", ns, "-l", sel, "-o", "name")
		}
		procs := workerProcesses(t, strings.ToLower(runID))
		if strings.TrimSpace(out) == "" && len(procs) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("45 s after the run, it left %q and worker processes %v", out, procs)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// workerProc is a running `mesh-verify worker` process the lab started
// for a pod.
type workerProc struct {
	pid   int
	pod   string
	index int
}

// workerProcesses lists the worker processes of a run (its Job's name
// holds the run id, lowercased).
func workerProcesses(t *testing.T, jobPrefix string) []workerProc {
	t.Helper()
	entries, _ := os.ReadDir("/proc")
	var out []workerProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte("\x00worker\x00--configmap\x00mv-"+jobPrefix)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || bytes.Contains(stat, []byte(") Z ")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		w := workerProc{pid: pid, index: -1}
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, "POD_NAME="); ok {
				w.pod = v
			}
			if v, ok := strings.CutPrefix(kv, "JOB_COMPLETION_INDEX="); ok {
				w.index, _ = strconv.Atoi(v)
			}
		}
		out = append(out, w)
	}
	return out
}

// finish waits for a background run to exit, at most d, and returns its
// exit code.
func finish(t *testing.T, b *background, d time.Duration) int {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- b.wait() }()
	select {
	case <-done:
	case <-time.After(d):
		_ = b.cmd.Process.Kill()
		<-done
		t.Fatalf("mesh-verify run did not end within %s\n%s%s", d, b.stdout, b.stderr)
	}
	return b.cmd.ProcessState.ExitCode()
}

// attacking waits until n worker processes of the run have printed at
// least one interval record to their pod's log, and returns them.
func attacking(t *testing.T, l *lab.Lab, n int) []workerProc {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var ready []workerProc
		for _, w := range workerProcesses(t, "") {
			b, _ := os.ReadFile(filepath.Join(l.Dir, "logs", "c1", "kuma-demo_"+w.pod+"_worker.log"))
			if bytes.Contains(b, []byte(`"kind":"interval"`)) {
				ready = append(ready, w)
			}
		}
		if len(ready) >= n {
			return ready
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d workers attacking after 2 minutes", len(ready), n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func rowsOf(t *testing.T, r *reports.Report, n int) []reports.WorkerRow {
	t.Helper()
	if r.Workers == nil || len(r.Workers.Rows) != n || r.Workers.Count != n {
		t.Fatalf("report workers %+v, want %d rows", r.Workers, n)
	}
	for i, row := range r.Workers.Rows {
		if row.Index != i || row.Pod == "" {
			t.Fatalf("worker row %d: %+v", i, row)
		}
	}
	return r.Workers.Rows
}

// Four workers in c1 against the 90/10 mesh gateway: the merged
// per-cluster counts equal what the data plane's sidecars logged for the
// run's worker-prefixed ids, each worker's count equals its own ids'
// lines, the verdict is a single-process run's on the same lab, and the
// Job, its pods and its ConfigMap are gone afterwards.
func TestDistributedRunAgreesWithTheDataPlane(t *testing.T) {
	f := writeScenario(t, fmt.Sprintf(workersScenario, "requests: 1600"))
	l := workersLab(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	r := runBinary(t, ctx, "run", f, "--workers", "4", "--kubeconfig", l.Kubeconfig)
	rep := r.Report()
	if rep == nil || r.Code != 0 || rep.Verdict != assert.Pass {
		t.Fatalf("distributed run: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	rows := rowsOf(t, rep, 4)
	var sum int64
	for _, row := range rows {
		if !row.Final || row.Error != "" || row.Requests != 400 {
			t.Errorf("worker %d: %+v, want 400 requests and a final record", row.Index, row)
		}
		sum += row.Requests
	}
	if sum != rep.Metrics.Requests || rep.Metrics.Requests != 1600 {
		t.Errorf("workers sent %d, the report counts %d requests; want 1600", sum, rep.Metrics.Requests)
	}
	// The workers' plain HTTP/1.1 goes through the fast engine, and their
	// final records say so (fleet record v1.2).
	if rep.Attack.Engine != "fasthttp" {
		t.Errorf("attack.engine %q, want fasthttp (the workers' final records)", rep.Attack.Engine)
	}
	byCluster, byWorker := sidecarCounts(t, l, rep.RunID)
	body := dimension(rep, "body", "cluster")
	for _, c := range []string{"c1", "c2"} {
		if body[c] != byCluster[c] || byCluster[c] == 0 {
			t.Errorf("cluster %s: the merged tally counts %d, the sidecars logged %d of the run", c, body[c], byCluster[c])
		}
	}
	for _, row := range rows {
		if byWorker[row.Index] != row.Requests {
			t.Errorf("worker %d: its record counts %d requests, the sidecars logged %d with its ids", row.Index, row.Requests, byWorker[row.Index])
		}
	}
	// The progress on stderr: each worker's phase while they get ready,
	// then the requests so far with the phases.
	if !regexp.MustCompile(`(?m)^workers: 0 (pending|pulling|running).*, 3 (pending|pulling|running)`).MatchString(r.Stderr) ||
		!regexp.MustCompile(`(?m)^workers: \d+ requests so far from 4 workers \(\d finished\); 0 (running|done)`).MatchString(r.Stderr) {
		t.Errorf("no phase progress on stderr:\n%s", r.Stderr)
	}
	if !strings.Contains(r.Stdout, "4 workers, image ghcr.io/mesh-verify/mesh-verify:") || !strings.Contains(r.Stdout, "job mv-") || !strings.Contains(r.Stdout, "finished") {
		t.Errorf("the terminal report does not show the workers:\n%s", r.Stdout)
	}
	html, err := os.ReadFile(filepath.Join(r.Dir(), "report.html"))
	if err != nil || !bytes.Contains(html, []byte(rows[3].Pod)) {
		t.Errorf("report.html does not name worker 3's pod %s (%v)", rows[3].Pod, err)
	}
	// results.bin: every request once, by its worker's id, as vegeta's
	// decoder reads it, in timestamp order, and who answered it as the
	// merged tally counted it.
	checkResultsFile(t, r.Dir(), rep, byCluster)
	noWorkersLeft(t, l, rep.RunID)

	// The same scenario from this process, through a port-forward.
	single := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
	if single.Report() == nil || single.Report().Verdict != rep.Verdict || single.Report().Workers != nil {
		t.Fatalf("single-process run: exit %d, verdict %v; the distributed one %s\n%s", single.Code, single.Report(), rep.Verdict, single.Stderr)
	}
	// The body-rule table: the workers' rules read every answered
	// response, as the single process's did.
	distributed, local := bodyRules(rep), bodyRules(single.Report())
	if len(distributed) == 0 || len(distributed) != len(local) {
		t.Fatalf("body rules: distributed %+v, single-process %+v", distributed, local)
	}
	for i, d := range distributed {
		l := local[i]
		if d.Rule != l.Rule || d.Read != 1600 || l.Read != 1600 || d.Matched != l.Matched || d.Matched == 0 {
			t.Errorf("rule %d: distributed %+v, single-process %+v: want the same rule reading 1600 responses and matching as many", i, d, l)
		}
	}
	t.Logf("distributed run %s: %v by cluster (sidecars %v), workers %v, rules %+v; single-process verdict %s, rules %+v", rep.RunID, body, byCluster, byWorker, distributed, single.Report().Verdict, local)
}

// bodyRules are a report's body-rule rows.
func bodyRules(r *reports.Report) []reports.RuleReport {
	var out []reports.RuleReport
	for _, x := range r.Rules {
		if x.Source == "body" {
			out = append(out, x)
		}
	}
	return out
}

// checkResultsFile reads a distributed run's results.bin with vegeta's
// decoder and its attribution.jsonl through runlog: as many results as
// the report counts, in timestamp order, each request id of the run's
// workers once, and per cluster what the sidecars logged.
func checkResultsFile(t *testing.T, dir string, rep *reports.Report, byCluster map[string]int64) {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, runlog.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := vegeta.NewDecoder(f)
	var n int64
	var prev time.Time
	for {
		var r vegeta.Result
		if err := dec.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("vegeta's decoder, result %d of results.bin: %v", n, err)
		}
		if r.Timestamp.Before(prev) {
			t.Errorf("result %d at %s after one at %s", n, r.Timestamp, prev)
		}
		prev = r.Timestamp
		n++
	}
	if n != rep.Metrics.Requests || n == 0 {
		t.Errorf("results.bin holds %d results, the report counts %d requests", n, rep.Metrics.Requests)
	}
	ids := map[string]bool{}
	clusters := map[string]int64{}
	err = runlog.ReadResults(dir, func(r *vegeta.Result, a runlog.Attribution) error {
		if _, ok := workerOf(t, rep.RunID, a.RequestID); !ok || ids[a.RequestID] {
			return fmt.Errorf("request id %q: not one of the run's workers', or twice", a.RequestID)
		}
		ids[a.RequestID] = true
		if a.OK {
			clusters[a.Cluster]++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for c, want := range byCluster {
		if clusters[c] != want {
			t.Errorf("attribution.jsonl: cluster %s answered %d, the sidecars logged %d", c, clusters[c], want)
		}
	}
}

// statistics.stop: early in a distributed run: the coordinator takes the
// looks on the merged records, stops the workers once the 90/10 split and
// the success rate are decided, and the run ends well before its 8,000
// requests with a decided verdict; the workers' final records carry every
// request the sidecars logged, and results.bin holds them all.
func TestDistributedRunStopsEarly(t *testing.T) {
	f := writeScenario(t, fmt.Sprintf(workersScenario, "requests: 8000\nstatistics: {stop: early, looks: 5}"))
	l := workersLab(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	r := runBinary(t, ctx, "run", f, "--workers", "2", "--kubeconfig", l.Kubeconfig)
	rep := r.Report()
	if rep == nil || r.Code != 0 || rep.Verdict != assert.Pass {
		t.Fatalf("distributed run: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
	}
	seq := rep.Sequential
	if seq == nil || seq.StoppedAt == 0 || seq.StoppedAt >= len(seq.Plan.Looks) {
		t.Fatalf("did not stop early: %+v", seq)
	}
	look := seq.Plan.Looks[seq.StoppedAt-1]
	if rep.Metrics.Requests < look || rep.Metrics.Requests >= 8000 || rep.Attack.Interrupted {
		t.Errorf("%d requests (interrupted %v) for a stop at look %d (%d requests)", rep.Metrics.Requests, rep.Attack.Interrupted, seq.StoppedAt, look)
	}
	for _, w := range rep.Warnings {
		if strings.Contains(w, "stop: early") || strings.Contains(w, "lost") {
			t.Errorf("warning %q", w)
		}
	}
	var sum int64
	for _, row := range rowsOf(t, rep, 2) {
		if !row.Final || row.Error != "" {
			t.Errorf("worker %d: %+v, want its final record", row.Index, row)
		}
		sum += row.Requests
	}
	byCluster, _ := sidecarCounts(t, l, rep.RunID)
	if sum != rep.Metrics.Requests || byCluster["c1"]+byCluster["c2"] != sum {
		t.Errorf("workers sent %d, the report counts %d, the sidecars logged %v", sum, rep.Metrics.Requests, byCluster)
	}
	checkResultsFile(t, r.Dir(), rep, byCluster)
	noWorkersLeft(t, l, rep.RunID)
	t.Logf("stopped at look %d of %d (%d requests planned there): %d requests, sidecars %v", seq.StoppedAt, len(seq.Plan.Looks), look, rep.Metrics.Requests, byCluster)
}

// A worker killed mid-attack is reported with what its last record
// counted, the others go on to their end and the verdict is judged on
// what was measured; a Ctrl-C stops the workers (each prints its final
// record), writes the report, exits 130 and leaves nothing in the cluster.
func TestDistributedRunLosesAWorkerAndStopsOnCtrlC(t *testing.T) {
	f := writeScenario(t, fmt.Sprintf(workersScenario, "duration: 10s"))
	l := workersLab(t, f)

	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	bg := startRun(t, ctx, cancel, f, l.Kubeconfig, "--workers", "3")
	ws := attacking(t, l, 3)
	victim := ws[0]
	for _, w := range ws {
		if w.index == 1 {
			victim = w
		}
	}
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	code := finish(t, bg, 3*time.Minute)
	rep, _ := readReport(t, bg.out)
	if rep == nil {
		t.Fatalf("exit %d, no report\n%s%s", code, bg.stdout, bg.stderr)
	}
	rows := rowsOf(t, rep, 3)
	lostRow := rows[victim.index]
	if lostRow.Final || lostRow.Requests == 0 || !strings.Contains(lostRow.Error, "Failed") {
		t.Errorf("killed worker %d: %+v, want lost with the requests of its last record", victim.index, lostRow)
	}
	var counted int64
	for _, row := range rows {
		counted += row.Requests
		if row.Index != victim.index && (!row.Final || row.Requests != 670 && row.Requests != 660) {
			t.Errorf("worker %d: %+v, want its whole share (10 s at 67 or 66 per second) and a final record", row.Index, row)
		}
	}
	if counted != rep.Metrics.Requests {
		t.Errorf("rows count %d requests, the report %d", counted, rep.Metrics.Requests)
	}
	warned := false
	for _, w := range rep.Warnings {
		warned = warned || strings.Contains(w, fmt.Sprintf("worker %d was lost", victim.index))
		if strings.Contains(w, "answered too slowly") {
			t.Errorf("a lost worker is blamed on the target: %s", w)
		}
	}
	if !warned {
		t.Errorf("no warning names the lost worker: %q", rep.Warnings)
	}
	_, byWorker := sidecarCounts(t, l, rep.RunID)
	if byWorker[victim.index] < lostRow.Requests {
		t.Errorf("killed worker: %d counted, but the sidecars logged only %d of its ids", lostRow.Requests, byWorker[victim.index])
	}
	if code != 0 || rep.Verdict != assert.Pass {
		t.Errorf("exit %d, verdict %s: %d requests of the 90/10 split still decide it", code, rep.Verdict, rep.Metrics.Requests)
	}
	noWorkersLeft(t, l, rep.RunID)
	t.Logf("killed worker %d: %d requests counted, %d logged by the sidecars; %d requests in all", victim.index, lostRow.Requests, byWorker[victim.index], rep.Metrics.Requests)

	// Ctrl-C in the middle of a longer attack.
	f = writeScenario(t, fmt.Sprintf(workersScenario, "duration: 60s"))
	bg = startRun(t, ctx, cancel, f, l.Kubeconfig, "--workers", "2")
	attacking(t, l, 2)
	_ = bg.cmd.Process.Signal(syscall.SIGINT)
	if code := finish(t, bg, time.Minute); code != 130 {
		t.Fatalf("exit %d after Ctrl-C, want 130\n%s%s", code, bg.stdout, bg.stderr)
	}
	rep, _ = readReport(t, bg.out)
	if rep == nil || !rep.Attack.Interrupted {
		t.Fatalf("interrupted distributed run: report %v\n%s%s", rep, bg.stdout, bg.stderr)
	}
	for _, row := range rowsOf(t, rep, 2) {
		if !row.Final || row.Requests == 0 || row.Requests >= 6000 {
			t.Errorf("worker %d after Ctrl-C: %+v, want its final record with part of its share", row.Index, row)
		}
	}
	noWorkersLeft(t, l, rep.RunID)
}

// Locality seen from inside the clusters: the catalog's cilium-affinity
// scenario attacks rebel-base by its in-cluster name from worker pods in
// c1 and in c2, each through its own cluster's datapath (the topology's
// workers entries), and judges each source's requests apart. With
// Cilium's local affinity (each datapath prefers its own cluster's pods)
// both expectations PASS; with affinity off (every connection to any pod
// of both clusters, as in cilium-rebel-base) both FAIL, and the success
// rate still PASSes: the mesh answered, it did not keep traffic local.
//
// The ground truth is a third party's record: the access lines rebel-base's
// nginx wrote in each cluster, compared with what each cluster's workers
// sent. nginx's line names neither the request nor the client (every lab
// connection comes from 127.0.0.1), so only per-cluster totals can be
// compared; the run therefore has unequal sources (two workers in c1, one
// in c2, 200 requests each): kept local, each cluster's nginx logs exactly
// its own workers' 400 and 200 requests; spread, each logs about 300, and
// c1's nginx logs fewer than c1's workers sent. (Equal leaks both ways
// would look local in totals: the per-source verdicts above are what sees
// those.)
func TestLocalityFromTwoSources(t *testing.T) {
	// Each case brings up a lab of its own: they run beside the other
	// lab tests instead of before them (CI's wall time).
	t.Parallel()
	scenario := "cilium-affinity"
	unequal := []string{"--set", "attack.sources[1].workers=1"}
	for _, c := range []struct {
		name     string
		topology string
		want     assert.Verdict
	}{
		{"affinity local", "cilium-affinity", assert.Pass},
		{"affinity off", editedTopology(t, "cilium-affinity", []string{
			// c1's Service, then c2's.
			"    service.cilium.io/affinity: \"local\"\n", "",
			"    service.cilium.io/affinity: \"local\"\n", "",
		}), assert.Fail},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := mv.Lab(t, e2etest.LabSpec{Topology: c.topology})
			applyRBAC(t, l, scenario, []string{"c1", "c2"}, unequal...)
			ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
			defer cancel()
			r := runBinary(t, ctx, append([]string{"run", scenario, "--kubeconfig", l.Kubeconfig}, unequal...)...)
			rep := r.Report()
			if rep == nil {
				t.Fatalf("no report: exit %d\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			}
			sent := map[string]int64{}
			for _, row := range rowsOf(t, rep, 3) {
				want := "c1"
				if row.Index >= 2 {
					want = "c2"
				}
				if row.Cluster != want || !row.Final || row.Requests != 200 {
					t.Errorf("worker %d: %+v, want 200 requests from %s", row.Index, row, want)
				}
				sent[row.Cluster] += row.Requests
			}
			if rep.Workers == nil || len(rep.Workers.Jobs) != 2 || rep.Workers.Jobs[1].FirstIndex != 2 {
				t.Errorf("jobs %+v, want one per source, c2's from worker 2", rep.Workers)
			}
			for _, e := range rep.Expectation {
				want := c.want
				if e.Kind == "successRate" {
					want = assert.Pass
				} else if e.From != "c1" && e.From != "c2" {
					t.Errorf("expectation %q judged from %q, want one source", e.Name, e.From)
				}
				if e.Verdict != want {
					t.Errorf("%s: %q is %s, want %s: %s", c.name, e.Name, e.Verdict, want, e.Reason)
				}
			}
			served := appNginxAnswered(t, l, "rebel-base")
			t.Logf("%s: workers sent %v, rebel-base's nginx logged %v", c.name, sent, served)
			switch c.want {
			case assert.Pass:
				for _, cl := range []string{"c1", "c2"} {
					if served[cl] != sent[cl] {
						t.Errorf("%s: rebel-base's nginx in %s logged %d requests, its workers sent %d: not kept local", c.name, cl, served[cl], sent[cl])
					}
				}
			default:
				if served["c1"]+served["c2"] != sent["c1"]+sent["c2"] || served["c1"] >= sent["c1"] {
					t.Errorf("%s: rebel-base's nginx logged %v of the %v the workers sent: want every request, fewer in c1 than c1 sent (spread over both clusters)", c.name, served, sent)
				}
			}
			if want := map[assert.Verdict]int{assert.Pass: 0, assert.Fail: 1}[c.want]; r.Code != want {
				t.Errorf("exit %d, want %d\n%s", r.Code, want, r.Stdout)
			}
			noWorkersIn(t, l, rep.RunID, "default", "c1", "c2")
		})
	}
}

// appNginxAnswered counts, per cluster, the requests the app's pods answered
// as their nginx access lines record them (the lab's app writes the
// image's "main" format to the container's log, lab/apps/rebelbase.go):
// every line but the kubelet's probes, whose user agent is kube-probe/.
// The lab is the run's alone, so every other line is a request of the run;
// a line that is not nginx's, or an answer other than 200, fails the test.
func appNginxAnswered(t *testing.T, l *lab.Lab, app string) map[string]int64 {
	t.Helper()
	st, err := daemon.ReadStatus(l.Dir)
	if err != nil {
		t.Fatal(err)
	}
	served, pods := map[string]int64{}, 0
	for _, p := range st.Pods {
		if p.Role != daemon.RoleApp || p.App != app {
			continue
		}
		pods++
		forLines(t, p.LogFile, func(line string) {
			// CRI log: time, stream, tag, then nginx's line.
			parts := strings.SplitN(line, " ", 4)
			if len(parts) < 4 || parts[1] != "stdout" {
				return
			}
			m := nginxMain.FindStringSubmatch(parts[3])
			if m == nil {
				t.Errorf("%s: not nginx's access line: %q", p.LogFile, parts[3])
				return
			}
			if strings.HasPrefix(m[3], "kube-probe/") {
				return
			}
			if m[1] != "GET / HTTP/1.1" || m[2] != "200" {
				t.Errorf("%s: %q, want the workers' GET / answered 200", p.LogFile, parts[3])
			}
			served[p.Cluster]++
		})
	}
	if pods == 0 {
		t.Fatalf("no %s pod in the lab's status", app)
	}
	return served
}

// nginxMain is nginx's "main" log_format: $remote_addr - $remote_user
// [$time_local] "$request" $status $body_bytes_sent "$http_referer"
// "$http_user_agent" "$http_x_forwarded_for"; it captures the request,
// the status and the user agent.
var nginxMain = regexp.MustCompile(`^\S+ - \S+ \[[^\]]+\] "([^"]*)" (\d{3}) \d+ "[^"]*" "([^"]*)" "[^"]*"$`)
