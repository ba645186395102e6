package worker_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/fleet"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/tally"
	"github.com/mesh-verify/mesh-verify/worker"
)

// target is a real HTTP server on 127.0.0.1 that plays two pods: it
// answers "pod=web-<n mod 2>" and counts, per run id (the request id up
// to "-w"), the requests and what each pod served, by its own count.
type target struct {
	url  string
	mu   sync.Mutex
	seq  int
	hits map[string]map[string]int64 // run → pod → requests
	ids  map[string][]string         // run → request ids
}

func newTarget(t *testing.T) *target {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tg := &target{url: "http://" + ln.Addr().String() + "/hello", hits: map[string]map[string]int64{}, ids: map[string][]string{}}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		run, _, _ := strings.Cut(id, "-w")
		tg.mu.Lock()
		pod := fmt.Sprintf("web-%d", tg.seq%2)
		tg.seq++
		if tg.hits[run] == nil {
			tg.hits[run] = map[string]int64{}
		}
		tg.hits[run][pod]++
		tg.ids[run] = append(tg.ids[run], id)
		tg.mu.Unlock()
		fmt.Fprintf(w, "hello from pod=%s\n", pod)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return tg
}

func (tg *target) count(run string) (total int64, pods map[string]int64, ids []string) {
	tg.mu.Lock()
	defer tg.mu.Unlock()
	pods = map[string]int64{}
	for p, n := range tg.hits[run] {
		pods[p] = n
		total += n
	}
	return total, pods, append([]string(nil), tg.ids[run]...)
}

// buildBinary builds mesh-verify once for the test: the workers run as
// real processes of the binary, as in a Job's pod.
func buildBinary(t *testing.T) string {
	return labtest.BuildMeshVerify(t, raceEnabled)
}

// proc is one worker process and the records it printed.
type proc struct {
	cmd     *exec.Cmd
	stderr  e2etest.SyncBuffer
	records chan fleet.Record
	done    chan error // the process's exit, once
	decErr  error
}

func startWorker(t *testing.T, bin string, env []string, index int, args ...string) *proc {
	t.Helper()
	p := &proc{records: make(chan fleet.Record, 1000), done: make(chan error, 1)}
	p.cmd = exec.Command(bin, append([]string{"worker"}, args...)...)
	p.cmd.Env = append(env, fmt.Sprintf("JOB_COMPLETION_INDEX=%d", index), fmt.Sprintf("POD_NAME=mv-w-%d", index), "POD_NAMESPACE=default")
	p.cmd.Stderr = &p.stderr
	out, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := p.cmd.Process.Pid
	t.Cleanup(func() {
		// Stopped by its pid if the test did not see it end.
		if p.cmd.ProcessState == nil {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	go func() {
		dec := fleet.NewDecoder(out)
		for {
			rec, err := dec.Next()
			if err != nil {
				if !errors.Is(err, io.EOF) {
					p.decErr = err
				}
				break
			}
			p.records <- rec
		}
		close(p.records)
		if s := dec.Skipped(); s.NotRecord+s.Invalid+s.TooLong > 0 {
			p.decErr = fmt.Errorf("stdout had lines that are not records: %+v", s)
		}
		err := p.cmd.Wait()
		if err == nil && strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
			err = fmt.Errorf("data race:\n%s", p.stderr.String())
		}
		p.done <- err
	}()
	return p
}

// next waits for the worker's next record.
func (p *proc) next(t *testing.T, within time.Duration) (fleet.Record, bool) {
	t.Helper()
	select {
	case rec, ok := <-p.records:
		return rec, ok
	case <-time.After(within):
		t.Fatalf("worker %v: no record within %s; stderr:\n%s", p.cmd.Args, within, p.stderr.String())
	}
	return fleet.Record{}, false
}

// rest reads the records up to the end and the exit status.
func (p *proc) rest(t *testing.T, within time.Duration) ([]fleet.Record, error) {
	t.Helper()
	var recs []fleet.Record
	deadline := time.After(within)
	for {
		select {
		case rec, ok := <-p.records:
			if !ok {
				select {
				case err := <-p.done:
					if p.decErr != nil {
						t.Errorf("worker %v: %v", p.cmd.Args, p.decErr)
					}
					return recs, err
				case <-deadline:
					t.Fatalf("worker %v did not exit; stderr:\n%s", p.cmd.Args, p.stderr.String())
				}
			}
			recs = append(recs, rec)
		case <-deadline:
			t.Fatalf("worker %v: not finished within %s; stderr:\n%s", p.cmd.Args, within, p.stderr.String())
		}
	}
}

type labEnv struct {
	bin  string
	env  []string
	args []string // --context when the kubeconfig's current context is not c1's
	cl   *kube.Cluster
	tg   *target
}

func setupLab(t *testing.T) *labEnv {
	lab := labtest.Clusters(t, "c1")
	bin := buildBinary(t)
	ctx := context.Background()
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{lab.Kubeconfig}})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Connect(ctx, kube.ClusterRef{Name: "c1", Context: lab.Context("c1")})
	if err != nil {
		t.Fatal(err)
	}
	e := &labEnv{bin: bin, cl: cl, tg: newTarget(t)}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "KUBERNETES_SERVICE_") {
			e.env = append(e.env, kv)
		}
	}
	e.env = append(e.env, "KUBECONFIG="+lab.Kubeconfig)
	if cfg.CurrentContext() != lab.Context("c1") {
		e.args = []string{"--context", lab.Context("c1")}
	}
	return e
}

const labScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: workers}
clusters: [{name: c1, context: kind-c1}]
target: {url: "http://web.default.svc.cluster.local:8080/hello"}
attack: {%s, workers: %d}
attribution:
  rules: [{body: 'pod=(?P<pod>\S+)'}]
expect:
  - successRate: {atLeast: 99%%}
`

// createConfigMap writes a worker ConfigMap for run in namespace default.
func (e *labEnv) createConfigMap(t *testing.T, name, run, attack string, workers int) {
	t.Helper()
	e.createConfigMapFor(t, name, run, attack, workers, e.tg.url)
}

func (e *labEnv) createConfigMapFor(t *testing.T, name, run, attack string, workers int, target string) {
	t.Helper()
	data, err := worker.RunData([]byte(fmt.Sprintf(labScenario, attack, workers)),
		[]kube.Pod{{Cluster: "c1", Namespace: "default", Name: "web-0", Version: "v1"}, {Cluster: "c1", Namespace: "default", Name: "web-1", Version: "v2"}},
		worker.RunConfig{RunID: run, Workers: workers, Target: target, Interval: "1s"})
	if err != nil {
		t.Fatal(err)
	}
	e.putConfigMap(t, name, data)
}

// startAttacking starts one worker (of one) on a 50/s, 2 min attack
// through ConfigMap cm, gives the start signal lead ahead, and returns
// once the server has counted n of the run's requests.
func (e *labEnv) startAttacking(t *testing.T, cm, run string, lead time.Duration, n int64) *proc {
	t.Helper()
	e.createConfigMap(t, cm, run, "rate: 50/s, duration: 2m", 1)
	p := startWorker(t, e.bin, e.env, 0, append([]string{"--configmap", cm}, e.args...)...)
	if rec, _ := p.next(t, 60*time.Second); rec.Kind != fleet.KindReady {
		t.Fatalf("first record %+v", rec)
	}
	e.annotate(t, cm, worker.AnnotationStartAt, time.Now().Add(lead).UTC().Format(time.RFC3339Nano))
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if got, _, _ := e.tg.count(run); got >= n {
			return p
		}
		if time.Now().After(deadline) {
			t.Fatalf("the attack did not start; stderr:\n%s", p.stderr.String())
		}
	}
}

// putConfigMap writes a worker's ConfigMap and Secret of that name, each
// with its keys of data (worker.SplitData).
func (e *labEnv) putConfigMap(t *testing.T, name string, data map[string]string) {
	t.Helper()
	cm, secret := worker.SplitData(data)
	e.putObjects(t, name, cm, secret)
}

// putObjects writes a ConfigMap of data cm and, unless secret is nil, a
// Secret of data secret, both named name.
func (e *labEnv) putObjects(t *testing.T, name string, cm map[string]string, secret map[string][]byte) {
	t.Helper()
	_, err := e.cl.Client.CoreV1().ConfigMaps("default").Create(context.Background(),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: cm}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if secret == nil {
		return
	}
	_, err = e.cl.Client.CoreV1().Secrets("default").Create(context.Background(),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: secret}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
}

func (e *labEnv) annotate(t *testing.T, name, key, val string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, key, val)
	if _, err := e.cl.Client.CoreV1().ConfigMaps("default").Patch(context.Background(), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

func TestLabWorkers(t *testing.T) {
	e := setupLab(t)

	t.Run("two workers, merged", func(t *testing.T) {
		// The target is the Service's in-cluster name, reached as in a lab
		// Job pod: through the connect-to list the lab daemon sets.
		const run = "run-two"
		e.createConfigMapFor(t, "mv-two", run, "rate: 40/s, duration: 3s", 2, "http://web.default.svc.cluster.local:8080/hello")
		_, port, _ := net.SplitHostPort(strings.TrimPrefix(strings.TrimSuffix(e.tg.url, "/hello"), "http://"))
		env := append(slices.Clone(e.env), "MESH_VERIFY_CONNECT_TO=web.default.svc.cluster.local:8080:127.0.0.1:"+port)
		var ps []*proc
		for i := range 2 {
			ps = append(ps, startWorker(t, e.bin, env, i, append([]string{"--configmap", "mv-two"}, e.args...)...))
		}
		for i, p := range ps {
			rec, ok := p.next(t, 90*time.Second)
			if !ok || rec.Kind != fleet.KindReady || rec.Worker != i || rec.Pod != fmt.Sprintf("mv-w-%d", i) {
				t.Fatalf("worker %d: first record %+v (ok %v), want ready; stderr:\n%s", i, rec, ok, p.stderr.String())
			}
		}
		if n, _, _ := e.tg.count(run); n != 0 {
			t.Fatalf("%d requests before the start signal", n)
		}
		startAt := time.Now().Add(1500 * time.Millisecond).UTC()
		e.annotate(t, "mv-two", worker.AnnotationStartAt, startAt.Format(time.RFC3339Nano))
		m := fleet.NewMerger(startAt)
		// The records' results go to a run directory as the coordinator
		// writes them (a real runlog recorder).
		dir := t.TempDir()
		recorder, err := runlog.Create(dir)
		if err != nil {
			t.Fatal(err)
		}
		rw := fleet.NewResultWriter(recorder, run, 0)
		trimmed := 0
		for i, p := range ps {
			recs, err := p.rest(t, 60*time.Second)
			if err != nil {
				t.Fatalf("worker %d exited: %v; stderr:\n%s", i, err, p.stderr.String())
			}
			kinds := map[fleet.Kind]int{}
			for _, rec := range recs {
				kinds[rec.Kind]++
				if rec.State != nil && !rec.State.Start.Equal(startAt.Round(0)) {
					t.Errorf("worker %d: state start %v, want start-at %v", i, rec.State.Start, startAt)
				}
				if rec.State != nil && rec.State.SlicesFrom > 0 {
					trimmed++
					if rec.Kind != fleet.KindInterval {
						t.Errorf("worker %d: a trimmed %s record: the last record is whole", i, rec.Kind)
					}
				}
				if ok, err := m.Add(rec); err != nil {
					t.Fatal(err)
				} else if ok && rec.Kind != fleet.KindReady {
					if rec.Results == nil || rec.Rules == nil {
						t.Fatalf("worker %d: a %s record without results or rules", i, rec.Kind)
					}
					if err := rw.Add(rec.Worker, rec.Results); err != nil {
						t.Fatal(err)
					}
				}
			}
			if kinds[fleet.KindFinal] != 1 || kinds[fleet.KindInterval] < 1 || kinds[fleet.KindError] != 0 {
				t.Errorf("worker %d: records %v, want intervals and one final", i, kinds)
			}
		}
		if trimmed == 0 {
			t.Error("no interval record was trimmed to the slices that changed")
		}
		total, pods, ids := e.tg.count(run)
		snap := m.Snapshot()
		if snap.Total != total || total == 0 {
			t.Fatalf("merged %d requests, the server counted %d", snap.Total, total)
		}
		// results.bin: every request the server saw, once, by its id, as
		// vegeta's decoder reads the file; the rules read every response.
		if st := rw.Flush(); st.Written != total || st.Cut+st.Missing != 0 {
			t.Errorf("results written %+v, the server counted %d", st, total)
		}
		if err := recorder.Close(); err != nil {
			t.Fatal(err)
		}
		inFile := map[string]bool{}
		if err := runlog.ReadResults(dir, func(r *vegeta.Result, a runlog.Attribution) error {
			if r.Code != 200 || a.Pod == "" || inFile[a.RequestID] {
				return fmt.Errorf("result %+v, line %+v (twice: %v)", r, a, inFile[a.RequestID])
			}
			inFile[a.RequestID] = true
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if !inFile[id] {
				t.Errorf("request %s served, not in results.bin", id)
			}
		}
		if len(inFile) != len(ids) {
			t.Errorf("results.bin holds %d requests, the server served %d", len(inFile), len(ids))
		}
		if r := m.Rules(); r == nil || r.Responses != total || len(r.Rules) != 1 || r.Rules[0].Matched != total {
			t.Errorf("merged rules %+v, want every one of %d responses matched", r, total)
		}
		rows := m.Workers()
		for _, r := range rows {
			// 40/s for 3s: 120 requests, 60 each (vegeta paces exactly;
			// one either way for the last tick).
			if r.Requests < 59 || r.Requests > 61 || !r.Final {
				t.Errorf("worker %d: %d requests (want 60 at 20/s for 3s), final %v", r.Index, r.Requests, r.Final)
			}
		}
		byWorker := map[string]int{}
		for _, id := range ids {
			switch {
			case strings.HasPrefix(id, run+"-w0-"):
				byWorker["w0"]++
			case strings.HasPrefix(id, run+"-w1-"):
				byWorker["w1"]++
			default:
				t.Fatalf("request id %q is neither worker's", id)
			}
		}
		if byWorker["w0"] == 0 || byWorker["w1"] == 0 {
			t.Errorf("request ids per worker %v", byWorker)
		}
		got := map[string]int64{}
		d := snap.Dimensions["pod"]
		for i, b := range d.Buckets {
			got[tally.PodName(b, snap.PodClusters[b])] = d.N[i] // the inventory's cluster, c1, is the only one
		}
		for pod, n := range pods {
			if got[pod] != n {
				t.Errorf("pod %s: merged %d, the server served %d (all %v vs %v)", pod, got[pod], n, got, pods)
			}
		}
		c := snap.Dimensions["cluster"]
		if len(c.Buckets) != 1 || c.Buckets[0] != "c1" || c.N[0] != total {
			t.Errorf("clusters %v %v: the inventory did not resolve the pods to c1", c.Buckets, c.N)
		}
	})

	t.Run("no start signal", func(t *testing.T) {
		e.createConfigMap(t, "mv-wait", "run-wait", "rate: 10/s, duration: 2s", 1)
		began := time.Now()
		p := startWorker(t, e.bin, e.env, 0, append([]string{"--configmap", "mv-wait", "--start-timeout", "3s"}, e.args...)...)
		recs, err := p.rest(t, 60*time.Second)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want 1; stderr:\n%s", err, p.stderr.String())
		}
		if len(recs) != 2 || recs[0].Kind != fleet.KindReady || recs[1].Kind != fleet.KindError ||
			!strings.Contains(recs[1].Error, "no start signal (annotation mesh-verify.io/start-at on configmap default/mv-wait) within --start-timeout 3s") {
			t.Fatalf("records %+v", recs)
		}
		if el := time.Since(began); el > 30*time.Second {
			t.Errorf("gave up after %s with a 3s start timeout", el)
		}
	})

	// A start instant beyond --start-timeout is refused as soon as it is
	// read, not waited for (it used to be, until the Job's deadline).
	t.Run("start far ahead", func(t *testing.T) {
		e.createConfigMap(t, "mv-2099", "run-2099", "rate: 10/s, duration: 2s", 1)
		e.annotate(t, "mv-2099", worker.AnnotationStartAt, "2099-01-01T00:00:00Z")
		began := time.Now()
		p := startWorker(t, e.bin, e.env, 0, append([]string{"--configmap", "mv-2099", "--start-timeout", "1m"}, e.args...)...)
		recs, err := p.rest(t, 60*time.Second)
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v, want 1; stderr:\n%s", err, p.stderr.String())
		}
		want := "configmap default/mv-2099: annotation mesh-verify.io/start-at 2099-01-01T00:00:00Z is "
		if len(recs) != 2 || recs[1].Kind != fleet.KindError || !strings.Contains(recs[1].Error, want) || !strings.Contains(recs[1].Error, "beyond --start-timeout 1m0s") {
			t.Fatalf("records %+v, want ready and an error saying %q", recs, want)
		}
		if el := time.Since(began); el > 30*time.Second {
			t.Errorf("refused after %s, with a 1m start timeout: want at once", el)
		}
	})

	t.Run("SIGTERM mid-attack", func(t *testing.T) {
		const run = "run-term"
		p := e.startAttacking(t, "mv-term", run, 500*time.Millisecond, 50)
		if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		recs, err := p.rest(t, 30*time.Second)
		if err != nil {
			t.Fatalf("exit %v after SIGTERM, want 0; stderr:\n%s", err, p.stderr.String())
		}
		last := recs[len(recs)-1]
		total, _, _ := e.tg.count(run)
		if last.Kind != fleet.KindFinal || last.State == nil || last.State.Total != total {
			t.Fatalf("last record %s with %v requests; the server counted %d", last.Kind, stateTotal(last.State), total)
		}
		if total >= 50*60 {
			t.Errorf("%d requests: the attack was not stopped", total)
		}
	})

	t.Run("stop annotation", func(t *testing.T) {
		const run = "run-stop"
		p := e.startAttacking(t, "mv-stop", run, 200*time.Millisecond, 30)
		e.annotate(t, "mv-stop", worker.AnnotationStop, "true")
		recs, err := p.rest(t, 30*time.Second)
		if err != nil {
			t.Fatalf("exit %v after the stop annotation, want 0; stderr:\n%s", err, p.stderr.String())
		}
		last := recs[len(recs)-1]
		total, _, _ := e.tg.count(run)
		if last.Kind != fleet.KindFinal || last.State == nil || last.State.Total != total {
			t.Fatalf("last record %s with %v requests; the server counted %d", last.Kind, stateTotal(last.State), total)
		}
	})

	// A scenario's target.tls.ca is a file on the coordinator's machine:
	// its certificates travel in the Secret's ca.pem, and the worker
	// trusts them for the target. Without them the same target's
	// certificate is refused, so the test shows the CA carried, not TLS
	// left unchecked.
	t.Run("TLS target with the coordinator's CA", func(t *testing.T) {
		var served atomic.Int64
		srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
			fmt.Fprintln(w, "hello from pod=web-0")
		}))
		srv.Config.ReadHeaderTimeout = 5 * time.Second
		srv.StartTLS() // 127.0.0.1, a certificate for 127.0.0.1 from its own authority
		defer srv.Close()
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
		sc := strings.Replace(fmt.Sprintf(labScenario, "rate: 20/s, duration: 1s", 1),
			`target: {url: "http://web.default.svc.cluster.local:8080/hello"}`,
			`target: {url: "https://web.default.svc.cluster.local:8443/hello", tls: {ca: certs/ca.pem}}`, 1)
		for _, c := range []struct {
			cm      string
			ca      []byte
			answers bool
		}{{"mv-tls", ca, true}, {"mv-tls-other-ca", pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: otherCA(t)}), false}} {
			data, err := worker.RunData([]byte(sc), nil, worker.RunConfig{RunID: "run-" + c.cm, Workers: 1, Target: srv.URL + "/hello", Interval: "1s"})
			if err != nil {
				t.Fatal(err)
			}
			data[worker.KeyCA] = string(c.ca)
			e.putConfigMap(t, c.cm, data)
			before := served.Load()
			p := startWorker(t, e.bin, e.env, 0, append([]string{"--configmap", c.cm}, e.args...)...)
			if rec, _ := p.next(t, 60*time.Second); rec.Kind != fleet.KindReady {
				t.Fatalf("%s: first record %+v; stderr:\n%s", c.cm, rec, p.stderr.String())
			}
			e.annotate(t, c.cm, worker.AnnotationStartAt, time.Now().Add(300*time.Millisecond).UTC().Format(time.RFC3339Nano))
			recs, _ := p.rest(t, 60*time.Second)
			last := recs[len(recs)-1]
			n := served.Load() - before
			switch {
			case c.answers && (last.Kind != fleet.KindFinal || last.State == nil || last.State.Total != 20 || n != 20):
				t.Errorf("%s: last record %s with %v requests, the server answered %d; want 20 and 20\n%s", c.cm, last.Kind, stateTotal(last.State), n, p.stderr.String())
			case !c.answers && (n != 0 || !strings.Contains(p.stderr.String(), "certificate signed by unknown authority")):
				t.Errorf("%s: a CA that did not sign the target's certificate: the server answered %d requests; stderr:\n%s", c.cm, n, p.stderr.String())
			}
		}
	})

	t.Run("index offset", func(t *testing.T) {
		// The second source's Job of a run of 4: its pod 1 is the run's
		// worker 3 in every record, the first one included.
		data, err := worker.RunData([]byte(fmt.Sprintf(labScenario, "rate: 10/s, duration: 1s", 4)), nil,
			worker.RunConfig{RunID: "run-offset", Workers: 4, Target: e.tg.url, Interval: "1s"})
		if err != nil {
			t.Fatal(err)
		}
		e.putConfigMap(t, "mv-offset", data)
		p := startWorker(t, e.bin, e.env, 1, append([]string{"--configmap", "mv-offset", "--index-offset", "2", "--start-timeout", "2s"}, e.args...)...)
		recs, _ := p.rest(t, 60*time.Second)
		if len(recs) != 2 || recs[0].Kind != fleet.KindReady || recs[0].Worker != 3 || recs[1].Worker != 3 {
			t.Errorf("records %+v, want worker 3's ready and error records", recs)
		}
		// An offset past the run's workers: an error record, already with
		// the run's numbering.
		p = startWorker(t, e.bin, e.env, 1, append([]string{"--configmap", "mv-offset", "--index-offset", "3"}, e.args...)...)
		recs, err = p.rest(t, 60*time.Second)
		var ee *exec.ExitError
		want := "worker index 4: want 0 to 3 (run.json workers 4)"
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || len(recs) != 1 || recs[0].Kind != fleet.KindError || recs[0].Worker != 4 || !strings.Contains(recs[0].Error, want) {
			t.Errorf("exit %v, records %+v: want worker 4's error record with %q", err, recs, want)
		}
	})

	t.Run("bad configmap", func(t *testing.T) {
		good, err := worker.RunData([]byte(fmt.Sprintf(labScenario, "rate: 10/s, duration: 1s", 1)), nil,
			worker.RunConfig{RunID: "run-bad", Workers: 1, Target: e.tg.url, Interval: "1s"})
		if err != nil {
			t.Fatal(err)
		}
		noRun := map[string]string{worker.KeyScenario: good[worker.KeyScenario], worker.KeyInventory: good[worker.KeyInventory]}
		badRun := map[string]string{worker.KeyScenario: good[worker.KeyScenario], worker.KeyInventory: good[worker.KeyInventory], worker.KeyRun: `{"runId":"r","workers":1,"target":"http://x/","interval":"0s"}`}
		e.putConfigMap(t, "mv-norun", noRun)
		e.putConfigMap(t, "mv-badrun", badRun)
		// The layout before the Secret: everything in the ConfigMap.
		e.putObjects(t, "mv-scenario-in-cm", good, map[string][]byte{})
		goodCM, _ := worker.SplitData(good)
		e.putObjects(t, "mv-nosecret", goodCM, nil)
		for _, c := range []struct{ cm, want string }{
			{"mv-norun", `configmap default/mv-norun: missing key "run.json"`},
			{"mv-badrun", "configmap default/mv-badrun, key run.json: interval 0s: want 500ms to 5m0s"},
			{"mv-absent", `get configmap default/mv-absent`},
			{"mv-scenario-in-cm", `configmap default/mv-scenario-in-cm: key "scenario.yaml" refused: it belongs in the Secret`},
			{"mv-nosecret", `get secret default/mv-nosecret`},
		} {
			p := startWorker(t, e.bin, e.env, 0, append([]string{"--configmap", c.cm}, e.args...)...)
			recs, err := p.rest(t, 60*time.Second)
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 1 {
				t.Errorf("%s: exit %v, want 1", c.cm, err)
			}
			if len(recs) != 1 || recs[0].Kind != fleet.KindError || !strings.Contains(recs[0].Error, c.want) {
				t.Errorf("%s: records %+v, want one error record with %q", c.cm, recs, c.want)
			}
			if !strings.Contains(p.stderr.String(), c.want) {
				t.Errorf("%s: stderr %q lacks %q", c.cm, p.stderr.String(), c.want)
			}
		}
	})
}

func stateTotal(s *tally.State) any {
	if s == nil {
		return "no state"
	}
	return s.Total
}

// otherCA is a self-signed authority of its own (every httptest server
// shares one certificate, so another server's would not do).
func otherCA(t *testing.T) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "not the target's CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}
