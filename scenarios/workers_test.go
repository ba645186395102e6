package scenarios

import (
	"strings"
	"testing"
)

// workersDoc is minimal with the target and attack replaced; line 5 is
// the target, line 6 the attack.
func workersDoc(target, attack string) string {
	src := strings.Replace(minimal, "clusters: [{name: c1}, {name: c2}]", "clusters: [{name: c1, context: kind-c1}, {name: c2, context: kind-c2}]", 1)
	src = strings.Replace(src, `target: {url: "http://127.0.0.1:1/"}`, "target: "+target, 1)
	src = strings.Replace(src, "attack: {rate: 10, requests: 100}", "attack: "+attack, 1)
	return src + "expect:\n  - successRate: {atLeast: 99%}\n"
}

const svcTarget = `{portForward: {cluster: c2, namespace: demo, resource: svc/web, port: "8080"}, path: /api}`

func TestWorkersFields(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, target, attack string
		want                 string // "line:field: substring", or "" for valid
	}{
		{"url, from", `{url: "http://web.demo:8080/"}`, "{rate: 10, requests: 100, workers: 2, from: c1}", ""},
		{"svc target, from defaults", svcTarget, "{rate: 10, requests: 100, workers: 2}", ""},
		{"max workers", svcTarget, "{rate: 1000, requests: 1000, workers: 1000}", ""},
		{"image and account", svcTarget, "{rate: 10, requests: 100, workers: 2, image: reg.example/mv:1.2, serviceAccount: load-sa}", ""},
		{"too many", svcTarget, "{rate: 10000, requests: 10000, workers: 1001}", "6:attack.workers: want 0 (attack from this process) or 1 to 1000 worker pods, got 1001"},
		{"negative", svcTarget, "{rate: 10, requests: 100, workers: -1}", "6:attack.workers: want 0 (attack from this process) or 1 to 1000"},
		{"not a number", svcTarget, "{rate: 10, requests: 100, workers: two}", "6:attack.workers: want a whole number"},
		{"url needs from with two clusters", `{url: "http://web.demo:8080/"}`, "{rate: 10, requests: 100, workers: 2}", "6:attack.from: required with several clusters and a url target"},
		{"unknown from", svcTarget, "{rate: 10, requests: 100, workers: 2, from: c9}", "6:attack.from: unknown cluster c9 (declared: c1, c2)"},
		{"from without workers", svcTarget, "{rate: 10, requests: 100, from: c1}", "6:attack.from: applies to distributed runs only"},
		{"image without workers", svcTarget, "{rate: 10, requests: 100, image: x}", "6:attack.image: applies to distributed runs only"},
		{"bad account", svcTarget, "{rate: 10, requests: 100, workers: 2, serviceAccount: Bad_SA}", `6:attack.serviceAccount: invalid ServiceAccount name "Bad_SA"`},
		{"bad image", svcTarget, `{rate: 10, requests: 100, workers: 2, image: "a b"}`, `6:attack.image: invalid image "a b"`},
		{"rate below workers", svcTarget, "{rate: 3, requests: 100, workers: 4}", "6:attack.rate: 3 is less than attack.workers (4)"},
		{"requests below workers", svcTarget, "{rate: 10, requests: 3, workers: 4}", "6:attack.requests: 3 is less than attack.workers (4)"},
		{"concurrency below workers", svcTarget, "{concurrency: 2, repetitions: 10, workers: 4}", "6:attack.concurrency: 2 is less than attack.workers (4)"},
		{"ramp below workers", svcTarget, "{ramp: {from: 1/s, to: 20/s, duration: 5s}, workers: 4}", "6:attack.ramp.from: 1 is less than attack.workers (4)"},
		{"pod target", `{portForward: {cluster: c2, resource: pod/web-0, port: "8080"}}`, "{rate: 10, requests: 100, workers: 2}", "5:target.portForward: workers reach the target by its in-cluster DNS name, which only a Service has"},
		{"named port", `{portForward: {cluster: c2, resource: svc/web, port: http}}`, "{rate: 10, requests: 100, workers: 2}", `5:target.portForward: workers dial the Service's port by number: port "http" is a name`},
		// Issue 23: run.json, with the target, is in the workers' ConfigMap.
		{"password in the url", `{url: "http://user:s3cr3t@web.demo:8080/"}`, "{rate: 10, requests: 100, workers: 2, from: c1}", "5:target.url: http://user:xxxxx@web.demo:8080/ carries a credential"},
		{"token in the url", `{url: "http://web.demo:8080/?access_token=s3cr3t"}`, "{rate: 10, requests: 100, workers: 2, from: c1}", "5:target.url: http://web.demo:8080/?access_token=REDACTED carries a credential"},
		{"token in the path", `{portForward: {cluster: c2, resource: svc/web, port: "8080"}, path: "/api?apikey=s3cr3t"}`, "{rate: 10, requests: 100, workers: 2}", "5:target.path: http://web.default.svc.cluster.local:8080/api?apikey=REDACTED carries a credential"},
		{"token in the url is fine locally", `{url: "http://web.demo:8080/?access_token=s3cr3t"}`, "{rate: 10, requests: 100}", ""},
		{"user without password", `{url: "http://user@web.demo:8080/?id={{.RequestID}}"}`, "{rate: 10, requests: 100, workers: 2, from: c1}", ""},
		{"pod target is fine locally", `{portForward: {cluster: c2, resource: pod/web-0, port: "8080"}}`, "{rate: 10, requests: 100}", ""},
		// Several sources.
		{"sources", svcTarget, "{rate: 10, requests: 100, sources: [{cluster: c1, workers: 2}, {cluster: c2, workers: 1}]}", ""},
		{"sources and their sum", svcTarget, "{rate: 10, requests: 100, workers: 3, sources: [{cluster: c1, workers: 2}, {cluster: c2, workers: 1}]}", ""},
		{"sources and another sum", svcTarget, "{rate: 10, requests: 100, workers: 4, sources: [{cluster: c1, workers: 2}, {cluster: c2, workers: 1}]}", "6:attack.workers: 4, but attack.sources add up to 3 workers"},
		{"sources and from", svcTarget, "{rate: 10, requests: 100, from: c1, sources: [{cluster: c1, workers: 2}]}", "6:attack.from: leave it out with attack.sources"},
		{"source twice", svcTarget, "{rate: 10, requests: 100, sources: [{cluster: c1, workers: 2}, {cluster: c1, workers: 1}]}", "6:attack.sources[1].cluster: cluster c1 is already a source"},
		{"unknown source", svcTarget, "{rate: 10, requests: 100, sources: [{cluster: c9, workers: 2}]}", "6:attack.sources[0].cluster: unknown cluster c9"},
		{"source without workers", svcTarget, "{rate: 10, requests: 100, sources: [{cluster: c1, workers: 2}, {cluster: c2}]}", "6:attack.sources[1].workers: want 1 to 1000 worker pods, got 0"},
		{"source without cluster", svcTarget, "{rate: 10, requests: 100, sources: [{workers: 2}]}", "6:attack.sources[0].cluster: required"},
		{"rate below all sources", svcTarget, "{rate: 2, requests: 100, sources: [{cluster: c1, workers: 2}, {cluster: c2, workers: 1}]}", "6:attack.rate: 2 is less than attack.workers (3)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("w.yaml", []byte(workersDoc(c.target, c.attack)))
			wantParseError(t, err, c.want)
		})
	}
}

