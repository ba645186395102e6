package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
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

// port-forward serves on one P unless GOMAXPROCS is set. Not parallel: it
// changes the test process's GOMAXPROCS (and restores it).
func TestLimitProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	runtime.GOMAXPROCS(3)
	if got := limitProcs(func(string) string { return "3" }); got != 3 || runtime.GOMAXPROCS(0) != 3 {
		t.Errorf("GOMAXPROCS=3 in the environment: limitProcs %d, GOMAXPROCS %d; want 3, 3", got, runtime.GOMAXPROCS(0))
	}
	if got := limitProcs(func(string) string { return "" }); got != forwarderMaxProcs || runtime.GOMAXPROCS(0) != forwarderMaxProcs {
		t.Errorf("no GOMAXPROCS: limitProcs %d, GOMAXPROCS %d; want %d", got, runtime.GOMAXPROCS(0), forwarderMaxProcs)
	}
}
