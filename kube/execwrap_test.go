package kube

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// client-go starts this test binary as the exec plugin wrapper
// (Options.ExecWrapper below): it answers as mesh-verify's main does.
func TestMain(m *testing.M) {
	if IsExecWrapperCall(os.Args) {
		os.Exit(RunExecWrapper(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// A credential that expires mid-run is refreshed by client-go, which runs
// the plugin inside a request with no timeout. Here the plugin (a real
// shell script) answers the preflight and client-go's first run with a
// token that expires in two seconds, then hangs: through the wrapper the
// request that needed the refresh fails within --exec-timeout and the
// plugin is gone; without it (ExecWrapper empty) the request would hang
// for as long as the plugin does.
func TestExecPluginRefreshIsBounded(t *testing.T) {
	srv := newVersionServer(t)
	dir := t.TempDir()
	pids, runs := filepath.Join(dir, "pids"), filepath.Join(dir, "runs")
	t.Cleanup(func() { killPids(t, pids) })
	plugin := filepath.Join(dir, "plugin.sh")
	script := fmt.Sprintf(`#!/bin/sh
echo run >> %[1]s
if [ "$(wc -l < %[1]s)" -le 2 ]; then
  exp=$(date -u -d '+2 seconds' +%%Y-%%m-%%dT%%H:%%M:%%SZ)
  echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"plugin-secret-token","expirationTimestamp":"'$exp'"}}'
  exit 0
fi
echo $$ >> %[2]s
exec sleep 60
`, runs, pids)
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	kc := pluginKubeconfig(t, srv, plugin)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	const timeout = 2 * time.Second
	cfg, err := LoadConfig(Options{Kubeconfig: []string{kc}, ExecTimeout: timeout, ProbeTimeout: 5 * time.Second, ExecWrapper: self})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cfg.Connect(context.Background(), ClusterRef{Name: "c1", Context: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if got := srv.last(t).Get("Authorization"); got != "Bearer plugin-secret-token" {
		t.Fatalf("Authorization %q", got)
	}
	time.Sleep(3 * time.Second) // the token expires

	done := make(chan error, 1)
	start := time.Now()
	go func() {
		_, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/version").Do(context.Background()).Raw()
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(timeout + 20*time.Second):
		t.Fatalf("the request that refreshes the credential still waits after %s", time.Since(start))
	}
	if err == nil {
		t.Fatal("the request succeeded without a credential")
	}
	if took := time.Since(start); took > timeout+3*time.Second {
		t.Errorf("the refresh took %s with --exec-timeout %s", took, timeout)
	}
	if strings.Contains(err.Error(), "plugin-secret-token") {
		t.Errorf("the error shows the credential: %v", err)
	}
	for deadline := time.Now().Add(5 * time.Second); len(alivePids(pids)) > 0; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("plugin processes %v outlived the refresh", alivePids(pids))
		}
	}
	if b, _ := os.ReadFile(runs); strings.Count(string(b), "run") != 3 {
		t.Errorf("the plugin ran %d times, want 3 (preflight, client-go, refresh)", strings.Count(string(b), "run"))
	}
}