func TestWorkersDefaults(t *testing.T) {
	t.Parallel()
	s, err := Parse("w.yaml", []byte(workersDoc(svcTarget, "{rate: 10, requests: 100, workers: 3}")))
	if err != nil {
		t.Fatal(err)
	}
	a := s.Attack
	if a.From != "c2" || a.ServiceAccount != DefaultWorkerServiceAccount || a.Image != "" {
		t.Errorf("from %q, serviceAccount %q, image %q; want c2, %s, empty", a.From, a.ServiceAccount, a.Image, DefaultWorkerServiceAccount)
	}
	if got := a.WorkerImage("v1.4.0"); got != "ghcr.io/mesh-verify/mesh-verify:v1.4.0" {
		t.Errorf("WorkerImage = %q", got)
	}
	a.Image = "reg.example/mv:x"
	if got := a.WorkerImage("v1.4.0"); got != "reg.example/mv:x" {
		t.Errorf("WorkerImage with attack.image = %q", got)
	}
	// The coordinator reaches cluster from through its context.
	noCtx := strings.Replace(minimal, "attack: {rate: 10, requests: 100}", "attack: {rate: 10, requests: 100, workers: 2, from: c1}", 1) + "expect:\n  - successRate: {atLeast: 99%}\n"
	if _, err := Parse("n.yaml", []byte(noCtx)); err == nil || !strings.Contains(err.Error(), "n.yaml:6:") || !strings.Contains(err.Error(), "attack.from: cluster c1 has no context") {
		t.Errorf("from without a context: %v", err)
	}
	// A local run keeps the fields empty: nothing to default.
	s, err = Parse("w.yaml", []byte(workersDoc(svcTarget, "{rate: 10, requests: 100}")))
	if err != nil {
		t.Fatal(err)
	}
	if s.Attack.From != "" || s.Attack.ServiceAccount != "" {
		t.Errorf("local run: from %q, serviceAccount %q; want both empty", s.Attack.From, s.Attack.ServiceAccount)
	}
}

