package judge

import (
	"maps"
	"math"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

func parse(t *testing.T, src string) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("test.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// fakeEvidence has every source read and nothing wrong with it, and a
// mirror's counts as given.
type fakeEvidence struct {
	counts tally.Snapshot
	mirror MirrorCount
}

func (f fakeEvidence) Counts(string) (tally.Snapshot, bool)             { return f.counts, true }
func (f fakeEvidence) FromSource(string) (tally.Snapshot, bool)         { return tally.Snapshot{}, false }
func (f fakeEvidence) ReadyPods() map[string][]string                   { return nil }
func (f fakeEvidence) Unusable(string, bool) string                     { return "" }
func (f fakeEvidence) MirrorCounts(*scenarios.MirrorExpect) MirrorCount { return f.mirror }

// By pod, a per-pod model spreads each cluster's share over the ready pods
// the inventory names: Skupper scenario 2 (costs 1/1, pods 1/2) expects the
// c2 pod at 50% and each c3 pod at 25% — worked out by hand from the
// balanced model's 50/50 cluster split.
func TestModelByPodFromInventory(t *testing.T) {
	t.Parallel()
	sc, err := scenarios.Parse("t.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters:
  - {name: c1, context: kind-c1, cost: 0}
  - {name: c2, context: kind-c2, cost: 1}
  - {name: c3, context: kind-c3, cost: 1}
target:
  portForward: {cluster: c1, namespace: demo, resource: svc/entry, port: "8080"}
attack: {concurrency: 6, repetitions: 10, keepAlive: false}
observe:
  - {name: app, namespace: demo, selector: app=x, clusters: [c2, c3], logs: {match: 'id=(?P<request_id>\S+)'}}
expect:
  - split: {by: pod, model: link-cost-balanced, buckets: [c2, c3]}
  - split: {by: pod, model: equal-per-pod, buckets: [c2, c3]}
  - split: {by: pod, model: equal}
`))
	if err != nil {
		t.Fatal(err)
	}
	ready := map[string][]string{"c2": {"app-c2-a"}, "c3": {"app-c3-a", "app-c3-b"}}
	j := New(sc, Attack{Connections: 6})
	// The model names each pod as the observed buckets do: cluster/pod.
	cases := []map[string]float64{
		{"c2/app-c2-a": 0.5, "c3/app-c3-a": 0.25, "c3/app-c3-b": 0.25},
		{"c2/app-c2-a": 1.0 / 3, "c3/app-c3-a": 1.0 / 3, "c3/app-c3-b": 1.0 / 3},
		{"c2/app-c2-a": 1.0 / 3, "c3/app-c3-a": 1.0 / 3, "c3/app-c3-b": 1.0 / 3},
	}
	for i, want := range cases {
		got, err := j.model(sc.Expect[i].Split, ready)
		if err != nil {
			t.Fatalf("expect[%d]: %v", i, err)
		}
		if len(got.Shares) != len(want) {
			t.Fatalf("expect[%d]: shares %v, want %v", i, got.Shares, want)
		}
		for pod, w := range want {
			if math.Abs(got.Shares[pod]-w) > 1e-12 {
				t.Errorf("expect[%d]: pod %s share %v, want %v", i, pod, got.Shares[pod], w)
			}
		}
	}
	// A StatefulSet's web-0 in both clusters is two pods of the model.
	same := map[string][]string{"c2": {"web-0"}, "c3": {"web-0", "web-1"}}
	if got, err := j.model(sc.Expect[1].Split, same); err != nil || len(got.Shares) != 3 ||
		math.Abs(got.Shares["c2/web-0"]-1.0/3) > 1e-12 || math.Abs(got.Shares["c3/web-0"]-1.0/3) > 1e-12 {
		t.Errorf("web-0 in c2 and c3: shares %v, %v; want three pods of 1/3", got.Shares, err)
	}
	if _, err := j.model(sc.Expect[0].Split, nil); err == nil {
		t.Error("a split by pod without an inventory was accepted")
	}
}

const head = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
target: {url: "http://127.0.0.1:1/"}
attribution: {preset: tutorial}
`

// The sampling unit of every expectation: the scenario's balancing, a
// split's own, and per request for a mirror.
func TestSamplingOfExpectations(t *testing.T) {
	t.Parallel()
	sc := parse(t, head+`clusters: [{name: c1, cost: 1}, {name: c2, cost: 1}]
attack: {concurrency: 4, repetitions: 10}
expect:
  - split: {model: equal}
  - split: {model: equal, balancing: request}
  - successRate: {atLeast: 99%}
`)
	for i, want := range []assert.Balancing{assert.PerConnection, assert.PerRequest, assert.PerConnection} {
		j := New(sc, Attack{FixedConnections: 4})
		s := j.Sampling(j.Expectations()[i])
		if s.Balancing != want || s.FixedConnections != 4 || s.Reason == "" {
			t.Errorf("expect[%d]: %+v, want %s over 4 connections with a reason", i, s, want)
		}
	}
	mirror := Expectation{Spec: scenarios.Expectation{Mirror: &scenarios.MirrorExpect{}}, kind: resolve(scenarios.Expectation{Mirror: &scenarios.MirrorExpect{}})}
	if s := New(sc, Attack{}).Sampling(mirror); s.Balancing != assert.PerRequest {
		t.Errorf("mirror: %+v", s)
	}
}

// Issue 9 defect 7: reached takes its minimum share from a split of the
// same dimension and source (a 99/1 canary: 1%), or from minShare.
func TestReachedMinShare(t *testing.T) {
	t.Parallel()
	sc := parse(t, head+`clusters: [{name: c1}, {name: c2}]
attack: {rate: 10/s, duration: 1s}
expect:
  - name: canary
    split: {weights: {c1: 99, c2: 1}}
  - reached: {buckets: [c1, c2]}
  - reached: {buckets: [c1, c2], minShare: 5%}
  - reached: {by: version, buckets: [v1, v2]}
`)
	j := New(sc, Attack{})
	for i, want := range []struct {
		share float64
		from  string
	}{{0.01, `"canary"`}, {0.05, "reached.minShare"}, {0, ""}} {
		e := j.Expectations()[i+1]
		got := j.minShare(e, e.Spec.Reached, nil)
		if math.Abs(got.Share-want.share) > 1e-12 || !strings.Contains(got.From, want.from) {
			t.Errorf("expect[%d]: %+v, want %g from %s", i+1, got, want.share, want.from)
		}
	}
}

// Issue 9 defect 11: a mirror honours statistics.relative: 26% mirrored
// of 1000 against 20% passes within ±10 points, and fails within ±10% of
// 20% (±2 points).
func TestMirrorHonoursRelative(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		relative string
		want     assert.Verdict
	}{{"false", assert.Pass}, {"true", assert.Fail}} {
		sc := parse(t, head+`clusters: [{name: c1, context: k1}]
attack: {rate: 10/s, duration: 1s}
observe: [{name: m, selector: app=m, logs: {match: 'id=(?P<request_id>\S+)'}}]
statistics: {margin: 10%, relative: `+c.relative+`}
expect: [{mirror: {to: m, percent: 20%}}]
`)
		// 260 of 1000 requests seen served were seen mirrored (runner's
		// mirror counts of the logs, by request id).
		r := New(sc, Attack{}).Evaluate(fakeEvidence{mirror: MirrorCount{K: 260, N: 1000, Basis: "requests seen served in the logs"}}, -1, 0)[0]
		if r.Verdict != c.want || r.Split == nil || r.Split.Balancing != assert.PerRequest {
			t.Errorf("relative %s: %v %s", c.relative, r.Verdict, r.Reason)
		}
	}
}

// A scenario may name a pod by its name alone when one cluster has it;
// a name two clusters share matches neither (the scenario must say
// c1/web-0), and other dimensions are untouched.
func TestByNameResolvesBarePodNames(t *testing.T) {
	t.Parallel()
	s := tally.Snapshot{
		Dimensions: map[string]assert.Counts{
			"pod":     {Buckets: []string{"c1/api-0", "c1/web-0", "c2/web-0", "lone"}, N: []int64{1, 2, 3, 4}},
			"cluster": {Buckets: []string{"c1"}, N: []int64{3}},
		},
		PodClusters: map[string]string{"c1/api-0": "c1", "c1/web-0": "c1", "c2/web-0": "c2"},
	}
	for _, tc := range []struct {
		by    string
		names []string
		want  map[string]int64
	}{
		{"pod", []string{"api-0", "web-0", "lone"}, map[string]int64{"api-0": 1, "c1/web-0": 2, "c2/web-0": 3, "lone": 4}},
		{"pod", []string{"c2/web-0"}, map[string]int64{"c1/api-0": 1, "c1/web-0": 2, "c2/web-0": 3, "lone": 4}},
		{"pod", nil, map[string]int64{"c1/api-0": 1, "c1/web-0": 2, "c2/web-0": 3, "lone": 4}},
		{"cluster", []string{"c1"}, map[string]int64{"c1": 3}},
	} {
		c := byName(s, tc.by, tc.names)
		got := map[string]int64{}
		for i, b := range c.Buckets {
			got[b] = c.N[i]
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("byName(%s, %v) = %v, want %v", tc.by, tc.names, got, tc.want)
		}
	}
	if s.Dimensions["pod"].Buckets[0] != "c1/api-0" {
		t.Errorf("byName renamed the snapshot's own buckets: %v", s.Dimensions["pod"].Buckets)
	}
}
