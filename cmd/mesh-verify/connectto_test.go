package main

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/exitcode"
)

// `run --connect-to` and $MESH_VERIFY_CONNECT_TO take a target by a name
// nothing resolves (a Service name, as in a lab Job pod) to a real server,
// and both feed the same option; a bad entry is invalid input naming it.
// One connection per request (keepAlive: false): every dial goes through
// the connect-to entry, and the 20 requests are 20 independent draws, so
// the verdict does not hang on how many connections a busy machine's
// timing opened (7 uneven ones left it INCONCLUSIVE once).
func TestRunConnectTo(t *testing.T) {
	var hits atomic.Int64
	var hosts atomic.Value
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		hosts.Store(r.Host)
		w.Write([]byte("I'm callme-service v1"))
	}))
	t.Cleanup(ts.Close)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	dir := t.TempDir()
	sc := writeFile(t, dir, "s.yaml", `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: connect-to}
clusters: [{name: c1}]
target: {url: "http://callme-service.demo.svc.cluster.local:8080/"}
attack: {rate: 100/s, requests: 20, keepAlive: false}
attribution: {preset: tutorial}
expect: [{successRate: {atLeast: 50%}}]
`)
	entry := fmt.Sprintf("callme-service.demo.svc.cluster.local:8080:127.0.0.1:%d", port)
	for i, c := range []struct {
		name   string
		flags  []string
		env    string
		code   int
		stderr string
	}{
		{"flag", []string{"--connect-to", "other:1:127.0.0.1:1", "--connect-to", entry}, "", exitcode.Pass, ""},
		{"environment", nil, "unused:80:127.0.0.1:1," + entry, exitcode.Pass, ""},
		{"bad flag entry", []string{"--connect-to", "callme:8080:127.0.0.1"}, "", exitcode.InvalidInput,
			`--connect-to or $MESH_VERIFY_CONNECT_TO: connect-to entry 1 "callme:8080:127.0.0.1": want HOST:PORT:CONNECT_HOST:CONNECT_PORT (too few fields)`},
		{"bad environment entry", []string{"--connect-to", entry}, "x:99999:y:1", exitcode.InvalidInput,
			`connect-to entry 2 "x:99999:y:1": PORT: "99999" is not a port number`},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(attack.ConnectToEnv, c.env)
			before := hits.Load()
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", sc, "--out", filepath.Join(dir, fmt.Sprint(i)), "-q"}, c.flags...)
			code := execute(args, &stdout, &stderr)
			if code != c.code {
				t.Fatalf("exit %d, want %d\n%s\n%s", code, c.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stderr.String(), c.stderr) {
				t.Errorf("stderr %q does not contain %q", stderr.String(), c.stderr)
			}
			got := hits.Load() - before
			if c.code == exitcode.Pass && (got != 20 || hosts.Load() != "callme-service.demo.svc.cluster.local:8080") {
				t.Errorf("the server got %d requests (last Host %v), want 20 for the Service's name", got, hosts.Load())
			}
			if c.code != exitcode.Pass && got != 0 {
				t.Errorf("an invalid run sent %d requests", got)
			}
		})
	}
}
