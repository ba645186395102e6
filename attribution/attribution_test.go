package attribution

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// inventory is a Resolver over a fixed list of pods, standing in for the
// Kubernetes inventory (kube.Inv) the runner adapts.
type inventory map[string]Identity

func (inv inventory) ByPod(name string) (Identity, bool) {
	id, ok := inv[name]
	return id, ok
}

func (inv inventory) ByAddress(addr string) (Identity, bool) {
	for _, id := range inv {
		if id.Service == addr { // the test's stand-in for a pod IP
			return id, true
		}
	}
	return Identity{}, false
}

func readBody(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The presets against what the unmodified apps answer (testdata/README.md).
func TestPresetsOnRealBodies(t *testing.T) {
	inv := inventory{
		"echo-v1-6d8f7c9b5-xk2lm":        {Cluster: "c1", Pod: "echo-v1-6d8f7c9b5-xk2lm", Version: "v1"},
		"echo-v2-58c9d7f4b6-q7wzr":       {Cluster: "c2", Pod: "echo-v2-58c9d7f4b6-q7wzr", Version: "v2"},
		"helloworld-v2-7f6b8c9d4-x8k2p":  {Cluster: "c2", Pod: "helloworld-v2-7f6b8c9d4-x8k2p", Version: "v2"},
		"test-server-6b8f9c7d5-x2x9q":    {Cluster: "zone-2", Pod: "test-server-6b8f9c7d5-x2x9q", Version: "canary"},
		"not-the-pod-of-any-testdata-fi": {Cluster: "c9"},
	}
	rename := []ValueMap{{From: Cluster, To: Cluster, Values: map[string]string{"Cluster-1": "c1", "Cluster-2": "c2"}}}
	cases := []struct {
		preset, file string
		inv          Resolver
		maps         []ValueMap
		want         Identity
	}{
		{"tutorial", "callme-ping.txt", nil, nil, Identity{Service: "callme-service", Version: "v1"}},
		// The caller embeds its callee's answer: the callee is what the mesh routed.
		{"tutorial", "caller-ping.txt", nil, nil, Identity{Service: "callme-service", Version: "v2"}},
		{"tutorial", "callme-random-error-504.txt", nil, nil, Identity{Version: "v1"}},
		{"tutorial", "callme-random-error-200.txt", nil, nil, Identity{Service: "callme-service", Version: "v2"}},
		{"tutorial", "caller-random-error-200.txt", nil, nil, Identity{Service: "callme-service", Version: "v2"}},
		{"istio-echo", "istio-echo-cluster.txt", nil, nil, Identity{Pod: "echo-v1-6d8f7c9b5-xk2lm", Cluster: "cluster-2", Version: "v1"}},
		// The body's Cluster wins over the inventory.
		{"istio-echo", "istio-echo-cluster.txt", inv, nil, Identity{Pod: "echo-v1-6d8f7c9b5-xk2lm", Cluster: "cluster-2", Version: "v1"}},
		{"istio-echo", "istio-echo-no-cluster.txt", nil, nil, Identity{Pod: "echo-v2-58c9d7f4b6-q7wzr", Version: "v2"}},
		{"istio-echo", "istio-echo-no-cluster.txt", inv, nil, Identity{Pod: "echo-v2-58c9d7f4b6-q7wzr", Cluster: "c2", Version: "v2"}},
		{"istio-echo", "istio-echo-1.18-empty-cluster.txt", nil, nil, Identity{Pod: "echo-v1-6d8f7c9b5-xk2lm", Version: "v1"}},
		{"istio-echo", "istio-echo-1.18-empty-cluster.txt", inv, nil, Identity{Pod: "echo-v1-6d8f7c9b5-xk2lm", Cluster: "c1", Version: "v1"}},
		{"istio-echo", "istio-echo-forwarded.txt", nil, nil, Identity{Pod: "echo-v2-58c9d7f4b6-q7wzr", Cluster: "cluster-2", Version: "v2"}},
		{"istio-helloworld", "helloworld.txt", nil, nil, Identity{Pod: "helloworld-v2-7f6b8c9d4-x8k2p", Version: "v2"}},
		{"istio-helloworld", "helloworld.txt", inv, nil, Identity{Pod: "helloworld-v2-7f6b8c9d4-x8k2p", Cluster: "c2", Version: "v2"}},
		{"kuma-test-server", "kuma-test-server.json", nil, nil, Identity{Pod: "test-server-6b8f9c7d5-x2x9q"}},
		{"kuma-test-server", "kuma-test-server.json", inv, nil, Identity{Pod: "test-server-6b8f9c7d5-x2x9q", Cluster: "zone-2", Version: "canary"}},
		{"cilium-rebel-base", "rebel-base-cluster1.json", nil, nil, Identity{Cluster: "Cluster-1"}},
		{"cilium-rebel-base", "rebel-base-cluster1.json", nil, rename, Identity{Cluster: "c1"}},
		// Presets that do not fit the app attribute nothing.
		{"tutorial", "helloworld.txt", inv, nil, Identity{}},
		{"kuma-test-server", "rebel-base-cluster1.json", inv, nil, Identity{}},
		{"cilium-rebel-base", "callme-ping.txt", nil, nil, Identity{}},
	}
	for _, tc := range cases {
		rules, err := Preset(tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		a := New(rules, tc.maps)
		if tc.inv != nil {
			a.WithResolver(tc.inv)
		}
		if got := a.Attribute(readBody(t, tc.file), http.Header{}, true); got != tc.want {
			t.Errorf("%s on %s (inventory %v): got %+v, want %+v", tc.preset, tc.file, tc.inv != nil, got, tc.want)
		}
	}
	if _, err := Preset("nope"); err == nil || !strings.Contains(err.Error(), "istio-helloworld") {
		t.Errorf("unknown preset: %v", err)
	}
}

func TestRulesMapsAndPrecedence(t *testing.T) {
	rules := []Rule{
		{Source: Header, Key: "X-Served-By", Regex: regexp.MustCompile(`^(?P<pod>[a-z0-9-]+)\.(?P<cluster>c\d)$`)},
		{Source: JSON, Key: "meta.items.1.zone", Field: Cluster},
		{Source: Body, Regex: regexp.MustCompile(`v(\d)`), Field: Version, Last: true},
	}
	maps := []ValueMap{{From: Version, To: Cluster, Values: map[string]string{"1": "c1", "2": "c2"}}}
	a := New(rules, maps)
	h := http.Header{}
	h.Set("X-Served-By", "callme-7c-x.c3")
	body := `{"meta":{"items":[{"zone":"z0"},{"zone":"z1"}]},"text":"v1 then v2"}`
	if got, want := a.Attribute([]byte(body), h, true), (Identity{Pod: "callme-7c-x", Cluster: "c3", Version: "2"}); got != want {
		t.Errorf("header wins for cluster: got %+v, want %+v", got, want)
	}
	if got, want := a.Attribute([]byte(body), http.Header{}, true), (Identity{Cluster: "z1", Version: "2"}); got != want {
		t.Errorf("json path: got %+v, want %+v", got, want)
	}
	if got, want := a.Attribute([]byte(`plain v1`), http.Header{}, true), (Identity{Cluster: "c1", Version: "1"}); got != want {
		t.Errorf("value map: got %+v, want %+v", got, want)
	}
}

// The statistics tell a rule that matches nothing, and a field captured
// empty, from a mesh that serves nothing: counts over answered responses
// only, a few samples of what a rule did not match, empties only when
// nothing else filled the field.
func TestStats(t *testing.T) {
	rules, _ := Preset("istio-echo")
	a := New(rules, nil).WithResolver(inventory{"echo-v1-6d8f7c9b5-xk2lm": {Cluster: "c1", Version: "v1"}})
	bodies := []string{"istio-echo-1.18-empty-cluster.txt", "istio-echo-1.18-empty-cluster.txt", "istio-echo-no-cluster.txt", "helloworld.txt", "helloworld.txt", "helloworld.txt", "helloworld.txt"}
	for _, f := range bodies {
		a.Attribute(readBody(t, f), http.Header{}, true)
	}
	a.Attribute([]byte("upstream connect error"), http.Header{}, false) // a failure: not counted
	s := a.Stats()
	if s.Responses != 7 {
		t.Errorf("responses %d, want 7", s.Responses)
	}
	byRule := map[string]RuleStats{}
	for _, r := range s.Rules {
		byRule[r.Rule] = r
	}
	if r := byRule["preset istio-echo (Hostname=)"]; r.Matched != 3 || len(r.Samples) != MaxSamples {
		t.Errorf("Hostname rule: %+v, want 3 matched and %d samples", r, MaxSamples)
	}
	if r := byRule["preset istio-echo (Cluster=)"]; r.Matched != 2 {
		t.Errorf("Cluster rule matched %d, want 2 (the empty Cluster= lines)", r.Matched)
	}
	if s.Fields[Cluster] != 2 || s.Fields[Pod] != 3 {
		t.Errorf("fields %v: want cluster 2 (from the inventory), pod 3", s.Fields)
	}
	// Cluster= was empty twice but the inventory named the cluster; the
	// pod of the no-cluster body is unknown to it.
	if len(s.Empty) != 0 || s.Unresolved != 1 {
		t.Errorf("empty %+v unresolved %d, want none and 1", s.Empty, s.Unresolved)
	}

	b := New(rules, nil)
	b.Attribute(readBody(t, "istio-echo-1.18-empty-cluster.txt"), http.Header{}, true)
	b.Attribute(readBody(t, "istio-echo-cluster.txt"), http.Header{}, true)
	e := b.Stats().Empty
	if len(e) != 1 || e[0].Field != Cluster || e[0].Count != 1 || e[0].Rule != "preset istio-echo (Cluster=)" ||
		len(e[0].Samples) != 1 || !strings.Contains(e[0].Samples[0], "Cluster=\n") {
		t.Errorf("empty captures %+v, want one empty cluster from the Cluster= rule", e)
	}
}

func TestSampleIsCut(t *testing.T) {
	long := strings.Repeat("x", 2*SampleBytes)
	if got := Sample([]byte(long)); len(got) != SampleBytes {
		t.Errorf("sample of %d bytes", len(got))
	}
}

// FuzzAttribute: every preset on any body never panics, and every field a
// body preset fills is text of the body (no invention).
func FuzzAttribute(f *testing.F) {
	entries, _ := os.ReadDir("testdata")
	for _, e := range entries {
		if b, err := os.ReadFile(filepath.Join("testdata", e.Name())); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"instance":{"nested":1},"Cluster":null}`))
	f.Add([]byte("Cluster=\x00\nHostname=\xff\n"))
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, name := range PresetNames() {
			rules, _ := Preset(name)
			id := New(rules, nil).Attribute(body, http.Header{}, true)
			if rules[0].Source == JSON {
				continue // JSON unescapes: its values need not be bytes of the body
			}
			for _, fl := range Fields() {
				v := id.Get(fl)
				if v == "" {
					continue
				}
				if !strings.Contains(string(body), v) && utf8.Valid(body) {
					t.Errorf("%s: %s %q is not in the body %q", name, fl, v, body)
				}
			}
		}
	})
}

// Stats of attributors of the same rules add up as one attributor's over
// all their responses: counts summed, rules paired by name, samples kept
// up to MaxSamples, the first ones first.
func TestStatsAdd(t *testing.T) {
	t.Parallel()
	a := Stats{Responses: 10, Unresolved: 1, Rules: []RuleStats{{Rule: "pod", Matched: 8, Samples: []string{"x", "y"}}},
		Fields: map[Field]int64{Pod: 8}, Empty: []EmptyCapture{{Field: Cluster, Rule: "pod", Count: 2, Samples: []string{"e"}}}}
	b := Stats{Responses: 5, Rules: []RuleStats{{Rule: "pod", Matched: 3, Samples: []string{"z", "w"}}, {Rule: "version", Matched: 5}},
		Fields: map[Field]int64{Pod: 3, Version: 5}, Empty: []EmptyCapture{{Field: Cluster, Rule: "pod", Count: 1, Samples: []string{"f"}}}}
	var s Stats
	s.Add(a)
	s.Add(b)
	if s.Responses != 15 || s.Unresolved != 1 || len(s.Rules) != 2 || s.Rules[0].Matched != 11 || s.Rules[1].Matched != 5 ||
		strings.Join(s.Rules[0].Samples, ",") != "x,y,z" || s.Fields[Pod] != 11 || s.Fields[Version] != 5 ||
		len(s.Empty) != 1 || s.Empty[0].Count != 3 || strings.Join(s.Empty[0].Samples, ",") != "e,f" {
		t.Fatalf("sum %+v", s)
	}
	if len(a.Rules[0].Samples) != 2 {
		t.Errorf("Add changed its argument's samples: %v", a.Rules[0].Samples)
	}
}
