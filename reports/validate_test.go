package reports_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/internal/schematest"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// realReport runs a scenario against a local server that answers from two
// "clusters" at random, with expectations of every kind that needs no
// Kubernetes, and returns its report.json.
func realReport(t *testing.T) []byte {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := []string{"c1", "c2"}[rand.IntN(2)]
		fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", c, c)
	}))
	defer ts.Close()
	sc, err := scenarios.Parse("schema.yaml", []byte(fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: schema}
clusters: [{name: c1}, {name: c2}]
target: {url: %q}
attack: {concurrency: 4, repetitions: 100}
attribution:
  rules: [{body: '(?P<version>v\d) \(pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
statistics: {stop: early, looks: 2}
expect:
  - split: {model: equal}
  - reached: {buckets: [c1, c2]}
  - never: {by: version, buckets: [v2]}
  - successRate: {atLeast: 99%%}
  - latency: {percentile: 99, below: 1s}
`, ts.URL)))
	if err != nil {
		t.Fatalf("scenario: %v", err)
	}
	rep, err := runner.Run(context.Background(), sc, runner.Options{
		Tool: reports.Tool{Name: "mesh-verify", Version: "test"}, Command: []string{"mesh-verify", "run", "schema.yaml"}})
	if rep == nil {
		t.Fatalf("run: no report: %v", err)
	}
	var b bytes.Buffer
	if err := reports.WriteJSON(&b, rep); err != nil {
		t.Fatalf("write report: %v", err)
	}
	return b.Bytes()
}

// A report of a real run matches report.schema.json; the same report
// broken by hand does not.
func TestRunReportAgainstSchema(t *testing.T) {
	s, err := schematest.Compile("report.schema.json", reports.JSONSchema())
	if err != nil {
		t.Fatal(err)
	}
	real := realReport(t)
	if err := schematest.Validate(s, real); err != nil {
		t.Fatalf("the report of a real run does not match report.schema.json: %v\n%s", err, real)
	}
	for _, c := range []struct {
		name string
		at   string // the JSON pointer the validator must name
		edit func(r map[string]any)
	}{
		{"verdict MAYBE", "/verdict", func(r map[string]any) { r["verdict"] = "MAYBE" }},
		{"an expectation's verdict MAYBE", "/expectations/0/verdict", func(r map[string]any) {
			r["expectations"].([]any)[0].(map[string]any)["verdict"] = "MAYBE"
		}},
		{"runId missing", "", func(r map[string]any) { delete(r, "runId") }},
		{"a split without its buckets", "/expectations/0/split", func(r map[string]any) {
			delete(r["expectations"].([]any)[0].(map[string]any)["split"].(map[string]any), "buckets")
		}},
		{"a string for metrics.requests", "/metrics/requests", func(r map[string]any) {
			r["metrics"].(map[string]any)["requests"] = "400"
		}},
		{"a latency written as text", "/metrics/latency/p99", func(r map[string]any) {
			r["metrics"].(map[string]any)["latency"].(map[string]any)["p99"] = "1.5ms"
		}},
		{"attack.started not a time", "/attack/started", func(r map[string]any) {
			r["attack"].(map[string]any)["started"] = "yesterday"
		}},
		{"another format version", "/schema", func(r map[string]any) { r["schema"] = "mesh-verify.io/report/v2" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			var r map[string]any
			if err := json.Unmarshal(real, &r); err != nil {
				t.Fatalf("read the report: %v", err)
			}
			c.edit(r)
			broken, err := json.Marshal(r)
			if err != nil {
				t.Fatalf("write the broken report: %v", err)
			}
			err = schematest.Validate(s, broken)
			if err == nil {
				t.Fatalf("report.schema.json accepts a report with %s", c.name)
			}
			if !strings.Contains(err.Error(), "'"+c.at+"'") {
				t.Errorf("the validator rejects a report with %s but does not point at %q: %v", c.name, c.at, err)
			}
		})
	}
}
