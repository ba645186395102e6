package runner

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// A real HTTP server that balances per request at random between two
// clusters, 50/50 — an honest mesh for the runner's own wiring tests.
func coinServer(t *testing.T, p1 float64) (*httptest.Server, *atomic.Int64) {
	var hits atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		c := "c2"
		if rand.Float64() < p1 {
			c = "c1"
		}
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
	}))
	t.Cleanup(ts.Close)
	return ts, &hits
}

func load(t *testing.T, url, attack, stats, expect string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters: [{name: c1}, {name: c2}]
target: {url: %q}
attack:
%s
attribution:
  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
statistics:
%s
expect:
%s
`, url, attack, stats, expect)))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

func TestEarlyStopSettlesBeforeThePlannedEnd(t *testing.T) {
	cases := []struct {
		name    string
		p1      float64
		verdict assert.Verdict
	}{
		{"correct split stops early with PASS", 0.5, assert.Pass},
		{"wrong split stops early with FAIL", 0.8, assert.Fail},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ts, hits := coinServer(t, tc.p1)
			sc := load(t, ts.URL, "  concurrency: 8\n  requests: 40000\n  keepAlive: false",
				"  stop: early\n  looks: 8", "  - split: {model: equal}")
			rep, err := Run(context.Background(), sc, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if rep.Verdict != tc.verdict {
				t.Fatalf("verdict %s, want %s: %s", rep.Verdict, tc.verdict, rep.Expectation[0].Reason)
			}
			if rep.Sequential == nil || rep.Sequential.StoppedAt == 0 || rep.Sequential.StoppedAt >= 8 {
				t.Fatalf("did not stop early: %+v", rep.Sequential)
			}
			look := rep.Sequential.Plan.Looks[rep.Sequential.StoppedAt-1]
			if rep.Metrics.Requests < look || rep.Metrics.Requests >= 40000 {
				t.Errorf("%d requests for a stop at look %d (%d)", rep.Metrics.Requests, rep.Sequential.StoppedAt, look)
			}
			if rep.Metrics.Requests != hits.Load() {
				t.Errorf("report %d requests, server %d", rep.Metrics.Requests, hits.Load())
			}
		})
	}
}

func TestSuccessRateUsesTheClusterDesignEffect(t *testing.T) {
	ts, _ := coinServer(t, 0.5)
	sc := load(t, ts.URL, "  concurrency: 4\n  repetitions: 250", "  confidence: 0.95", "  - successRate: {atLeast: 99%}")
	rep, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// 1000 successes over 4 keep-alive connections whose requests spread
	// evenly over both clusters: independent enough to show >= 99%.
	if rep.Verdict != assert.Pass {
		t.Fatalf("verdict %s: %s", rep.Verdict, rep.Expectation[0].Reason)
	}
}
