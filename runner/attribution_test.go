package runner

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// server answers every request with answer(n) for the n-th request, on a
// real HTTP server on loopback.
func server(t *testing.T, answer func(n int64, w http.ResponseWriter)) *httptest.Server {
	var n atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answer(n.Add(1), w) }))
	t.Cleanup(ts.Close)
	return ts
}

func parse(t *testing.T, src string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func run(t *testing.T, sc *scenarios.Scenario) *reports.Report {
	t.Helper()
	rep, err := Run(context.Background(), sc, Options{})
	if rep == nil {
		t.Fatalf("no report: %v", err)
	}
	return rep
}

func body(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "attribution", "testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// attack.successCodes decides what a success is: a redirect is not one by
// default; failures are attributed to the cluster that produced them.
func TestSuccessCodesAndFailuresPerCluster(t *testing.T) {
	ts := server(t, func(n int64, w http.ResponseWriter) {
		c := fmt.Sprintf("c%d", 1+n%2)
		switch {
		case n%10 == 0: // every tenth: c1 fails
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintf(w, "pod callme-%s-0 in %s is draining", c, c)
		case n%10 == 5: // c2 redirects
			w.Header().Set("Location", "/elsewhere")
			w.WriteHeader(http.StatusMovedPermanently)
			fmt.Fprintf(w, "pod callme-%s-0 in %s moved", c, c)
		default:
			fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
		}
	})
	src := func(codes string) string {
		return fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters: [{name: c1}, {name: c2}]
target: {url: %q}
attack: {rate: 500/s, requests: 400%s}
attribution:
  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
expect:
  - successRate: {atLeast: 99%%}
`, ts.URL, codes)
	}
	rep := run(t, parse(t, src("")))
	if rep.Metrics.Successes != 320 || rep.Metrics.StatusCodes["301"] != 40 || rep.Expectation[0].Verdict != assert.Fail {
		t.Errorf("default 2xx: %d successes, codes %v, %s; want 320, the 301s failures, FAIL", rep.Metrics.Successes, rep.Metrics.StatusCodes, rep.Expectation[0].Verdict)
	}
	errs := map[string]int64{}
	for _, d := range rep.Dimensions {
		if d.Name == "cluster" && d.Source == "body" {
			for _, b := range d.Buckets {
				errs[b.Name] = b.Errors
			}
		}
	}
	if errs["c1"] != 40 || errs["c2"] != 40 {
		t.Errorf("errors per cluster %v, want the 503s in c1 and the 301s in c2", errs)
	}
	rep = run(t, parse(t, src(", successCodes: [2xx, 301]")))
	if rep.Metrics.Successes != 360 {
		t.Errorf("2xx and 301: %d successes, want 360", rep.Metrics.Successes)
	}
}

// A rule that matches nothing, a field captured empty, clusters named
// otherwise than the scenario: configuration errors, exit 4 with samples,
// never "send more requests". (A connection per request: with every
// request in c1 over a few keep-alive connections, a PASS of `only` would
// need more connections, docs/statistics.md §3.3.)
func TestConfigurationErrorsFromTheResponses(t *testing.T) {
	serve := func(b string) string {
		return server(t, func(_ int64, w http.ResponseWriter) { fmt.Fprint(w, b) }).URL
	}
	scenario := func(url, attribution, expect string) *scenarios.Scenario {
		return parse(t, fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters: [{name: c1}, {name: c2}]
target: {url: %q}
attack: {rate: 500/s, requests: 200, keepAlive: false}
attribution:
%s
expect:
%s
`, url, attribution, expect))
	}
	cases := []struct {
		name         string
		sc           *scenarios.Scenario
		wantExit     int
		wantSubject  string
		wantMessage  string
		wantSample   string
		wantVerdicts []assert.Verdict
	}{
		{"the real callme answers, the rule expects a pod", scenario(serve(body(t, "callme-ping.txt")), `  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]`,
			"  - split: {}\n  - latency: {below: 10s}"),
			exitcode.InvalidInput, "attribution", "no rule (attribution.rules[0]) matched any of the 200 answered responses", "I'm callme-service v1",
			[]assert.Verdict{assert.Inconclusive, assert.Pass}},
		{"Istio's echo without --cluster (1.18)", scenario(serve(body(t, "istio-echo-1.18-empty-cluster.txt")), "  preset: istio-echo",
			"  - reached: {}"),
			exitcode.InvalidInput, "attribution: empty cluster", "rule preset istio-echo (Cluster=) captured an empty cluster in 200 of 200 answered responses: the app does not know its cluster", "Cluster=\n",
			[]assert.Verdict{assert.Inconclusive}},
		{"rebel-base names Cluster-1", scenario(serve(body(t, "rebel-base-cluster1.json")), "  preset: cilium-rebel-base",
			"  - only: {buckets: [c1]}"),
			exitcode.InvalidInput, "attribution: cluster names", "{from: cluster, to: cluster, values: {Cluster-1: c1}}", "",
			[]assert.Verdict{assert.Inconclusive}},
		{"rebel-base renamed", scenario(serve(body(t, "rebel-base-cluster1.json")), "  preset: cilium-rebel-base\n  map: [{from: cluster, to: cluster, values: {Cluster-1: c1, Cluster-2: c2}}]",
			"  - only: {buckets: [c1]}"),
			exitcode.Pass, "", "", "", []assert.Verdict{assert.Pass}},
		// The version is empty but nothing groups by it: not an error.
		{"empty field nobody needs", scenario(serve("pod callme-c1-0 in c1 version="), `  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d) version=(?P<version>\S*)'}]`,
			"  - only: {buckets: [c1]}"),
			exitcode.Pass, "", "", "", []assert.Verdict{assert.Pass}},
		{"a pod but no cluster, no inventory", scenario(serve(body(t, "helloworld.txt")), "  preset: istio-helloworld",
			"  - reached: {}"),
			exitcode.InvalidInput, "attribution: no cluster", "observe the workload (observe[]) so that the inventory maps each pod to its cluster", "",
			[]assert.Verdict{assert.Inconclusive}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rep := run(t, c.sc)
			if rep.ExitCode != c.wantExit {
				t.Errorf("exit %d, want %d: %+v", rep.ExitCode, c.wantExit, rep.ConfigErrors)
			}
			for i, want := range c.wantVerdicts {
				e := rep.Expectation[i]
				if e.Verdict != want || (want == assert.Inconclusive && (e.RequiredN != 0 || !strings.Contains(e.Reason, "configuration error"))) {
					t.Errorf("expectation %s: %s %q (required n %d), want %s", e.Name, e.Verdict, e.Reason, e.RequiredN, want)
				}
			}
			if c.wantSubject == "" {
				if len(rep.ConfigErrors) > 0 {
					t.Errorf("configuration errors %+v", rep.ConfigErrors)
				}
				return
			}
			if len(rep.ConfigErrors) != 1 {
				t.Fatalf("configuration errors %+v, want one", rep.ConfigErrors)
			}
			ce := rep.ConfigErrors[0]
			if ce.Subject != c.wantSubject || !strings.Contains(ce.Message, c.wantMessage) {
				t.Errorf("got %s: %s\nwant %s: …%s…", ce.Subject, ce.Message, c.wantSubject, c.wantMessage)
			}
			if c.wantSample != "" && (len(ce.Samples) == 0 || !strings.Contains(ce.Samples[0], c.wantSample)) {
				t.Errorf("samples %q, want one with %q", ce.Samples, c.wantSample)
			}
		})
	}
}
