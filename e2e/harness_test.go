// Package e2e drives the built mesh-verify binary against real local HTTP
// servers (the "pods" of two or three "clusters") behind nginx, a
// third-party proxy whose weighted round robin is the ground truth: no
// routing decision in these tests comes from mesh-verify's own code.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab/nginx"
	"github.com/mesh-verify/mesh-verify/reports"
)

// mv is the binary under test, built by TestMain.
var mv = new(e2etest.Binary)

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, mv, nil)) }

// pod is one backend: a real HTTP server on a loopback port that answers
// like the tutorials' apps and counts what it served.
type pod struct {
	name, cluster, version string
	srv                    *http.Server
	addr                   string
	hits                   atomic.Int64
	mu                     sync.Mutex
	ids                    map[string]int
}

func startPod(t *testing.T, name, cluster, version string) *pod {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{name: name, cluster: cluster, version: version, addr: ln.Addr().String(), ids: map[string]int{}}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.hits.Add(1)
		p.mu.Lock()
		p.ids[r.Header.Get("X-Request-Id")]++
		p.mu.Unlock()
		fmt.Fprintf(w, "I'm callme-service %s (pod %s in %s)", p.version, p.name, p.cluster)
	})}
	go p.srv.Serve(ln)
	t.Cleanup(func() { p.srv.Close() })
	return p
}

// nginxProxy runs Debian's nginx with a weighted upstream over the pods.
type nginxProxy struct {
	url string
}

func nginxBinary(t *testing.T) string {
	p, err := nginx.Find()
	if err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatal("nginx is not installed; .ci/run installs nginx-light")
	}
	t.Skip("nginx is not installed (apt-get install nginx-light); the proxy tests need it")
	return ""
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startNginx writes a config with one upstream (server weights as given) and
// starts nginx in the foreground; the test stops it by its pid.
func startNginx(t *testing.T, upstream string) *nginxProxy {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	port := freePort(t)
	conf := fmt.Sprintf(`
worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path %[1]s/body;
  proxy_temp_path %[1]s/proxy;
  fastcgi_temp_path %[1]s/fastcgi;
  uwsgi_temp_path %[1]s/uwsgi;
  scgi_temp_path %[1]s/scgi;
  upstream mesh {
%[2]s
    keepalive 32;
  }
  server {
    listen 127.0.0.1:%[3]d;
    keepalive_requests 100000;
    location / {
      proxy_pass http://mesh;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`, dir, upstream, port)
	cf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(cf, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", cf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	// Its own process group, so stopping it also stops its worker.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("nginx exited: %v: %s", err, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nginx did not listen on %s: %s", addr, stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return &nginxProxy{url: "http://" + addr}
}

func upstreamLines(weights map[*pod]int) string {
	var b strings.Builder
	for p, w := range weights {
		fmt.Fprintf(&b, "    server %s weight=%d;\n", p.addr, w)
	}
	return b.String()
}

// runBinary runs the binary until it ends or ctx does.
func runBinary(t *testing.T, ctx context.Context, args ...string) e2etest.Result {
	t.Helper()
	return mv.Run(t, e2etest.Cmd{Context: ctx}, args...)
}

// readReport is the report a run wrote under out, and its run directory.
func readReport(t *testing.T, out string) (*reports.Report, string) {
	t.Helper()
	r := e2etest.Result{Out: out, Reports: e2etest.ReadReports(t, out)}
	return r.Report(), r.Dir()
}

func writeScenario(t *testing.T, body string) string {
	t.Helper()
	return e2etest.WriteFile(t, "scenario.yaml", body)
}
