package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// --workers sets attack.workers before validation: out of range is invalid
// input, and a distributed run is refused, not faked, until the
// coordinator exists. The target is a real listener that must see no
// request.
func TestRunWorkersFlag(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
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
		{[]string{"run", file, "--workers", "2"}, exitInvalidInput, "distributed runs: not yet supported (attack.workers 2)"},
		{[]string{"run", file, "--workers", "1001"}, exitInvalidInput, "--workers 1001: want 0 (attack from this process) to 1000"},
		{[]string{"run", file, "--workers", "-1"}, exitInvalidInput, "--workers -1"},
		{[]string{"run", file, "--set", "attack.workers=3"}, exitInvalidInput, "distributed runs: not yet supported (attack.workers 3)"},
		{[]string{"run", file, "--workers", "2", "--set", "attack.rate=1/s"}, exitInvalidInput, "attack.rate: 1 is less than attack.workers (2)"},
		{[]string{"validate", file, "--set", "attack.workers=2"}, exitPass, "ok"},
		{[]string{"worker"}, exitInvalidInput, `required flag(s) "configmap" not set`},
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
