package scenarios

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/podlogs"
)

func TestObserveScenario(t *testing.T) {
	t.Parallel()
	s, err := Load("testdata/good/k8s-observe.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app, v2 := s.Workload("sample-app"), s.Workload("sample-app-v2")
	if app == nil || v2 == nil || s.Workload("nope") != nil {
		t.Fatalf("Workload lookup: %v %v", app, v2)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"forward", *s.Target.Forward, Forward{Cluster: "c1", Namespace: "interconnect", Resource: "svc/sample-spring-kotlin-microservice", Port: "8080", Scheme: "http"}},
		{"attribution empty", s.Attribution, Attribution{}},
		{"app", *app, Workload{
			Name: "sample-app", Namespace: "interconnect",
			Selector:  "app=sample-spring-kotlin-microservice,version notin (v2)",
			Clusters:  []string{"c2", "c3"},
			Container: "sample-spring-kotlin-microservice", VersionLabel: "app.kubernetes.io/version",
			Logs: &LogSource{Match: `GET /persons request-id=(?P<request_id>[-.0-9A-Za-z]+)`, Settle: Duration{5 * time.Second}, Skew: Duration{time.Second},
				Background: &Duration{15 * time.Second}},
			Metrics: &MetricsSource{Port: "http", Path: "/actuator/prometheus", Counter: "http_server_requests_seconds_count",
				Labels: map[string]string{"uri": "/persons", "method": "GET"}, Via: "proxy"},
		}},
		{"v2 version label default", v2.VersionLabel, "version"},
		{"v2 settle default", v2.Logs.Settle.Duration, 3 * time.Second},
		{"v2 skew default", v2.Logs.Skew.Duration, 2 * time.Second},
		{"v2 background default", *v2.Logs.Background, Duration{DefaultLogBackground}},
		{"split", *s.Expect[0].Split, Split{By: "cluster", Model: "equal", Buckets: []string{"c2", "c3"}, Source: "logs"}},
		{"reached", *s.Expect[1].Reached, BucketSet{By: "cluster", Buckets: []string{"c2", "c3"}, Source: "logs"}},
		{"only", *s.Expect[2].Only, BucketSet{By: "version", Buckets: []string{"v1"}, Source: "metrics"}},
		{"mirror", *s.Expect[3].Mirror, MirrorExpect{To: "sample-app-v2", Percent: 0.5, Margin: ptr(Percent(0.05)), Shadow: ptr(true)}},
		{"mirror name", s.Expect[3].Name, "mirror 50% to sample-app-v2"},
		{"mirror kind", s.Expect[3].Kind(), "mirror"},
		{"request id group", v2.Logs.HasGroup("request_id"), true},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

const k8sBase = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: k}
clusters: [{name: c1, context: kind-c1}, {name: c2, context: kind-c2}]
target: {url: "http://127.0.0.1:1/"}
attack: {rate: 10, requests: 100}
`

// TestObserveDefaults covers what ApplyDefaults resolves for the runner.
func TestObserveDefaults(t *testing.T) {
	t.Parallel()
	s, err := Parse("d.yaml", []byte(k8sBase+`observe:
  - name: callme
    selector: app=callme-service
    logs: {match: 'host=(?P<host>\S+) id=(?P<request_id>\S+)'}
    metrics: {port: "15020", counter: istio_requests_total}
  - name: inventory-only
    selector: app=other
expect:
  - split: {}
  - never: {buckets: [c2]}
  - mirror: {to: callme, percent: 12.5%}
`))
	if err != nil {
		t.Fatal(err)
	}
	w := s.Observe[0]
	checks := []struct {
		name      string
		got, want any
	}{
		{"namespace", w.Namespace, "default"},
		{"versionLabel", w.VersionLabel, "version"},
		{"clusters default to every declared cluster", w.Clusters, []string{"c1", "c2"}},
		{"inventory-only clusters", s.Observe[1].Clusters, []string{"c1", "c2"}},
		{"settle", w.Logs.Settle.Duration, 3 * time.Second},
		{"skew", w.Logs.Skew.Duration, 2 * time.Second},
		{"metrics path", w.Metrics.Path, "/metrics"},
		{"default source is logs without rules", s.DefaultSource(), "logs"},
		{"split source", s.Expect[0].Split.Source, "logs"},
		{"never source", s.Expect[1].Never.Source, "logs"},
		{"shadow defaults to true with a host group", *s.Expect[2].Mirror.Shadow, true},
		{"mirror name", s.Expect[2].Name, "mirror 12.5% to callme"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
	before := *s
	before.Observe = append([]Workload(nil), s.Observe...)
	s.ApplyDefaults()
	if !reflect.DeepEqual(before.Observe, s.Observe) || !reflect.DeepEqual(before.Expect, s.Expect) {
		t.Error("ApplyDefaults is not idempotent")
	}

	// Without a host group, shadow defaults to false; with a preset, body
	// stays the default source; metrics is the default without logs.
	s, err = Parse("d.yaml", []byte(k8sBase+`attribution: {preset: tutorial}
observe:
  - {name: callme, selector: app=callme, logs: {match: 'id=(?P<request_id>\S+)'}}
expect:
  - split: {}
  - mirror: {to: callme, percent: 50%}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Expect[0].Split.Source != "body" || *s.Expect[1].Mirror.Shadow {
		t.Errorf("source %q shadow %v, want body and false", s.Expect[0].Split.Source, *s.Expect[1].Mirror.Shadow)
	}
	s, err = Parse("d.yaml", []byte(k8sBase+`observe:
  - {name: callme, selector: app=callme, metrics: {port: http-metrics, counter: istio_requests_total}}
expect:
  - reached: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	if s.Expect[0].Reached.Source != "metrics" {
		t.Errorf("source %q, want metrics", s.Expect[0].Reached.Source)
	}

	// A log preset fills in the regex, the exclusion and the sidecar's
	// container; an authority group makes shadow default to true.
	s, err = Parse("d.yaml", []byte(k8sBase+`observe:
  - {name: callme-v2, selector: 'app=callme,version=v2', logs: {preset: istio-proxy}}
  - {name: rebel-base, selector: name=rebel-base, logs: {preset: nginx, background: 0s}}
  - {name: mine, selector: app=x, container: app, logs: {preset: istio-proxy, match: 'served (?P<status>\d+)'}}
expect:
  - mirror: {to: callme-v2, percent: 50%}
  - successRate: {atLeast: 99%}
`))
	if err != nil {
		t.Fatal(err)
	}
	proxy, _ := podlogs.LookupPreset("istio-proxy")
	nginx, _ := podlogs.LookupPreset("nginx")
	m := s.Expect[0].Mirror
	checks = []struct {
		name      string
		got, want any
	}{
		{"preset match", s.Observe[0].Logs.Match, proxy.Match},
		{"preset container", s.Observe[0].Container, "istio-proxy"},
		{"preset exclude", s.Observe[1].Logs.Exclude, nginx.Exclude},
		{"background off", s.Observe[1].Logs.Background.Duration, time.Duration(0)},
		{"own match and container win", []string{s.Observe[2].Logs.Match, s.Observe[2].Container}, []string{`served (?P<status>\d+)`, "app"}},
		{"shadow from the authority group", *m.Shadow, true},
		{"shadow defaulted", m.ShadowDefaulted(), true},
		{"success codes", s.Attack.SuccessCodes, StatusCodes{{200, 299}}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func TestObserveInlineBad(t *testing.T) {
	t.Parallel()
	obs := "observe:\n  - {name: callme, selector: app=callme, logs: {match: 'id=(?P<request_id>\\S+)'}}\n"
	cases := []struct {
		name, src string
		want      []string // "line:field: substring", every error
	}{
		{"selector required", "observe:\n  - name: callme\nexpect:\n  - reached: {}\n",
			[]string{`8:observe[0].selector: required: a label selector`, `1:attribution: set a preset (cilium-rebel-base, istio-echo, istio-helloworld, kuma-test-server, tutorial) or at least one rule to read the response with, or observe workloads with observe[].logs`}},
		{"bad selector", "attribution: {preset: tutorial}\nobserve:\n  - {name: a, selector: 'app in v1'}\nexpect:\n  - reached: {}\n",
			[]string{`9:observe[0].selector: invalid label selector "app in v1": found "v1" after app in, want "(" and a list of values`}},
		{"duplicate workload", "attribution: {preset: tutorial}\nobserve:\n  - {name: a, selector: x}\n  - {name: a, selector: y}\nexpect:\n  - reached: {}\n",
			[]string{`10:observe[1].name: duplicate workload "a" (also observe[0])`}},
		{"bad namespace", "attribution: {preset: tutorial}\nobserve:\n  - {name: a, selector: x, namespace: Prod}\nexpect:\n  - reached: {}\n",
			[]string{`9:observe[0].namespace: invalid namespace "Prod"`}},
		{"bad version label", "attribution: {preset: tutorial}\nobserve:\n  - {name: a, selector: x, versionLabel: 'app/ver/x'}\nexpect:\n  - reached: {}\n",
			[]string{`9:observe[0].versionLabel: invalid label key "app/ver/x"`}},
		{"unknown cluster", "attribution: {preset: tutorial}\nobserve:\n  - {name: a, selector: x, clusters: [c1, c9]}\nexpect:\n  - reached: {}\n",
			[]string{`9:observe[0].clusters[1]: unknown cluster c9 (declared: c1, c2)`}},
		{"empty clusters", "attribution: {preset: tutorial}\nobserve:\n  - {name: a, selector: x, clusters: []}\nexpect:\n  - reached: {}\n",
			[]string{`9:observe[0].clusters: empty: list the declared clusters to observe (c1, c2)`}},
		{"explicit zero settle", "observe:\n  - {name: a, selector: x, logs: {match: 'id=(?P<request_id>\\d+)', settle: 0s}}\nexpect:\n  - reached: {}\n",
			[]string{`8:observe[0].logs.settle: 0 is not allowed here; leave the field out for the default 3s`}},
		{"negative skew", "observe:\n  - {name: a, selector: x, logs: {match: 'id=(?P<request_id>\\d+)', skew: -1s}}\nexpect:\n  - reached: {}\n",
			[]string{`8:observe[0].logs.skew: duration "-1s" is negative`}},
		{"match everything", "observe:\n  - {name: a, selector: x, logs: {match: '.*'}}\nexpect:\n  - reached: {}\n",
			[]string{`8:observe[0].logs.match: the regex matches an empty line`}},
		{"metrics port and path", "observe:\n  - {name: a, selector: x, metrics: {port: 'metrics_port', path: metrics, counter: x}}\nexpect:\n  - reached: {}\n",
			[]string{`8:observe[0].metrics.port: invalid port "metrics_port"`, `8:observe[0].metrics.path: want a path starting with /`}},
		{"metrics via", "observe:\n  - {name: a, selector: x, metrics: {port: '15090', counter: x, via: kubelet}}\nexpect:\n  - reached: {}\n",
			[]string{`8:observe[0].metrics.via: want proxy (the API server's pod proxy) or portForward (a port-forward to the pod), got "kubelet"`}},
		{"metrics label", "observe:\n  - name: a\n    selector: x\n    metrics:\n      port: http\n      counter: x_total\n      labels: {__name__: y, 0code: '200'}\nexpect:\n  - reached: {}\n",
			[]string{`13:observe[0].metrics.labels.0code: invalid Prometheus label name "0code"`, `13:observe[0].metrics.labels.__name__: label names starting with __ are reserved`}},
		{"bad source", obs + "expect:\n  - split: {source: response}\n",
			[]string{`10:expect[0].split.source: want one of body, logs, metrics, got "response"`}},
		{"body without rules", obs + "expect:\n  - only: {buckets: [c1], source: body}\n",
			[]string{`10:expect[0].only.source: source body needs attribution rules or a preset`}},
		{"metrics without workload", obs + "expect:\n  - reached: {source: metrics}\n",
			[]string{`10:expect[0].reached.source: source metrics needs an observe workload with metrics`}},
		{"logs default source cannot see a bucket", "observe:\n  - {name: callme, selector: app=callme, clusters: [c2], logs: {match: 'id=(?P<request_id>\\S+)'}}\nexpect:\n  - never: {buckets: [c1]}\n",
			[]string{`10:expect[0].never.source: never by cluster from logs must see its buckets, but no observe workload with observe[].logs lists c1 (logs is the default source: attribution has no rules or preset)`}},
		{"only must see every cluster", "attribution: {preset: tutorial}\nobserve:\n  - {name: callme, selector: app=callme, clusters: [c2], logs: {match: 'id=(?P<request_id>\\S+)'}}\nexpect:\n  - only: {buckets: [c2], source: logs}\n",
			[]string{`11:expect[0].only.source: only by cluster from logs must see every declared cluster (only measures the traffic outside its set), but no observe workload with observe[].logs lists c1`}},
		{"mirror to unknown", obs + "expect:\n  - mirror: {to: callme-v2, percent: 50%}\n",
			[]string{`10:expect[0].mirror.to: unknown workload "callme-v2": name an observe workload (with logs: callme)`}},
		{"mirror without percent", obs + "expect:\n  - mirror: {to: callme}\n",
			[]string{`10:expect[0].mirror.percent: required: the expected share of primary requests mirrored`}},
		{"mirror shadow without host", obs + "expect:\n  - mirror: {to: callme, percent: 50%, shadow: true}\n",
			[]string{`10:expect[0].mirror.shadow: shadow counts lines whose host ends in -shadow, but workload callme's logs.match has no host or authority group`}},
		{"mirror margin", obs + "expect:\n  - mirror: {to: callme, percent: 50%, margin: 60%}\n",
			[]string{`10:expect[0].mirror.margin: want a margin in (0, 50%], like 5%, got 60%`}},
		{"mirror with another kind", obs + "expect:\n  - latency: {below: 1s}\n    mirror: {to: callme, percent: 50%}\n",
			[]string{`11:expect[0].mirror: one expectation has one kind and latency is already set`}},
		{"mirror target regex broken: reported once", "observe:\n  - {name: callme, selector: app=callme, logs: {match: 'id=(?P<request_id>\\S+'}}\nexpect:\n  - mirror: {to: callme, percent: 50%}\n",
			[]string{`8:observe[0].logs.match: invalid regex`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("o.yaml", []byte(k8sBase+c.src))
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			got := strings.Split(err.Error(), "\n")
			if len(got) != len(c.want) {
				t.Errorf("got %d errors, want %d:\n%v", len(got), len(c.want), err)
			}
			for _, w := range c.want {
				line, rest, _ := strings.Cut(w, ":")
				found := false
				for _, g := range got {
					if strings.HasPrefix(g, "o.yaml:"+line+":") && strings.Contains(g, rest) {
						found = true
					}
				}
				if !found {
					t.Errorf("missing %s\ngot:\n%v", w, err)
				}
			}
		})
	}
}

// TestContexts: a cluster reached through its API server needs a context,
// and the message says which and why, also when observe defaulted to it.
func TestContexts(t *testing.T) {
	t.Parallel()
	src := `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: k}
clusters: [{name: c1, context: kind-c1}, {name: c2}]
target: {url: "http://127.0.0.1:1/"}
attack: {rate: 10, requests: 100}
observe:
  - name: callme
    selector: app=callme
    logs: {match: 'id=(?P<request_id>\S+)'}
  - name: other
    selector: app=other
    clusters: [c1, c2]
expect:
  - reached: {}
`
	_, err := Parse("c.yaml", []byte(src))
	want := []string{
		"c.yaml:8:5: observe[0].clusters[1]: cluster c2 has no context: observe lists pods and reads their logs and metrics through each cluster's API server, so set clusters[1].context to the kubeconfig context that reaches c2 (observe[0].clusters defaults to every declared cluster: list the clusters to observe to leave c2 out)",
		"c.yaml:13:20: observe[1].clusters[1]: cluster c2 has no context: observe lists pods and reads their logs and metrics through each cluster's API server, so set clusters[1].context to the kubeconfig context that reaches c2",
	}
	if err == nil || err.Error() != strings.Join(want, "\n") {
		t.Errorf("got:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}

// TestInventoryReplacesPods: observing a workload in a cluster stands in
// for split.pods there; a cluster nobody observes still needs its count.
func TestInventoryReplacesPods(t *testing.T) {
	t.Parallel()
	src := k8sBase + `attribution: {preset: tutorial}
observe:
  - {name: callme, selector: app=callme, clusters: [c1]}
expect:
  - split: {model: equal-per-pod}
`
	_, err := Parse("p.yaml", []byte(src))
	if err == nil || !strings.Contains(err.Error(), "p.yaml:11:") ||
		!strings.Contains(err.Error(), "expect[0].split.pods: model equal-per-pod needs ready pods per cluster; missing c2 (or observe the workload there") {
		t.Errorf("got %v", err)
	}
	if _, err := Parse("p.yaml", []byte(strings.Replace(src, "clusters: [c1]", "clusters: [c1, c2]", 1))); err != nil {
		t.Errorf("observed in every cluster: %v", err)
	}
	if _, err := Parse("p.yaml", []byte(strings.Replace(src, "model: equal-per-pod", "model: equal-per-pod, pods: {c2: 3}", 1))); err != nil {
		t.Errorf("pods for the unobserved cluster: %v", err)
	}
}
