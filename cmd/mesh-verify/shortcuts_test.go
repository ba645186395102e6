package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
)

// TestAttackShortcuts: --rate, --duration and --requests set the attack's
// bounds as --set would (the run sends exactly --requests requests, and
// the recorded scenario says so), win over a --set of the same field, and
// a bad value is --set's clear error (issue 26).
func TestAttackShortcuts(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		fmt.Fprint(w, "I'm callme-service v1")
	}))
	defer srv.Close()
	dir := t.TempDir()
	sc := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(sc, []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: shortcuts}
clusters: [{name: c1}]
target: {url: "`+srv.URL+`/"}
attack: {rate: 10/s, duration: 1m}
attribution:
  preset: tutorial
  map: [{from: version, to: cluster, values: {v1: c1}}]
expect: [{reached: {buckets: [c1]}}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "runs")
	var stdout, stderr bytes.Buffer
	code := execute([]string{"run", sc, "--out", out, "-q", "--set", "attack.requests=3", "--rate", "200/s", "--duration", "20s", "--requests", "37"}, &stdout, &stderr)
	if code != exitcode.Pass {
		t.Fatalf("run: exit %d\n%s", code, stderr.String())
	}
	runs, err := os.ReadDir(out)
	if err != nil || len(runs) != 1 {
		t.Fatalf("run directories %v (%v)", runs, err)
	}
	rep, err := reports.ReadJSON(filepath.Join(out, runs[0].Name(), "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Metrics.Requests != 37 || hits.Load() != 37 {
		t.Errorf("--requests 37 after --set attack.requests=3: report %d requests, server %d", rep.Metrics.Requests, hits.Load())
	}
	// The scenario file is recorded as given; the overrides are in the
	// command report.json records.
	if !strings.Contains(strings.Join(rep.Command, " "), "--rate 200/s") {
		t.Errorf("report.json command %q lacks --rate", rep.Command)
	}

	stderr.Reset()
	code = execute([]string{"run", sc, "--out", out, "-q", "--rate", "fast"}, &stdout, &stderr)
	if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), "attack.rate") {
		t.Errorf("--rate fast: exit %d, want %d naming attack.rate:\n%s", code, exitcode.InvalidInput, stderr.String())
	}
}
