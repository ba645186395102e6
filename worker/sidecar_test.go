package worker

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/fleet"
)

// fakeProxy is a real HTTP server on 127.0.0.1 standing in for the
// sidecar's endpoints (pilot-agent's readiness and quit, Envoy's admin):
// no mesh runs here. It answers 503 to the first notReady probes, then
// 200, and counts the POSTs to /quitquitquit.
type fakeProxy struct {
	mu       sync.Mutex
	probes   int
	notReady int
	quits    int
	quitCode int
	order    []string
}

func (f *fakeProxy) start(t *testing.T) *Proxy {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		switch {
		case r.URL.Path == "/ready" && r.Method == http.MethodGet:
			f.probes++
			f.order = append(f.order, "ready")
			if f.probes <= f.notReady {
				http.Error(w, "PRE_INITIALIZING", http.StatusServiceUnavailable)
			}
		case r.URL.Path == "/quitquitquit" && r.Method == http.MethodPost:
			f.quits++
			f.order = append(f.order, "quit")
			if f.quitCode != 0 {
				w.WriteHeader(f.quitCode)
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return &Proxy{Name: "test", ReadyURL: srv.URL + "/ready", QuitURL: srv.URL + "/quitquitquit"}
}

func (f *fakeProxy) counts() (probes, quits int, order []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.probes, f.quits, append([]string(nil), f.order...)
}

func TestProxyFor(t *testing.T) {
	t.Parallel()
	// admin is $MESH_VERIFY_SIDECAR_ADMIN (the lab's); "" keeps the
	// proxies' real ports.
	for _, c := range []struct{ sidecar, admin, ready, quit, err string }{
		{"istio", "", "http://127.0.0.1:15021/healthz/ready", "http://127.0.0.1:15020/quitquitquit", ""},
		{"kuma", "", "http://127.0.0.1:9901/ready", "http://127.0.0.1:9901/quitquitquit", ""},
		{"none", "", "", "", ""},
		{"", "", "", "", ""},
		{"linkerd", "", "", "", `--sidecar "linkerd": want istio, kuma or none`},
		{"istio", "127.0.0.1:41234", "http://127.0.0.1:41234/healthz/ready", "http://127.0.0.1:41234/quitquitquit", ""},
		{"kuma", "[::1]:9", "http://[::1]:9/ready", "http://[::1]:9/quitquitquit", ""},
		{"kuma", "localhost:9902", "http://localhost:9902/ready", "http://localhost:9902/quitquitquit", ""},
		{"none", "127.0.0.1:41234", "", "", ""},
		{"istio", "10.0.0.7:15021", "", "", "want a loopback address"},
		{"istio", "127.0.0.1", "", "", "want HOST:PORT"},
		{"istio", "127.0.0.1:0", "", "", "want a port 1..65535"},
		{"istio", "127.0.0.1:http", "", "", "want a port 1..65535"},
	} {
		p, err := ProxyAt(c.sidecar, c.admin)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q at %q: %v, want %q", c.sidecar, c.admin, err, c.err)
			}
		case err != nil:
			t.Errorf("%q: %v", c.sidecar, err)
		case c.ready == "" && p != nil:
			t.Errorf("%q: %+v, want no proxy", c.sidecar, p)
		case c.ready != "" && (p == nil || p.ReadyURL != c.ready || p.QuitURL != c.quit):
			t.Errorf("%q: %+v, want ready %s quit %s", c.sidecar, p, c.ready, c.quit)
		}
	}
}

func TestProxyWaitReady(t *testing.T) {
	t.Parallel()
	t.Run("ready after some probes", func(t *testing.T) {
		t.Parallel()
		f := &fakeProxy{notReady: 3}
		if err := f.start(t).WaitReady(context.Background(), 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if probes, _, _ := f.counts(); probes != 4 {
			t.Errorf("%d probes, want 4 (3 answered 503, then 200)", probes)
		}
	})
	t.Run("never ready: bounded, named", func(t *testing.T) {
		t.Parallel()
		f := &fakeProxy{notReady: 1 << 30}
		p := f.start(t)
		start := time.Now()
		err := p.WaitReady(context.Background(), time.Second)
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("gave up after %s, want about 1s", took)
		}
		if err == nil || !strings.Contains(err.Error(), "the test sidecar was not ready within 1s (GET "+p.ReadyURL) || !strings.Contains(err.Error(), "status 503") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		t.Parallel()
		p := (&fakeProxy{}).start(t)
		p.ReadyURL = "http://127.0.0.1:1/ready"
		if err := p.WaitReady(context.Background(), 600*time.Millisecond); err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		t.Parallel()
		p := (&fakeProxy{notReady: 1 << 30}).start(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := p.WaitReady(ctx, time.Minute); err == nil || !strings.Contains(err.Error(), "stopped while waiting for the test sidecar") {
			t.Fatalf("error %v", err)
		}
	})
}

func TestProxyQuit(t *testing.T) {
	t.Parallel()
	ok := &fakeProxy{}
	if err := ok.start(t).Quit(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, quits, _ := ok.counts(); quits != 1 {
		t.Errorf("%d quits, want 1", quits)
	}
	bad := &fakeProxy{quitCode: http.StatusForbidden}
	if err := bad.start(t).Quit(context.Background()); err == nil || !strings.Contains(err.Error(), "stop the test sidecar") || !strings.Contains(err.Error(), "status 403") {
		t.Fatalf("error %v, want the 403 named", err)
	}
}

// The worker waits for the proxy before anything else and asks it to
// quit when it ends, an error included: here the kubeconfig is missing,
// so the worker fails right after the proxy is ready, with an error
// record, and the proxy is still told to quit, after the record.
func TestRunFollowsTheSidecar(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name     string
		notReady int
		timeout  time.Duration
		want     string
	}{
		{"ready, then the worker fails", 2, 10 * time.Second, "load kubeconfig"},
		{"never ready", 1 << 30, 700 * time.Millisecond, "the test sidecar was not ready within 700ms"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fakeProxy{notReady: c.notReady}
			var out, log bytes.Buffer
			o := Options{ConfigMap: "cm", Records: &out, Log: &log, Proxy: f.start(t), ProxyReadyTimeout: c.timeout}
			o.Kube.Kubeconfig = []string{t.TempDir() + "/no-kubeconfig"}
			if err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want %q", err, c.want)
			}
			rec, err := fleet.NewDecoder(&out).Next()
			if err != nil || rec.Kind != fleet.KindError || !strings.Contains(rec.Error, c.want) {
				t.Fatalf("record %+v, %v", rec, err)
			}
			probes, quits, order := f.counts()
			if quits != 1 || order[len(order)-1] != "quit" || probes < 1 {
				t.Fatalf("proxy calls %v: want readiness probes, then one quit", order)
			}
			if !strings.Contains(log.String(), "asked the test sidecar to quit") {
				t.Errorf("log %q", log.String())
			}
		})
	}
	t.Run("timeout bounded", func(t *testing.T) {
		t.Parallel()
		err := Run(context.Background(), Options{ConfigMap: "cm", Proxy: &Proxy{}, ProxyReadyTimeout: MaxProxyReadyTimeout + time.Second})
		if err == nil || !strings.Contains(err.Error(), "--sidecar-ready-timeout 1h0m1s: want a duration up to 1h0m0s") {
			t.Fatalf("error %v", err)
		}
	})
}
