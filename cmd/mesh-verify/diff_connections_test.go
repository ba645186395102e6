package main

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// Issue 23: 100% c1 then 100% c2 under a declared balancing: request.
// report diff must agree with the two runs' own verdicts, whatever the
// connections: over one keep-alive connection both runs are INCONCLUSIVE
// (one draw each, docs/statistics.md §3.2–3.3) and the diff is untestable
// for that expectation, not "nothing could be compared"; with a connection
// per request run A PASSes, run B FAILs and the diff is a change, exit 1.
func TestReportDiffAgreesWithTheRuns(t *testing.T) {
	only := func(cluster string) string {
		ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "I'm callme-service v1 (pod callme-%s-0 in %s)", cluster, cluster)
		}))
		t.Cleanup(ts.Close)
		return ts.URL
	}
	c1, c2 := only("c1"), only("c2")
	expect := "  - split: {by: cluster, weights: {c1: 100, c2: 0}}\nstatistics: {balancing: request}"
	for _, tc := range []struct {
		name, attack     string
		wantA, wantB     int
		wantDiff         int
		wantOut, notWant []string
	}{
		{"one keep-alive connection", "  concurrency: 1\n  repetitions: 200", exitcode.Inconclusive, exitcode.Inconclusive, exitcode.Inconclusive,
			[]string{"RESULT: UNTESTABLE: too few independent draws", "split by cluster (weights) │ INCONCLUSIVE │ INCONCLUSIVE", "worth 1 and 1 independent draws"},
			[]string{"nothing could be compared", "no change within the margins"}},
		{"a connection per request", "  concurrency: 1\n  repetitions: 200\n  keepAlive: false", exitcode.Pass, exitcode.Fail, exitcode.Fail,
			[]string{"RESULT: CHANGED", "regression: split by cluster (weights) has a worse verdict in run B", "split by cluster (weights) │ PASS │ FAIL"},
			[]string{"UNTESTABLE", "no change within the margins"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			a := runScenarioWith(t, c1, filepath.Join(base, "a"), tc.attack, expect)
			b := runScenarioWith(t, c2, filepath.Join(base, "b"), tc.attack, expect)
			if got := rep0(t, a); got != tc.wantA {
				t.Errorf("run A's own verdict: exit %d, want %d", got, tc.wantA)
			}
			if got := rep0(t, b); got != tc.wantB {
				t.Errorf("run B's own verdict: exit %d, want %d", got, tc.wantB)
			}
			var out, errb bytes.Buffer
			code := execute([]string{"report", "diff", a, b}, &out, &errb)
			// The table's cells are padded: compare with runs of spaces folded.
			text := strings.Join(strings.Fields(out.String()), " ")
			if code != tc.wantDiff {
				t.Errorf("report diff: exit %d, want %d\n%s%s", code, tc.wantDiff, out.String(), errb.String())
			}
			for _, w := range tc.wantOut {
				if !strings.Contains(text, w) {
					t.Errorf("report diff lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(text, w) {
					t.Errorf("report diff says %q:\n%s", w, out.String())
				}
			}
		})
	}
}
