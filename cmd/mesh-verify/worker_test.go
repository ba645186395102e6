package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// --workers sets attack.workers before validation: out of range is invalid
// input, --connect-to (this process's dials) does not go with it, and a
// cluster the workers cannot be created in is a setup error before
// anything is sent. The target is a real listener that must see no
// request: the coordinator never dials it.
func TestRunWorkersFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	emptyKubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(emptyKubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "s.yaml")
	src := `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: w}
clusters: [{name: c1, context: kind-c1}]
target: {url: "http://` + ln.Addr().String() + `/"}
attack: {rate: 10/s, requests: 20}
attribution: {preset: tutorial}
expect:
  - successRate: {atLeast: 99%}
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"run", file, "--workers", "2", "--connect-to", "a:1:b:2"}, exitcode.InvalidInput, "--connect-to redirects this process's connections, but with attack.workers 2"},
		{[]string{"run", file, "--workers", "1001"}, exitcode.InvalidInput, "--workers 1001: want 0 (attack from this process) to 1000"},
		{[]string{"run", file, "--workers", "-1"}, exitcode.InvalidInput, "--workers -1"},
		// The workers' cluster must be reached before anything is created.
		{[]string{"run", file, "--set", "attack.workers=3", "--kubeconfig", emptyKubeconfig}, exitcode.Setup, "cluster c1: context kind-c1 not found in kubeconfig"},
		{[]string{"run", file, "--workers", "2", "--set", "attack.rate=1/s"}, exitcode.InvalidInput, "attack.rate: 1 is less than attack.workers (2)"},
		{[]string{"validate", file, "--set", "attack.workers=2"}, exitcode.Pass, "ok"},
		{[]string{"worker"}, exitcode.InvalidInput, `required flag(s) "configmap" not set`},
		{[]string{"worker", "--configmap", "cm", "--sidecar", "linkerd"}, exitcode.InvalidInput, `--sidecar "linkerd": want istio, kuma or none`},
		{[]string{"validate", file, "--set", "attack.workers=2", "--set", "attack.pod.sidecar=linkerd"}, exitcode.InvalidInput, `attack.pod.sidecar: unknown sidecar "linkerd"`},
		{[]string{"validate", file, "--set", "attack.workers=2", "--set", "attack.pod.labels.team=load"}, exitcode.Pass, "ok"},
	} {
		args := c.args
		if args[0] == "run" {
			args = append(args, "--out", dir, "--quiet")
		}
		var stdout, stderr bytes.Buffer
		code := execute(args, &stdout, &stderr)
		if code != c.code || !strings.Contains(stdout.String()+stderr.String(), c.msg) {
			t.Errorf("%v: exit %d, %q %q; want %d, %q", c.args, code, stdout.String(), stderr.String(), c.code, c.msg)
		}
	}
	// Nothing was attacked: not even the preflight dialled the target.
	_ = ln.(*net.TCPListener).SetDeadline(time.Now().Add(100 * time.Millisecond))
	if conn, err := ln.Accept(); err == nil {
		conn.Close()
		t.Error("a refused distributed run connected to the target")
	}
}
