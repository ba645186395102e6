package attribution

import (
	"net/http"
	"regexp"
	"testing"
)

func TestPresetsOnTheDemoApps(t *testing.T) {
	cases := []struct {
		preset string
		body   string
		header http.Header
		want   Identity
	}{
		{"tutorial", "I'm callme-service v2", nil, Identity{Service: "callme-service", Version: "v2"}},
		// The caller embeds its callee's answer; the callee is what the mesh routed.
		{"tutorial", "I'm caller-service v1. Calling... I'm callme-service v2", nil, Identity{Service: "callme-service", Version: "v2"}},
		{"istio-echo", "ServiceVersion=v2\nServicePort=8080\nHostname=echo-v2-6d8f-xk2\nCluster=cluster-2\n", nil,
			Identity{Pod: "echo-v2-6d8f-xk2", Cluster: "cluster-2", Version: "v2"}},
		{"istio-echo", "[0] ServiceVersion=v1\n[0] Hostname=echo-v1-abc\n[0] Cluster=c1\n", nil,
			Identity{Pod: "echo-v1-abc", Cluster: "c1", Version: "v1"}},
		{"kuma-test-server", `{"instance":"test-server-7f9-z2","received":{"method":"GET"}}`, nil, Identity{Pod: "test-server-7f9-z2"}},
		{"cilium-rebel-base", `{"Galaxy": "Alderaan", "Cluster": "Cluster-2"}`, nil, Identity{Cluster: "Cluster-2"}},
		{"tutorial", "Hello", nil, Identity{}},
		{"kuma-test-server", `not json`, nil, Identity{}},
	}
	for _, tc := range cases {
		rules, err := Preset(tc.preset)
		if err != nil {
			t.Fatal(err)
		}
		if got := New(rules, nil).Attribute([]byte(tc.body), tc.header); got != tc.want {
			t.Errorf("%s on %q: got %+v, want %+v", tc.preset, tc.body, got, tc.want)
		}
	}
	if _, err := Preset("nope"); err == nil {
		t.Error("unknown preset accepted")
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
	if got, want := a.Attribute([]byte(body), h), (Identity{Pod: "callme-7c-x", Cluster: "c3", Version: "2"}); got != want {
		t.Errorf("header wins for cluster: got %+v, want %+v", got, want)
	}
	if got, want := a.Attribute([]byte(body), http.Header{}), (Identity{Cluster: "z1", Version: "2"}); got != want {
		t.Errorf("json path: got %+v, want %+v", got, want)
	}
	if got, want := a.Attribute([]byte(`plain v1`), http.Header{}), (Identity{Cluster: "c1", Version: "1"}); got != want {
		t.Errorf("value map: got %+v, want %+v", got, want)
	}
}
