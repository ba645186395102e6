package podlogs

// Test fixtures that play the node and the API server for real: CRI log files
// on disk appended by writer goroutines, a file Opener that reads them the
// way the kubelet does, and a net/http server on 127.0.0.1 that serves
// /api/v1/namespaces/{ns}/pods/{pod}/log from them with the kubelet's
// semantics (cri-client logs.ReadLogs: sinceTime filter per record, prefix
// only at the start of a line, follow until the container stops) and that
// cuts its streams at random moments.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	"k8s.io/client-go/rest"
)

// podLog is one container's log as the runtime writes it: a CRI file per
// container instance, <dir>/<restartCount>.log, as under /var/log/pods.
type podLog struct {
	dir string

	mu      sync.Mutex
	cur     int
	f       *os.File
	exited  bool
	paused  bool          // readers stall before emitting (to hold a tail back)
	changed chan struct{} // closed on every change: a cheap fsnotify
}

func newPodLog(t testing.TB, dir string) *podLog {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &podLog{dir: dir, changed: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.openLocked(t)
	t.Cleanup(func() { p.mu.Lock(); p.f.Close(); p.mu.Unlock() })
	return p
}

func (p *podLog) path(n int) string { return filepath.Join(p.dir, fmt.Sprintf("%d.log", n)) }

func (p *podLog) openLocked(t testing.TB) {
	f, err := os.OpenFile(p.path(p.cur), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.f = f
}

func (p *podLog) notifyLocked() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// criRecord formats one record as containerd does (RFC3339Nano, trimmed).
func criRecord(ts time.Time, stream string, partial bool, msg string) string {
	tag := "F"
	if partial {
		tag = "P"
	}
	return ts.UTC().Format(time.RFC3339Nano) + " " + stream + " " + tag + " " + msg + "\n"
}

// append writes records in one write, so a line split in P and F records is
// never interleaved with another stream's record.
func (p *podLog) append(records ...string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.f.WriteString(strings.Join(records, "")); err != nil {
		panic(err)
	}
	p.notifyLocked()
}

// restart stops the current container and starts the next instance.
func (p *podLog) restart(t testing.TB) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.f.Close()
	p.cur++
	p.openLocked(t)
	p.notifyLocked()
}

// exit stops the container: a follow stream ends once it read the rest.
func (p *podLog) exit() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.exited = true
	p.notifyLocked()
}

func (p *podLog) hasPrevious() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cur > 0
}

func (p *podLog) setPaused(v bool) {
	p.mu.Lock()
	p.paused = v
	p.notifyLocked()
	p.mu.Unlock()
}

type record struct {
	ts      time.Time
	stream  string
	partial bool
	msg     string
	raw     []byte
}

func parseRecord(b []byte) (record, error) {
	f := bytes.SplitN(bytes.TrimSuffix(b, []byte("\n")), []byte(" "), 4)
	if len(f) < 3 {
		return record{}, fmt.Errorf("bad record %q", b)
	}
	ts, err := time.Parse(time.RFC3339Nano, string(f[0]))
	if err != nil {
		return record{}, err
	}
	r := record{ts: ts, stream: string(f[1]), partial: string(f[2]) == "P", raw: b}
	if len(f) == 4 {
		r.msg = string(f[3])
	}
	return r, nil
}

var errPreviousNotFound = errors.New("previous terminated container not found")

