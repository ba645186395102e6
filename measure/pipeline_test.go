package measure

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Attack against a real server: every request carries <runID>-<seq>, the
// pod a body names resolves to its cluster and version through the pod
// index, the intervals are cumulative and the final state counts exactly
// what the server answered.
func TestAttackPipeline(t *testing.T) {
	var hits atomic.Int64
	var idsMu sync.Mutex
	ids := map[string]bool{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		idsMu.Lock()
		ids[r.Header.Get("X-Request-Id")] = true
		idsMu.Unlock()
		fmt.Fprintf(w, "served by web-%d\n", n%2)
	}))
	defer ts.Close()
	sc, err := scenarios.Parse("p.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: p}
clusters: [{name: c1}, {name: c2}]
target: {url: "http://127.0.0.1:1/unused"}
attack: {rate: 100/s, duration: 1500ms}
attribution:
  rules: [{body: 'served by (?P<pod>\S+)'}]
expect:
  - successRate: {atLeast: 99%}
`))
	if err != nil {
		t.Fatal(err)
	}
	idx := NewPodIndex([]kube.Pod{
		{Cluster: "c1", Namespace: "d", Name: "web-0", Version: "v1"},
		{Cluster: "c2", Namespace: "d", Name: "web-1", Version: "v2"},
	})
	start := time.Now().Add(-time.Second).Truncate(time.Second)
	var intervals []tally.State
	var rules []attribution.Stats
	var first time.Time
	called := time.Now()
	rec := &countingRecorder{}
	res, err := Attack(context.Background(), sc, AttackOptions{
		RunID: "run-w1", Target: ts.URL + "/x", Start: start, Resolver: idx, Record: rec,
		Every: 300 * time.Millisecond, Phase: 150 * time.Millisecond, OnInterval: func(s tally.State, r attribution.Stats) {
			if first.IsZero() {
				first = time.Now()
			}
			intervals = append(intervals, s)
			rules = append(rules, r)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	st := res.State
	if st.Total != hits.Load() || st.Total < 100 {
		t.Fatalf("state counts %d requests, the server %d", st.Total, hits.Load())
	}
	if !st.Start.Equal(start.UTC()) {
		t.Errorf("state start %v, want %v", st.Start, start)
	}
	if len(intervals) < 2 {
		t.Fatalf("%d interval states in 1.5s at 300ms", len(intervals))
	}
	// Every result reaches the recorder (a worker's results.bin batch),
	// and the rules' statistics come with each state and at the end.
	if rec.n.Load() != st.Total || rec.pods.Load() != st.Total {
		t.Errorf("the recorder got %d results (%d naming a pod), the state counts %d", rec.n.Load(), rec.pods.Load(), st.Total)
	}
	if len(res.Rules.Rules) != 1 || res.Rules.Rules[0].Matched != st.Total || res.Rules.Responses != st.Total {
		t.Errorf("rules %+v after %d requests", res.Rules, st.Total)
	}
	for i := 1; i < len(rules); i++ {
		if rules[i].Responses < rules[i-1].Responses || rules[i].Responses > res.Rules.Responses {
			t.Errorf("interval %d: rules read %d responses after %d: not cumulative", i, rules[i].Responses, rules[i-1].Responses)
		}
	}
	// Timers never fire early: the phase delays the first state.
	if d := first.Sub(called); d < 450*time.Millisecond {
		t.Errorf("first interval state %v after the call, want at least the phase and one interval (450ms)", d)
	}
	for i := 1; i < len(intervals); i++ {
		if intervals[i].Total < intervals[i-1].Total {
			t.Errorf("interval %d: %d requests after %d: not cumulative", i, intervals[i].Total, intervals[i-1].Total)
		}
	}
	snap := st.Snapshot()
	clusters := map[string]int64{}
	d := snap.Dimensions[string(attribution.Cluster)]
	for i, b := range d.Buckets {
		clusters[b] = d.N[i]
	}
	if clusters["c1"]+clusters["c2"] != st.Total || clusters["c1"] == 0 || clusters["c2"] == 0 {
		t.Errorf("clusters %v of %d requests: the pod index did not resolve every pod", clusters, st.Total)
	}
	idsMu.Lock()
	defer idsMu.Unlock()
	for id := range ids {
		if !strings.HasPrefix(id, "run-w1-") {
			t.Fatalf("request id %q lacks the run id", id)
		}
	}
	if int64(len(ids)) != st.Total {
		t.Errorf("%d distinct request ids for %d requests", len(ids), st.Total)
	}
}

func TestAttackOptionsChecked(t *testing.T) {
	sc := &scenarios.Scenario{}
	for _, o := range []AttackOptions{
		{},
		{RunID: "r", AttributionWorkers: -1},
		{RunID: "r", OnInterval: func(tally.State, attribution.Stats) {}, Every: time.Millisecond},
		{RunID: "r", OnInterval: func(tally.State, attribution.Stats) {}, Every: time.Second, Phase: time.Second},
		{RunID: "r", OnInterval: func(tally.State, attribution.Stats) {}, Every: time.Second, Phase: -time.Millisecond},
	} {
		if _, err := Attack(context.Background(), sc, o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
}

func TestPodIndex(t *testing.T) {
	idx := NewPodIndex([]kube.Pod{
		{Cluster: "c1", Name: "a", IP: "10.0.0.1", Version: "v1"},
		{Cluster: "c2", Name: "b", IP: "10.0.0.1"},
		{Cluster: "c2", Name: "dup"},
		{Cluster: "c3", Name: "dup"},
		{Cluster: "c1", Namespace: "n1", Name: "x", IP: "10.0.0.9"},
		{Cluster: "c1", Namespace: "n2", Name: "y", IP: "10.0.0.9"},
		{Cluster: "c1", Namespace: "n1", Name: "z", IP: "10.0.0.7", Version: "v3"},
	})
	for _, c := range []struct {
		name string
		id   attribution.Identity
		ok   bool
	}{
		{"a", attribution.Identity{Cluster: "c1", Pod: "a", Version: "v1"}, true},
		{"b", attribution.Identity{Cluster: "c2", Pod: "b"}, true},
		{"dup", attribution.Identity{}, false},
		{"none", attribution.Identity{}, false},
	} {
		if id, ok := idx.ByPod(c.name); ok != c.ok || id != c.id {
			t.Errorf("ByPod(%s) = %+v, %v; want %+v, %v", c.name, id, ok, c.id, c.ok)
		}
	}
	if _, ok := idx.ByAddress("10.0.0.1:8080"); ok {
		t.Error("an IP two clusters share resolved")
	}
	if _, ok := idx.ByAddress("10.0.0.9:8080"); ok {
		t.Error("an IP two pods of one cluster share resolved (a local run's inventory does not resolve it either)")
	}
	if id, ok := idx.ByAddress("10.0.0.7"); !ok || id != (attribution.Identity{Cluster: "c1", Pod: "z", Version: "v3"}) {
		t.Errorf("ByAddress(10.0.0.7) = %+v, %v", id, ok)
	}
}

// countingRecorder counts what a sink records (a worker's ResultBuffer in
// a distributed run).
type countingRecorder struct{ n, pods atomic.Int64 }

func (c *countingRecorder) Record(_ *attack.Result, id attribution.Identity, _ bool) {
	c.n.Add(1)
	if id.Pod != "" {
		c.pods.Add(1)
	}
}
func (c *countingRecorder) RecordUnread(*attack.Result, bool) { c.n.Add(1) }
func (c *countingRecorder) Close() error                      { return nil }
