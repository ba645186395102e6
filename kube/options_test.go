package kube

import (
	"context"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestParseRequestTimeout(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{"0", 0, false},
		{"", 0, false},
		{"30", 30 * time.Second, false}, // bare integer: seconds, like kubectl
		{"30s", 30 * time.Second, false},
		{"1m30s", 90 * time.Second, false},
		{"500ms", 500 * time.Millisecond, false},
		{"-1", 0, true},
		{"-5s", 0, true},
		{"soon", 0, true},
		{"99999999999999", 0, true},
	} {
		got, err := ParseRequestTimeout(tc.in)
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("ParseRequestTimeout(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

// versionServer is an API server's /version (a real HTTP server; only its
// answer is canned) recording the headers of every request.
type versionServer struct {
	*httptest.Server
	mu      sync.Mutex
	headers []http.Header
}

func newVersionServer(t *testing.T) *versionServer {
	vs := &versionServer{}
	// TLS: client-go sends no credentials to a plain-HTTP server.
	vs.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vs.mu.Lock()
		vs.headers = append(vs.headers, r.Header.Clone())
		vs.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.0"}`)
	}))
	t.Cleanup(vs.Close)
	return vs
}

// caData is the server's certificate for a kubeconfig's
// certificate-authority-data.
func (vs *versionServer) caData() string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: vs.Certificate().Raw}))
}

func (vs *versionServer) last(t *testing.T) http.Header {
	vs.mu.Lock()
	defer vs.mu.Unlock()
	if len(vs.headers) == 0 {
		t.Fatal("the server saw no request")
	}
	return vs.headers[len(vs.headers)-1]
}

func writeKubeconfigText(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestOptionsApplied: the connection flags reach the requests the way
// kubectl's do (clientcmd overrides), and --context CLUSTER=CONTEXT
// replaces the scenario's context.
func TestOptionsApplied(t *testing.T) {
	good, bad := newVersionServer(t), newVersionServer(t)
	kc := writeKubeconfigText(t, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- {name: good, cluster: {server: %q, certificate-authority-data: %s}}
- {name: bad, cluster: {server: %q, certificate-authority-data: %s}}
users: [{name: u, user: {token: kubeconfig-token}}]
contexts:
- {name: good, context: {cluster: good, user: u, namespace: demo}}
- {name: wrong, context: {cluster: bad, user: u}}
current-context: wrong
`, good.URL, good.caData(), bad.URL, bad.caData()))
	cfg, err := LoadConfig(Options{
		Kubeconfig: []string{kc}, Contexts: map[string]string{"c1": "good"},
		Token: "flag-token", Impersonate: "jane", ImpersonateGroups: []string{"devs", "ops"}, RequestTimeout: 7 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	cl, err := cfg.Connect(context.Background(), ClusterRef{Name: "c1", Context: "wrong"})
	if err != nil {
		t.Fatal(err)
	}
	if cl.Context != "good" || cl.Server != good.URL || cl.Namespace != "demo" || cl.REST.Timeout != 7*time.Second {
		t.Errorf("cluster %+v, timeout %v", cl, cl.REST.Timeout)
	}
	h := good.last(t)
	if got := h.Get("Authorization"); got != "Bearer flag-token" {
		t.Errorf("Authorization %q, want the --token", got)
	}
	if h.Get("Impersonate-User") != "jane" || strings.Join(h.Values("Impersonate-Group"), ",") != "devs,ops" {
		t.Errorf("impersonation headers %v", h)
	}
	bad.mu.Lock()
	if len(bad.headers) > 0 {
		t.Errorf("the scenario's context was used despite the override")
	}
	bad.mu.Unlock()

	// Without options the kubeconfig's own user and context count.
	cfg, err = LoadConfig(Options{Kubeconfig: []string{kc}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Connect(context.Background(), ClusterRef{Name: "c1", Context: "wrong"}); err != nil {
		t.Fatal(err)
	}
	if h := bad.last(t); h.Get("Authorization") != "Bearer kubeconfig-token" || h.Get("Impersonate-User") != "" {
		t.Errorf("headers without flags %v", h)
	}
}

// TestExecPluginPreflight runs real plugin processes (shell scripts)
// against a real HTTP server.
func TestExecPluginPreflight(t *testing.T) {
	srv := newVersionServer(t)
	dir := t.TempDir()
	t.Cleanup(func() { killPids(t, filepath.Join(dir, "pids")) })
	const cred = `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"plugin-secret-token"}}`
	for _, tc := range []struct {
		name, script string
		timeout      time.Duration
		want         string // "" means success
	}{
		{"slow but in time", "sleep 1\necho '" + cred + "'", 10 * time.Second, ""},
		{"reads exec info", `case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*) echo '` + cred + `';; *) exit 9;; esac`, 10 * time.Second, ""},
		// The plugin records its pid: should it outlive Connect, the test
		// stops it (and fails below).
		{"hangs", "echo $$ >> " + filepath.Join(dir, "pids") + "\nexec sleep 60", time.Second, "gave no credentials within 1s (--exec-timeout)"},
		// A plugin whose child hangs (a helper it started): the child is
		// stopped with it.
		{"child hangs", "sleep 60 &\necho $! >> " + filepath.Join(dir, "pids") + "\necho $$ >> " + filepath.Join(dir, "pids") + "\nwait", time.Second, "gave no credentials within 1s (--exec-timeout)"},
		{"fails", "echo 'token expired, run login' >&2\nexit 3", 10 * time.Second, "exited with status 3; its stderr ends: token expired, run login"},
		{"garbage", "echo hello", 10 * time.Second, "printed no ExecCredential on stdout"},
		{"no credential", `echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}'`, 10 * time.Second, "without a token or client certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plugin := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".sh")
			if err := os.WriteFile(plugin, []byte("#!/bin/sh\n"+tc.script+"\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			kc := pluginKubeconfig(t, srv, plugin)
			cfg, err := LoadConfig(Options{Kubeconfig: []string{kc}, ExecTimeout: tc.timeout, ProbeTimeout: 5 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			_, err = cfg.Connect(context.Background(), ClusterRef{Name: "c1", Context: "a"})
			took := time.Since(start)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if got := srv.last(t).Get("Authorization"); got != "Bearer plugin-secret-token" {
					t.Errorf("Authorization %q", got)
				}
				return
			}
			var ce *ClusterError
			if !errors.As(err, &ce) || ce.Reason != ReasonExecPlugin {
				t.Fatalf("error %v (%T), want a ClusterError with reason ExecPlugin", err, err)
			}
			msg := err.Error()
			for _, w := range []string{"cluster c1 (context a)", "exec credential plugin " + plugin, "kubeconfig user sso-user", tc.want} {
				if !strings.Contains(msg, w) {
					t.Errorf("message %q lacks %q", msg, w)
				}
			}
			if strings.Contains(msg, "plugin-secret-token") {
				t.Errorf("message shows the credential: %q", msg)
			}
			if took > tc.timeout+3*time.Second {
				t.Errorf("took %v with exec timeout %v", took, tc.timeout)
			}
			// SIGKILL to the group is sent before Connect returns; a killed
			// process still has to be scheduled to die, which on a loaded
			// machine takes a moment.
			alive := alivePids(filepath.Join(dir, "pids"))
			for end := time.Now().Add(2 * time.Second); len(alive) > 0 && time.Now().Before(end); alive = alivePids(filepath.Join(dir, "pids")) {
				time.Sleep(20 * time.Millisecond)
			}
			if len(alive) > 0 {
				t.Errorf("plugin processes %v still run 2s after Connect returned", alive)
			}
		})
	}
}