// tail emits every record of the current (or previous) container's file in
// file order and, when following, waits for more while that container runs,
// like ReadLogs: an incomplete last line is read again once complete.
func (p *podLog) tail(ctx context.Context, previous, follow bool, idle func(), emit func(record) error) error {
	p.mu.Lock()
	n := p.cur
	if previous {
		n--
	}
	p.mu.Unlock()
	if n < 0 {
		return errPreviousNotFound
	}
	f, err := os.Open(p.path(n))
	if err != nil {
		return err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var pend []byte
	var armed chan struct{}
	final := false
	for {
		b, err := br.ReadBytes('\n')
		pend = append(pend, b...)
		if err == io.EOF {
			if !follow {
				return nil
			}
			p.mu.Lock()
			running := n == p.cur && !p.exited
			ch := p.changed
			p.mu.Unlock()
			if !running {
				if final {
					return nil
				}
				final = true // read what was written before it stopped
				continue
			}
			if armed == nil {
				armed = ch // a write after this closes it; read once more first
				continue
			}
			if idle != nil {
				idle()
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-armed:
			}
			armed = nil
			continue
		}
		if err != nil {
			return err
		}
		rec, err := parseRecord(pend)
		pend = nil
		if err != nil {
			return err
		}
		for {
			p.mu.Lock()
			paused, ch := p.paused, p.changed
			p.mu.Unlock()
			if !paused {
				break
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ch:
			}
		}
		if err := emit(rec); err != nil {
			return err
		}
	}
}

// fileOpener reads the pods' CRI files directly (FormatCRI) and counts the
// streams open at once.
type fileOpener struct {
	mu      sync.Mutex
	logs    map[Target]*podLog
	open    map[Target]int
	now     int
	maxOpen int
	opens   int
}

func newFileOpener() *fileOpener {
	return &fileOpener{logs: map[Target]*podLog{}, open: map[Target]int{}}
}

func (o *fileOpener) add(t Target, p *podLog) {
	o.mu.Lock()
	o.logs[t] = p
	o.mu.Unlock()
}

func (o *fileOpener) Open(ctx context.Context, t Target, r OpenRequest) (io.ReadCloser, error) {
	o.mu.Lock()
	p := o.logs[t]
	if p == nil {
		o.mu.Unlock()
		return nil, fmt.Errorf("%w: pods %q not found", ErrGone, t.Pod)
	}
	o.now++
	o.opens++
	o.open[t]++
	o.maxOpen = max(o.maxOpen, o.now)
	o.mu.Unlock()
	since := r.Since.Truncate(time.Second) // the API's resolution
	pr, pw := io.Pipe()
	go func() {
		err := p.tail(ctx, r.Previous, r.Follow, nil, func(rec record) error {
			if rec.ts.Before(since) {
				return nil
			}
			_, err := pw.Write(rec.raw)
			return err
		})
		pw.CloseWithError(err)
	}()
	return &countedReader{PipeReader: pr, done: func() {
		o.mu.Lock()
		o.now--
		o.open[t]--
		o.mu.Unlock()
	}}, nil
}

// remove is the API removing the pod: its log can no longer be opened.
func (o *fileOpener) remove(t Target) {
	o.mu.Lock()
	delete(o.logs, t)
	o.mu.Unlock()
}

func (o *fileOpener) stats() (now, maxOpen, opens int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.now, o.maxOpen, o.opens
}

type countedReader struct {
	*io.PipeReader
	once sync.Once
	done func()
}

func (c *countedReader) Close() error {
	c.once.Do(c.done)
	return c.PipeReader.Close()
}

// apiServer serves one cluster's pod logs over real HTTP like the API server
// (backed by the kubelet's reader) and cuts streams at random.
type apiServer struct {
	srv *httptest.Server

	mu   sync.Mutex
	logs map[string]*podLog // ns/pod/container
	rng  *rand.Rand

	cutMin, cutSpan int     // a stream is cut after cutMin+rand(cutSpan) records (0: never)
	modes           []int   // cut modes to pick from (nil: all)
	maxCuts         int64   // stop cutting after this many (0: never stop)
	failOpen        float64 // share of opens answered 503

	cuts, fails, requests atomic.Int64
	fractional            atomic.Int64 // sinceTime values with sub-second digits
}

func newAPIServer(t testing.TB, seed uint64) *apiServer {
	a := &apiServer{logs: map[string]*podLog{}, rng: rand.New(rand.NewPCG(seed, 7))}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v1/namespaces/{ns}/pods/{pod}/log", a.serveLog)
	a.srv = httptest.NewServer(mux)
	t.Cleanup(a.srv.Close)
	return a
}

func (a *apiServer) add(t Target, p *podLog) {
	a.mu.Lock()
	a.logs[t.Namespace+"/"+t.Pod+"/"+t.Container] = p
	a.mu.Unlock()
}

// remove is the API removing the pod: its log answers 404.
func (a *apiServer) remove(t Target) {
	a.mu.Lock()
	delete(a.logs, t.Namespace+"/"+t.Pod+"/"+t.Container)
	a.mu.Unlock()
}

func (a *apiServer) client(t testing.TB) kclient.Interface {
	cs, err := kclient.NewForConfig(&rest.Config{Host: a.srv.URL, QPS: 1e6, Burst: 1e6})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func status(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":%q,"reason":%q,"code":%d}`, msg, reason, code)
}

var errCleanCut = errors.New("clean cut")

func (a *apiServer) serveLog(w http.ResponseWriter, r *http.Request) {
	a.requests.Add(1)
	q := r.URL.Query()
	a.mu.Lock()
	p := a.logs[r.PathValue("ns")+"/"+r.PathValue("pod")+"/"+q.Get("container")]
	budget, mode, fail := 0, a.rng.IntN(3), a.rng.Float64() < a.failOpen
	if len(a.modes) > 0 {
		mode = a.modes[a.rng.IntN(len(a.modes))]
	}
	if a.cutMin > 0 {
		budget = a.cutMin + a.rng.IntN(a.cutSpan)
	}
	a.mu.Unlock()
	if p == nil {
		status(w, http.StatusNotFound, "NotFound", fmt.Sprintf("pods %q not found", r.PathValue("pod")))
		return
	}
	if fail {
		a.fails.Add(1)
		status(w, http.StatusServiceUnavailable, "ServiceUnavailable", "kubelet unreachable")
		return
	}
	var since time.Time
	if s := q.Get("sinceTime"); s != "" {
		var err error
		if since, err = time.Parse(time.RFC3339, s); err != nil {
			status(w, http.StatusBadRequest, "BadRequest", err.Error())
			return
		}
		if since.Nanosecond() != 0 {
			a.fractional.Add(1)
		}
	}
	timestamps, follow, previous := q.Get("timestamps") == "true", q.Get("follow") == "true", q.Get("previous") == "true"
	if previous && !p.hasPrevious() {
		status(w, http.StatusBadRequest, "BadRequest", fmt.Sprintf("previous terminated container %q in pod %q not found", q.Get("container"), r.PathValue("pod")))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	newLine := true
	emitted := 0
	p.tail(r.Context(), previous, follow, func() { rc.Flush() }, func(rec record) error {
		var out []byte
		if !rec.ts.Before(since) {
			if timestamps && newLine {
				out = append(out, rec.ts.UTC().Format("2006-01-02T15:04:05.000000000Z07:00")+" "...)
			}
			out = append(out, rec.msg...)
			if !rec.partial {
				out = append(out, '\n')
			}
			emitted++
		}
		newLine = !rec.partial // as ReadLogs: updated for skipped records too
		if budget > 0 && emitted >= budget && len(out) > 0 && (a.maxCuts == 0 || a.cuts.Load() < a.maxCuts) {
			a.cuts.Add(1)
			switch mode {
			case 0: // mid-line: half a line, then the connection drops
				w.Write(out[:len(out)/2])
				rc.Flush()
				panic(http.ErrAbortHandler)
			case 1: // at a line boundary, the connection drops
				w.Write(out)
				rc.Flush()
				panic(http.ErrAbortHandler)
			default: // the stream ends cleanly while the container runs
				w.Write(out)
				return errCleanCut
			}
		}
		_, err := w.Write(out)
		return err
	})
}

// checkGoroutines fails the test when goroutines started during it are
// still running at its end (after a grace period for closing connections).
func checkGoroutines(t *testing.T) {
	t.Helper()
	before := runtime.NumGoroutine()
	t.Cleanup(func() {
		deadline := time.Now().Add(3 * time.Second)
		for {
			n := runtime.NumGoroutine()
			if n <= before {
				return
			}
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				buf = buf[:runtime.Stack(buf, true)]
				t.Errorf("goroutine leak: %d before, %d after\n%s", before, n, buf)
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
}

// collect reads a Follower's lines until the channel closes.
type collected struct {
	mu    sync.Mutex
	lines map[Target][]Line
	n     atomic.Int64
	done  chan struct{}
}

func collect(f *Follower) *collected {
	c := &collected{lines: map[Target][]Line{}, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		for l := range f.Lines() {
			c.mu.Lock()
			c.lines[l.Target] = append(c.lines[l.Target], l)
			c.mu.Unlock()
			c.n.Add(1)
		}
	}()
	return c
}

func (c *collected) get(t Target) []Line {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Line(nil), c.lines[t]...)
}

func (c *collected) texts(t Target) []string {
	var out []string
	for _, l := range c.get(t) {
		out = append(out, l.Text)
	}
	return out
}

// waitFor polls cond until it holds or the timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
