package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// retryScenario calls the tutorial's random-error endpoint through the
// caller, whose sidecar retries callme's 504s by the patched
// VirtualService, and counts callme v1's requests from its istio-proxy
// log, which has a line per attempt.
const retryScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: istio-retries}
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: default, resource: svc/caller-service, port: "8080"}
  path: /caller/ping-with-random-error
attack:
  concurrency: 2
  repetitions: 100
attribution:
  preset: tutorial
observe:
  - name: callme-v1
    selector: app=callme-service,version=v1
    clusters: [c1]
    logs:
      preset: istio-proxy
expect:
  - successRate:
      atLeast: 50%
`

// TestRetriesLogEveryAttempt adds retries to istio-mirror's VirtualService
// (kubectl patch: 3 attempts on gateway errors) and calls callme's
// random-error endpoint, which answers 504 to about half the requests:
// the caller's sidecar retries them, callme v1's istio-proxy logs each
// attempt with the same x-request-id, and the sidecar-log reconciliation
// counts each request once, reporting exactly the attempts the data plane
// sent again (status.json) as attempt lines.
func TestRetriesLogEveryAttempt(t *testing.T) {
	t.Parallel()
	l := mv.Lab(t, e2etest.LabSpec{Topology: "istio-mirror"})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	patched := time.Now()
	e2etest.Kubectl(t, l, "c1", "patch", "virtualservice", "callme-service-route", "--type", "json", "-p",
		`[{"op":"add","path":"/spec/http/0/retries","value":{"attempts":3,"retryOn":"gateway-error"}}]`)
	took := waitPolicy(t, l, "retries 3 on 502,503,504", patched)
	t.Logf("the sidecar retries by the patched VirtualService %v after the patch", took.Round(time.Millisecond))

	retries := func() int64 {
		st, err := daemon.ReadStatus(l.Dir)
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for _, p := range st.Pods {
			if p.Routed != nil {
				n += p.Routed.Retries
			}
		}
		return n
	}
	before := retries()
	rep, out := runInlineScenario(t, ctx, l, retryScenario)
	sentAgain := retries() - before
	if sentAgain == 0 {
		t.Fatalf("the data plane retried nothing (status.json routed.retries)\n%s", out)
	}
	rc := logsReconciliation(t, rep, out)
	t.Logf("logs: counted %v of %d answered + %d failed; %d retried requests, %d attempt lines; data plane sent %d again; status %s",
		rc.Counted, rc.Answered, rc.Failed, rc.Retried, rc.Attempts, sentAgain, rc.Status)
	if rc.Retried == 0 || rc.Attempts != sentAgain {
		t.Errorf("reconciliation: %d retried requests, %d attempt lines; the data plane sent %d attempts again", rc.Retried, rc.Attempts, sentAgain)
	}
	if rc.Status != "ok" {
		t.Errorf("reconciliation %s: %s", rc.Status, rc.Reason)
	}

	// The log itself: some x-request-id on several lines of callme v1's
	// istio-proxy, one per attempt.
	ids := map[string]int{}
	for _, line := range sidecarLines(t, l, "callme-service-v1", "inbound|") {
		if f := strings.Split(line, `" "`); len(f) > 3 {
			ids[f[len(f)-3]]++ // …"user agent" "request id" "authority" "upstream"…
		}
	}
	var repeated int64
	for _, n := range ids {
		if n > 1 {
			repeated += int64(n - 1)
		}
	}
	if repeated != sentAgain {
		t.Errorf("callme v1's istio-proxy log repeats request ids %d times, the data plane sent %d attempts again", repeated, sentAgain)
	}
}