func TestInClusterURL(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ target, want, err string }{
		{svcTarget, "http://web.demo.svc.cluster.local:8080/api", ""},
		{`{portForward: {cluster: c1, resource: service/web, port: "443", scheme: https}}`, "https://web.default.svc.cluster.local:443/", ""},
		{`{portForward: {cluster: c1, resource: svc/web, port: "80"}, path: "/q?id={{.RequestID}}"}`, "http://web.default.svc.cluster.local:80/q?id={{.RequestID}}", ""},
		{`{url: "http://gateway.istio-system:80/hello"}`, "http://gateway.istio-system:80/hello", ""},
		{`{portForward: {cluster: c1, resource: deploy/web, port: "80"}}`, "", "only a Service has"},
		{`{portForward: {cluster: c1, resource: svc/web, port: web}}`, "", "is a name"},
	} {
		s, err := Parse("u.yaml", []byte(workersDoc(c.target, "{rate: 10, requests: 100}")))
		if err != nil {
			t.Fatalf("%s: %v", c.target, err)
		}
		got, err := s.InClusterURL()
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s: error %v, want %q", c.target, err, c.err)
		case c.err == "" && (err != nil || got != c.want):
			t.Errorf("%s: %q, %v; want %q", c.target, got, err, c.want)
		}
	}
}

