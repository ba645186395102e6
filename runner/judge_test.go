package runner

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

const head = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
target: {url: "http://127.0.0.1:1/"}
attribution: {preset: tutorial}
`

// The connections an attack holds decide whether advice is in
// connections.
func TestAttackConnections(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		attack string
		want   int64
	}{
		{"{concurrency: 4, repetitions: 10}", 4},
		{"{concurrency: 4, repetitions: 10, keepAlive: false}", 0},
		{"{rate: 10/s, duration: 1s}", 10},
		{"{rate: 10/s, duration: 1s, connections: 3}", 3},
		{"{rate: 10/s, duration: 1s, maxConnections: 2}", 2},
		{"{concurrency: 8, repetitions: 10, maxConnections: 5}", 5},
		{"{rate: 10/s, duration: 1s, concurrency: 20}", 20},
		{"{concurrency: 8, repetitions: 10, connections: 3}", 3},
	} {
		sc := parse(t, head+"clusters: [{name: c1}, {name: c2}]\nattack: "+c.attack+"\nexpect: [{successRate: {atLeast: 99%}}]\n")
		if got := AttackConnections(sc); got != c.want {
			t.Errorf("%s: %d connections, want %d", c.attack, got, c.want)
		}
		// The judge's sampling unit draws on the same connections.
		if j := NewJudge(sc); j.Sampling(j.Expectations()[0]).FixedConnections != c.want {
			t.Errorf("%s: the judge's sampling is over %d connections, want %d", c.attack, j.Sampling(j.Expectations()[0]).FixedConnections, c.want)
		}
	}
}

// A mirror target whose log could not be read at all has unknown copies,
// not none: INCONCLUSIVE with the read error, never a 0% that FAILs (the
// demo met it when a two-container pod's log was asked for without a
// container).
func TestMirrorOfAnUnreadLogIsNotZero(t *testing.T) {
	sc := parse(t, head+`clusters: [{name: c1, context: k1}]
attack: {rate: 10/s, duration: 1s}
observe: [{name: m, selector: app=m, logs: {preset: spring-callme}}]
expect: [{mirror: {to: m, percent: 50%, shadow: false}}]
`)
	j := newJudge(sc, measure.AttackConfig(sc, "", ""))
	r := j.evaluate(evidence{logs: &tally.Snapshot{}, logInfo: &logEvidence{unread: map[string]string{"m": "the log of pod c1/default/m-0 could not be read: a container name must be specified"}}}, -1)[0]
	if r.Verdict != assert.Inconclusive || !strings.Contains(r.Reason, "could not be read") {
		t.Errorf("%v: %s", r.Verdict, r.Reason)
	}
}

// The report's pod buckets of a tally that saw web-0 in c1 and in c2:
// two buckets, named cluster/pod, each with its cluster and its errors,
// and labelled without the cluster twice.
func TestReportPodBucketsPerCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	tl := tally.New(start, time.Minute)
	add := func(cluster string, code uint16, errMsg string) {
		tl.Add(&attack.Result{Result: &vegeta.Result{Code: code, Error: errMsg, Timestamp: start}},
			attribution.Identity{Cluster: cluster, Pod: "web-0"})
	}
	add("c1", 200, "")
	add("c2", 200, "")
	add("c2", 200, "")
	add("c2", 503, "503 Service Unavailable")
	var pods *reports.Dimension
	for _, d := range dimensions(scenarios.SourceBody, tl.Snapshot()) {
		if d.Name == "pod" {
			pods = &d
		}
	}
	if pods == nil {
		t.Fatal("no pod dimension")
	}
	got := map[string]string{}
	for _, b := range pods.Buckets {
		got[reports.BucketLabel(b)] = fmt.Sprintf("%s %d %d", b.Cluster, b.Count, b.Errors)
	}
	if want := map[string]string{"c1/web-0": "c1 1 0", "c2/web-0": "c2 2 1"}; !maps.Equal(got, want) {
		t.Errorf("pod buckets %v, want %v", got, want)
	}
}
