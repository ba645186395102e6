package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// portForward starts `mesh-verify port-forward ARGS` (the built binary);
// cancelling ctx sends it SIGINT, as Ctrl-C does, and done gets its end
// (nil for exit 0).
func portForward(t *testing.T, ctx context.Context, args ...string) (stdout, stderr *e2etest.SyncBuffer, done chan error) {
	t.Helper()
	stdout, stderr = &e2etest.SyncBuffer{}, &e2etest.SyncBuffer{}
	cmd := exec.Command(mv.Path, append([]string{"port-forward"}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start mesh-verify port-forward: %v", err)
	}
	// Not exec.CommandContext: its Wait reports the context's error even
	// when the command, interrupted, exits 0, which is what is tested.
	exited := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			cmd.Process.Signal(os.Interrupt)
		case <-exited:
		}
	}()
	t.Cleanup(func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill() // by its pid, whatever the test did
		}
	})
	done = make(chan error, 1)
	go func() { err := cmd.Wait(); close(exited); done <- err }()
	return stdout, stderr, done
}

// mesh-verify port-forward against a real API server: svc with a named
// targetPort, a printed local port, requests through it, and a failing
// connection (backend down) that does not end the command (kubectl's does).
func TestLabPortForwardCommand(t *testing.T) {
	t.Parallel()
	lab := labtest.Clusters(t, "c1")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintln(w, "pod=web-0")
	})}
	go srv.Serve(ln)
	defer func() { mu.Lock(); srv.Close(); mu.Unlock() }()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	lab.Apply(t, "c1", labtest.Node("node-1"))
	lab.Apply(t, "c1", `apiVersion: v1
kind: Pod
metadata: {name: web-0, namespace: default, labels: {app: web}}
spec:
  containers: [{name: app, image: web, ports: [{name: http, containerPort: 8080}]}]
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: web, port: 80, targetPort: http}]
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: PortForward
metadata: {name: web-0, namespace: default}
spec:
  forwards: [{ports: [8080], target: {port: `+port+`, address: 127.0.0.1}}]
`)
	lab.Kubectl(t, "c1", "wait", "--for=condition=Ready", "pod/web-0", "--timeout=60s")

	// A port name without LOCAL listens on the Service port's number, like
	// kubectl (translateServicePortToTargetPort): a free port P as the
	// Service's port proves it is not a random one.
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, p, _ := net.SplitHostPort(free.Addr().String())
	free.Close()
	lab.Apply(t, "c1", `apiVersion: v1
kind: Service
metadata: {name: web2, namespace: default}
spec:
  selector: {app: web}
  ports: [{name: alt, port: `+p+`, targetPort: http}]
`)
	for _, port := range []string{"alt", p} {
		pctx, pcancel := context.WithCancel(context.Background())
		pout, perr, pdone := portForward(t, pctx, "--kubeconfig", lab.Kubeconfig, "--context", lab.Context("c1"), "svc/web2", port)
		want := "Forwarding from 127.0.0.1:" + p + " -> 8080\n"
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(pout.String(), want); time.Sleep(50 * time.Millisecond) {
			select {
			case err := <-pdone:
				t.Fatalf("port %s: command ended: %v\n%s", port, err, perr)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("port %s: no %q: %q %q", port, want, pout, perr)
			}
		}
		pcancel()
		if err := <-pdone; err != nil {
			t.Fatalf("port %s: %v", port, err)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stdout, stderr, done := portForward(t, ctx, "--kubeconfig", lab.Kubeconfig, "--context", lab.Context("c1"), "-n", "default", "svc/web", ":web")
	re := regexp.MustCompile(`Forwarding from (127\.0\.0\.1:\d+) -> 8080\n`)
	var addr string
	deadline := time.Now().Add(30 * time.Second)
	for addr == "" {
		if m := re.FindStringSubmatch(stdout.String()); m != nil {
			addr = m[1]
			break
		}
		select {
		case err := <-done:
			t.Fatalf("command ended: %v\n%s", err, stderr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Forwarding line: %q %q", stdout, stderr)
		}
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	getBody := func() (string, error) {
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b)), err
	}
	// kwok picks the PortForward up through a watch: poll the first answer.
	var body string
	for i := 0; ; i++ {
		if body, err = getBody(); err == nil && body == "pod=web-0" {
			break
		}
		if i == 100 {
			t.Fatalf("no answer through the forward: %q %v\n%s", body, err, stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for range 20 {
		if body, err := getBody(); err != nil || body != "pod=web-0" {
			t.Fatalf("%q %v", body, err)
		}
	}
	mu.Lock()
	srv.Close() // backend down: the next connection fails, the command does not
	mu.Unlock()
	if _, err := getBody(); err == nil {
		t.Fatal("request succeeded with the backend down")
	}
	select {
	case err := <-done:
		t.Fatalf("command ended after one failed connection: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	// The cause comes from kwok's error stream and is logged when the
	// failed connection is wound up, a moment after the client saw it fail.
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(stderr.String(), "connection refused"); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("stderr does not report the failed connection's cause: %q", stderr)
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("command ended with %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("command did not stop after cancel")
	}
	t.Logf("stdout %q; stderr %q", stdout, stderr)
}