// The shares add up to the scenario's numbers exactly, the remainder on
// the first indices, and connections never drop to 0.
func TestWorkerShare(t *testing.T) {
	t.Parallel()
	s, err := Parse("s.yaml", []byte(workersDoc(svcTarget, "{rate: 10/s, requests: 101, duration: 5s, connections: 5, maxConnections: 3, workers: 4}")))
	if err != nil {
		t.Fatal(err)
	}
	var rate, reqs, conns int64
	wantRate := []int{3, 3, 2, 2}
	for i := range 4 {
		a, err := s.Attack.WorkerShare(i, 4)
		if err != nil {
			t.Fatal(err)
		}
		if a.Rate.Freq != wantRate[i] || a.Rate.Per != s.Attack.Rate.Per {
			t.Errorf("worker %d: rate %v, want %d per %v", i, a.Rate, wantRate[i], s.Attack.Rate.Per)
		}
		if a.MaxConnections != 1 || a.Duration != s.Attack.Duration {
			t.Errorf("worker %d: maxConnections %d (want 1), duration %v", i, a.MaxConnections, a.Duration)
		}
		rate += int64(a.Rate.Freq)
		reqs += int64(a.Requests)
		conns += int64(a.Connections)
	}
	if rate != 10 || reqs != 101 || conns != 5 {
		t.Errorf("shares sum to rate %d, requests %d, connections %d; want 10, 101, 5", rate, reqs, conns)
	}
	if s.Attack.Rate.Freq != 10 {
		t.Errorf("the scenario's rate changed to %d", s.Attack.Rate.Freq)
	}
	s, err = Parse("s.yaml", []byte(workersDoc(svcTarget, "{concurrency: 5, repetitions: 7, workers: 2}")))
	if err != nil {
		t.Fatal(err)
	}
	a0, _ := s.Attack.WorkerShare(0, 2)
	a1, _ := s.Attack.WorkerShare(1, 2)
	if a0.Concurrency != 3 || a1.Concurrency != 2 || a0.Repetitions != 7 {
		t.Errorf("concurrency shares %d+%d (want 3+2), repetitions %d", a0.Concurrency, a1.Concurrency, a0.Repetitions)
	}
	for _, bad := range [][2]int{{-1, 2}, {2, 2}, {0, 0}, {0, MaxAttackWorkers + 1}} {
		if _, err := s.Attack.WorkerShare(bad[0], bad[1]); err == nil {
			t.Errorf("WorkerShare(%d, %d): no error", bad[0], bad[1])
		}
	}
	if _, err := (Attack{Concurrency: 1}).WorkerShare(1, 2); err == nil || !strings.Contains(err.Error(), "share of attack.concurrency is 0") {
		t.Errorf("a zero share: %v", err)
	}
}

// An expectation's from names one of attack.sources and is judged from
// the bodies: the logs and metrics do not say which source sent a request.
func TestExpectationFrom(t *testing.T) {
	t.Parallel()
	const sources = "{rate: 10, requests: 100, sources: [{cluster: c1, workers: 2}, {cluster: c2, workers: 1}]}"
	for _, c := range []struct {
		name, attack, expect, want string
	}{
		{"from a source", sources, "  - {from: c1, only: {by: cluster, buckets: [c1]}}\n", ""},
		{"from the other", sources, "  - {from: c2, split: {weights: {c2: 100}}}\n", ""},
		{"not a source", "{rate: 10, requests: 100, sources: [{cluster: c1, workers: 2}]}", "  - {from: c2, only: {by: cluster, buckets: [c1]}}\n", "expect[1].from: c2 is not a source (attack.sources: c1)"},
		{"no sources", "{rate: 10, requests: 100, workers: 2}", "  - {from: c1, only: {by: cluster, buckets: [c1]}}\n", "expect[1].from: judges the requests of one source: it needs attack.sources"},
		{"from logs", sources, "  - {from: c1, only: {by: cluster, buckets: [c1], source: logs}}\n", "expect[1].from: only expectations judged from the response bodies"},
		{"logs, per connection", "{rate: 10, requests: 100, workers: 2}", "  - {split: {weights: {c1: 1}, source: logs, balancing: connection}}\n", "expect[1]: judged from logs under per-connection balancing"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse("w.yaml", []byte(workersDoc(svcTarget, c.attack)+c.expect))
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got:\n%v\nwant: %s", err, c.want)
			}
		})
	}
}

// wantParseError checks Parse's error against want, "line:field: substring"
// ("" for no error).
func wantParseError(t *testing.T, err error, want string) {
	t.Helper()
	if want == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return
	}
	line, rest, _ := strings.Cut(want, ":")
	if err == nil || !strings.Contains(err.Error(), "w.yaml:"+line+":") || !strings.Contains(err.Error(), rest) {
		t.Fatalf("got:\n%v\nwant: %s", err, want)
	}
}
