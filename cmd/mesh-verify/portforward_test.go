package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

func TestCheckLoopback(t *testing.T) {
	for _, ok := range []string{"127.0.0.1", "127.1.2.3", "::1", "localhost"} {
		if err := checkLoopback(ok); err != nil {
			t.Errorf("checkLoopback(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "0.0.0.0", "::", "10.0.0.1", "192.168.1.5", "example.com", "localhost.example.com"} {
		if err := checkLoopback(bad); err == nil {
			t.Errorf("checkLoopback(%q) accepted", bad)
		}
	}
}

func TestSplitLocalPort(t *testing.T) {
	for _, tc := range []struct {
		in     string
		local  int
		same   bool
		remote string
		bad    bool
	}{
		{"8080", 8080, true, "8080", false}, // kubectl: local 8080, not a free port
		{"http", 0, true, "http", false},    // local: the number the name resolves to
		{"9000:8080", 9000, false, "8080", false},
		{":8080", 0, false, "8080", false},
		{":http", 0, false, "http", false},
		{"0:web", 0, false, "web", false},
		{"", 0, false, "", true},
		{"x:80", 0, false, "", true},
		{"80:", 0, false, "", true},
		{"70000:80", 0, false, "", true},
	} {
		l, same, r, err := splitLocalPort(tc.in)
		if tc.bad != (err != nil) || (!tc.bad && (l != tc.local || same != tc.same || r != tc.remote)) {
			t.Errorf("splitLocalPort(%q) = %d %v %q %v", tc.in, l, same, r, err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func runPF(ctx context.Context, args ...string) (stdout, stderr *syncBuffer, done chan error) {
	cmd := newPortForwardCmd()
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetArgs(args)
	done = make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	return stdout, stderr, done
}

func exitCodeOf(err error) int { return exitcode.Of(err, -1) }

func TestPortForwardSetupErrors(t *testing.T) {
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubeconfig")
	os.WriteFile(kc, []byte("apiVersion: v1\nkind: Config\nclusters: [{name: a, cluster: {server: 'https://127.0.0.1:1'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: kind-a, context: {cluster: a, user: u}}]\n"), 0o600)
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--kubeconfig", kc, "--context", "kind-b", "svc/web", "80"}, exitcode.Setup, "context kind-b not found in kubeconfig (contexts: kind-a)"},
		{[]string{"--kubeconfig", kc, "--context", "kind-a", "svc/web", "80"}, exitcode.Setup, "API server https://127.0.0.1:1 unreachable"},
		{[]string{"--kubeconfig", kc, "web", "80"}, exitcode.InvalidInput, "want pod/NAME"},
		{[]string{"--kubeconfig", kc, "svc/web", "x:80"}, exitcode.InvalidInput, "not a port number"},
		{[]string{"--kubeconfig", kc, "--context", "kind-a", "--context", "kind-b", "svc/web", "80"}, exitcode.InvalidInput, "--context given 2 times"},
		{[]string{"--kubeconfig", kc, "--as-group", "g", "svc/web", "80"}, exitcode.InvalidInput, "--as-group needs --as"},
		{[]string{"--kubeconfig", kc, "--request-timeout", "soon", "svc/web", "80"}, exitcode.InvalidInput, `--request-timeout "soon"`},
		{[]string{"--kubeconfig", kc, "-n", "Bad_NS", "svc/web", "80"}, exitcode.InvalidInput, `--namespace "Bad_NS"`},
		{[]string{"--kubeconfig", kc, "--address", "", "svc/web", "80"}, exitcode.InvalidInput, `--address "": want a loopback address`},
		{[]string{"--kubeconfig", kc, "--address", "0.0.0.0", "svc/web", "80"}, exitcode.InvalidInput, `--address "0.0.0.0": want a loopback address`},
		{[]string{"--kubeconfig", kc, "--address", "::", "svc/web", "80"}, exitcode.InvalidInput, "must not be reachable from other machines"},
		{[]string{"--kubeconfig", kc, "--address", "192.168.1.5", "svc/web", "80"}, exitcode.InvalidInput, "want a loopback address"},
		{[]string{"--kubeconfig", kc, "--address", "example.com", "svc/web", "80"}, exitcode.InvalidInput, "want a loopback address"},
	} {
		_, _, done := runPF(context.Background(), tc.args...)
		err := <-done
		if exitCodeOf(err) != tc.code || !strings.Contains(fmt.Sprint(err), tc.msg) {
			t.Errorf("%v: exit %d, %v; want %d, %q", tc.args, exitCodeOf(err), err, tc.code, tc.msg)
		}
	}
}

// mesh-verify port-forward against a real API server: svc with a named
// targetPort, a printed local port, requests through it, and a failing
// connection (backend down) that does not end the command (kubectl's does).
func TestLabPortForwardCommand(t *testing.T) {
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
		pout, perr, pdone := runPF(pctx, "--kubeconfig", lab.Kubeconfig, "--context", lab.Context("c1"), "svc/web2", port)
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
	stdout, stderr, done := runPF(ctx, "--kubeconfig", lab.Kubeconfig, "--context", lab.Context("c1"), "-n", "default", "svc/web", ":web")
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