// pluginKubeconfig is a kubeconfig whose only user is the exec plugin at
// path plugin, for the server srv.
func pluginKubeconfig(t *testing.T, srv *versionServer, plugin string) string {
	return writeKubeconfigText(t, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: sso-user, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, interactiveMode: Never}}}]
contexts: [{name: a, context: {cluster: a, user: sso-user}}]
`, srv.URL, srv.caData(), plugin))
}

// killPids kills the processes whose ids the file lists, one a line.
func killPids(t *testing.T, file string) {
	b, err := os.ReadFile(file)
	if err != nil {
		return
	}
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}

// alivePids are the processes the file lists that still run.
// zombie reports a process that has exited and waits to be reaped (an
// orphan's parent may be a PID 1 that never reaps).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && strings.HasPrefix(rest, "Z")
}

func alivePids(file string) []int {
	b, _ := os.ReadFile(file)
	var out []int
	for _, f := range strings.Fields(string(b)) {
		var pid int
		if _, err := fmt.Sscan(f, &pid); err == nil && pid > 1 && syscall.Kill(pid, 0) == nil && !zombie(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// --token replaces an exec plugin's credential: client-go never runs the
// plugin then, and neither may the preflight (a CI job passes --token
// precisely where gcloud or aws is not installed).
func TestTokenSkipsTheExecPlugin(t *testing.T) {
	srv := newVersionServer(t)
	kc := writeKubeconfigText(t, fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: s, cluster: {server: %q, certificate-authority-data: %s}}]
users: [{name: u, user: {exec: {apiVersion: client.authentication.k8s.io/v1, command: no-such-auth-plugin-installed, interactiveMode: Never}}}]
contexts: [{name: ctx, context: {cluster: s, user: u}}]
current-context: ctx
`, srv.URL, srv.caData()))
	cfg, err := LoadConfig(Options{Kubeconfig: []string{kc}, Token: "ci-token"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Connect(context.Background(), ClusterRef{Name: "c1"}); err != nil {
		t.Fatalf("with --token: %v", err)
	}
	if got := srv.last(t).Get("Authorization"); got != "Bearer ci-token" {
		t.Errorf("Authorization %q", got)
	}
	cfg, err = LoadConfig(Options{Kubeconfig: []string{kc}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Connect(context.Background(), ClusterRef{Name: "c1"}); err == nil || !strings.Contains(err.Error(), "no-such-auth-plugin-installed") {
		t.Errorf("without --token the missing plugin is named: %v", err)
	}
}
