package worker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/certtest"
	"github.com/mesh-verify/mesh-verify/kube"
)

const testScenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: w}
clusters: [{name: c1, context: kind-c1}, {name: c2, context: kind-c2}]
target: {portForward: {cluster: c1, namespace: demo, resource: svc/web, port: "8080"}, path: /x}
attack: {rate: 11/s, duration: 2s, workers: 2}
attribution:
  rules: [{body: 'pod=(?P<pod>\S+)'}]
expect:
  - successRate: {atLeast: 99%}
`

// selfSigned is a PEM certificate of an authority of its own.
func selfSigned(t testing.TB) string {
	t.Helper()
	cert, _ := certtest.Pair(t)
	return string(cert)
}

func goodData(t testing.TB) map[string]string {
	t.Helper()
	d, err := RunData([]byte(testScenario), []kube.Pod{{Cluster: "c1", Namespace: "demo", Name: "web-0", Version: "v1"}},
		RunConfig{RunID: "20261201T100000Z-abc123", Workers: 2, Target: "http://127.0.0.1:8080/x", Interval: "2s"})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestParseConfig(t *testing.T) {
	c, err := ParseConfig("demo/mv", goodData(t))
	if err != nil {
		t.Fatal(err)
	}
	if c.Interval.Seconds() != 2 || len(c.Pods) != 1 || c.Run.Workers != 2 {
		t.Fatalf("config %+v", c)
	}
	sc0, id0, err := c.Share(0)
	if err != nil {
		t.Fatal(err)
	}
	sc1, id1, _ := c.Share(1)
	if id0 != "20261201T100000Z-abc123-w0" || id1 != "20261201T100000Z-abc123-w1" {
		t.Errorf("run ids %q %q", id0, id1)
	}
	if sc0.Attack.Rate.Freq != 6 || sc1.Attack.Rate.Freq != 5 || c.Scenario.Attack.Rate.Freq != 11 {
		t.Errorf("rates %d+%d of %d, want 6+5 of 11", sc0.Attack.Rate.Freq, sc1.Attack.Rate.Freq, c.Scenario.Attack.Rate.Freq)
	}
	if _, _, err := c.Share(2); err == nil || !strings.Contains(err.Error(), "worker index 2: want 0 to 1") {
		t.Errorf("index 2 of 2: %v", err)
	}

	edit := func(key, val string) map[string]string {
		d := goodData(t)
		if val == "\x00delete" {
			delete(d, key)
		} else {
			d[key] = val
		}
		return d
	}
	run := func(f func(*RunConfig)) string {
		r := RunConfig{RunID: "r1", Workers: 2, Target: "http://a:1/", Interval: "2s"}
		f(&r)
		b, _ := json.Marshal(r)
		return string(b)
	}
	for _, tc := range []struct {
		name string
		data map[string]string
		want string
	}{
		{"missing scenario", edit(KeyScenario, "\x00delete"), `configmap demo/mv: missing key "scenario.yaml"`},
		{"missing run", edit(KeyRun, "\x00delete"), `configmap demo/mv: missing key "run.json"`},
		{"run not json", edit(KeyRun, "{runId: x"), "configmap demo/mv, key run.json: invalid character"},
		{"run unknown field", edit(KeyRun, `{"runId":"r","workers":2,"target":"http://a/","interval":"2s","extra":1}`), `key run.json: json: unknown field "extra"`},
		{"run too large", edit(KeyRun, `{"runId":"r","workers":2,"target":"http://a/`+strings.Repeat("a", MaxRunBytes)+`","interval":"2s"}`), "configmap demo/mv, key run.json: 16446 bytes, at most 16384"},
		{"run duplicate key", edit(KeyRun, `{"runId":"r1","workers":2,"target":"http://a:1/","interval":"2s","workers":1}`), `configmap demo/mv, key run.json: key "workers" given twice in one object`},
		{"run duplicate key, other case", edit(KeyRun, `{"runId":"r1","RUNID":"r2","workers":2,"target":"http://a:1/","interval":"2s"}`), `key run.json: key "RUNID" given twice`},
		{"inventory duplicate key", edit(KeyInventory, `[{"cluster":"c1","name":"p"},{"cluster":"c1","name":"p","cluster":"c2"}]`), `key inventory.json: want a JSON list of pods ({cluster, namespace, name, version, ...}): key "cluster" given twice`},
		{"run trailing", edit(KeyRun, run(func(*RunConfig) {})+"{}"), "key run.json: trailing data"},
		{"empty run id", edit(KeyRun, run(func(r *RunConfig) { r.RunID = "" })), "key run.json: runId: required"},
		{"bad run id", edit(KeyRun, run(func(r *RunConfig) { r.RunID = "a b" })), `key run.json: runId "a b"`},
		{"long run id", edit(KeyRun, run(func(r *RunConfig) { r.RunID = strings.Repeat("a", MaxRunIDBytes+1) })), "at most 128 letters"},
		{"workers 0", edit(KeyRun, run(func(r *RunConfig) { r.Workers = 0 })), "key run.json: workers 0: want 1 to 1000"},
		{"workers disagree", edit(KeyRun, run(func(r *RunConfig) { r.Workers = 3 })), "key run.json says workers 3, key scenario.yaml attack.workers 2"},
		{"bad target", edit(KeyRun, run(func(r *RunConfig) { r.Target = "ftp://x" })), `key run.json: target "ftp://x"`},
		{"bad interval", edit(KeyRun, run(func(r *RunConfig) { r.Interval = "soon" })), `key run.json: interval "soon"`},
		{"short interval", edit(KeyRun, run(func(r *RunConfig) { r.Interval = "10ms" })), "key run.json: interval 10ms: want 500ms to 5m0s"},
		{"bad scenario", edit(KeyScenario, strings.Replace(testScenario, "rate: 11/s", "rate: -1", 1)), "configmap demo/mv, key scenario.yaml:6:"},
		{"inventory not a list", edit(KeyInventory, `{"cluster":"c1"}`), "key inventory.json: want a JSON list of pods"},
		{"inventory unknown cluster", edit(KeyInventory, `[{"cluster":"c9","namespace":"d","name":"p","phase":"","ready":true,"restarts":0}]`), `key inventory.json: [0].cluster: "c9" is not a cluster of the scenario`},
		{"inventory pod without name", edit(KeyInventory, `[{"cluster":"c1","namespace":"d","name":"","phase":"","ready":true,"restarts":0}]`), "key inventory.json: [0].name: required"},
		{"ca without tls.ca", edit(KeyCA, "-----BEGIN CERTIFICATE-----\n"), "key ca.pem: holds no PEM certificate"},
		{"ca the scenario does not use", edit(KeyCA, selfSigned(t)), "key ca.pem given, but the scenario names no target.tls.ca"},
		{"tls.ca without ca.pem", edit(KeyScenario, strings.Replace(testScenario, `port: "8080"}, path: /x}`, `port: "8080", scheme: https}, path: /x, tls: {ca: ca.pem}}`, 1)), "key ca.pem missing: the scenario's target.tls.ca (ca.pem) is a file on the coordinator's machine"},
		{"ca with a private key", edit(KeyCA, selfSigned(t)+testKeyPEM), "secret demo/mv, key ca.pem: PEM block 2 (EC PRIVATE KEY) holds a private key"},
		{"too large", edit("big", strings.Repeat("x", MaxDataBytes)), "bytes of data, at most 2097152"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseConfig("demo/mv", tc.data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %q", err, tc.want)
			}
			if strings.Contains(err.Error(), testKeyLine) {
				t.Fatalf("the error echoes the key: %v", err)
			}
		})
	}
}

// FuzzParseConfig: whatever a ConfigMap holds, ParseConfig returns a
// config or an error, never panics, and a config it returns can be shared
// out to every worker.
func FuzzParseConfig(f *testing.F) {
	d := goodData(f)
	f.Add(d[KeyScenario], d[KeyInventory], d[KeyRun])
	f.Add(testScenario, "[]", `{"runId":"r","workers":1000,"target":"http://a/","interval":"5m"}`)
	f.Add("", "null", "{}")
	f.Fuzz(func(t *testing.T, sc, inv, run string) {
		c, err := ParseConfig("ns/cm", map[string]string{KeyScenario: sc, KeyInventory: inv, KeyRun: run})
		if err != nil {
			return
		}
		if c.Run.Workers < 1 || c.Interval < MinInterval || c.Interval > MaxInterval || c.Scenario == nil {
			t.Fatalf("accepted %+v", c.Run)
		}
		for i := range min(c.Run.Workers, 3) {
			if _, _, err := c.Share(i); err != nil && !strings.Contains(err.Error(), "share of") {
				t.Fatalf("share %d: %v", i, err)
			}
		}
	})
}

// testKeyPEM is an EC key (generated for this test, used nowhere); its
// second line is testKeyLine, which no error may echo.
const (
	testKeyPEM = `-----BEGIN EC PRIVATE KEY-----
MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVXwXw5SUGo0d4z7SoAoGCCqGSM49
AwEHoUQDQgAEd2Ebgk5dC7hEdnUfDOqC5xYKqLMT+0xWC3H2yQ7Gq9x+0ghnf0s3
-----END EC PRIVATE KEY-----
`
	testKeyLine = "MHcCAQEEIBkg4LVWM9nuwNSk3yByxZpYRTBnVXwXw5SUGo0d4z7SoAoGCCqGSM49"
)

// MergeData keeps each key where it belongs: a scenario or a CA in the
// ConfigMap (which anyone who may view the namespace reads) is refused.
func TestMergeData(t *testing.T) {
	t.Parallel()
	good := goodData(t)
	cm, secret := SplitData(good)
	if _, ok := cm[KeyScenario]; ok || len(secret) != 1 || string(secret[KeyScenario]) != good[KeyScenario] {
		t.Fatalf("SplitData: configmap keys %v, secret keys %v", cm, secret)
	}
	merged, err := MergeData("demo/mv", cm, secret)
	if err != nil || len(merged) != len(good) || merged[KeyScenario] != good[KeyScenario] || merged[KeyRun] != good[KeyRun] {
		t.Fatalf("MergeData = %v, %v", merged, err)
	}
	for _, tc := range []struct {
		name   string
		cm     map[string]string
		secret map[string][]byte
		want   string
	}{
		{"scenario in the configmap", good, map[string][]byte{}, `configmap demo/mv: key "scenario.yaml" refused: it belongs in the Secret`},
		{"ca in the configmap", map[string]string{KeyRun: "{}", KeyInventory: "[]", KeyCA: "x"}, secret, `configmap demo/mv: key "ca.pem" refused: it belongs in the Secret`},
		{"unknown configmap key", map[string]string{KeyRun: "{}", "extra": "x"}, secret, `configmap demo/mv: key "extra" refused: want only inventory.json and run.json`},
		{"run in the secret", cm, map[string][]byte{KeyScenario: nil, KeyRun: nil}, `secret demo/mv: key "run.json" refused: want only scenario.yaml and ca.pem`},
		{"secret too large", cm, map[string][]byte{KeyScenario: make([]byte, MaxConfigMapBytes)}, "secret demo/mv: 1048589 bytes of data, at most 1048576"},
		{"configmap too large", map[string]string{KeyRun: strings.Repeat("x", MaxConfigMapBytes)}, secret, "configmap demo/mv: 1048584 bytes of data, at most 1048576"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if _, err := MergeData("demo/mv", tc.cm, tc.secret); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %q", err, tc.want)
			}
		})
	}
}

// uniqueKeys finds a key given twice in any object at any depth, and no
// other: the same key in sibling objects, in arrays, or as a value is fine.
func TestUniqueKeys(t *testing.T) {
	t.Parallel()
	for in, dup := range map[string]string{
		`{"a":1,"b":2}`:                       "",
		`{"a":{"a":1},"b":[{"a":1},{"a":2}]}`: "",
		`[{"a":1},{"a":1}]`:                   "",
		`{"a":"a","b":"a"}`:                   "",
		`{"a":[],"b":{},"c":[[{"x":1}]]}`:     "",
		`not json`:                            "",
		`{"a":1,"a":2}`:                       `"a"`,
		`{"x":{"a":1,"b":[1,2],"a":2}}`:       `"a"`,
		`[[{"k":{},"k":[]}]]`:                 `"k"`,
		`{"Kelvin":1,"kelvin":2}`:             `"kelvin"`,
		"{\"\u212aey\":1,\"key\":2}":          `"key"`, // U+212A KELVIN SIGN folds to k, as encoding/json matches it
	} {
		err := uniqueKeys([]byte(in))
		if (dup == "") != (err == nil) || dup != "" && !strings.Contains(err.Error(), "key "+dup+" given twice") {
			t.Errorf("uniqueKeys(%s) = %v, want a duplicate %s", in, err, dup)
		}
	}
}

// A start instant further ahead than --start-timeout is refused at once.
func TestParseStartAt(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	for raw, want := range map[string]string{
		"2026-12-02T12:00:01.5Z": "",
		"2026-12-02T11:00:00Z":   "", // past: start at once
		"2026-12-02T12:00:03Z":   "", // at the timeout
		"2026-12-02T12:00:04Z":   "annotation mesh-verify.io/start-at 2026-12-02T12:00:04Z is 4s from now, beyond --start-timeout 3s",
		"2099-01-01T00:00:00Z":   "beyond --start-timeout 3s",
		"tomorrow":               `annotation mesh-verify.io/start-at "tomorrow": want an RFC 3339 time`,
	} {
		_, err := parseStartAt(raw, now, 3*time.Second)
		if (want == "") != (err == nil) || want != "" && !strings.Contains(err.Error(), want) {
			t.Errorf("parseStartAt(%s) = %v, want %q", raw, err, want)
		}
	}
}

// FuzzUniqueKeys: uniqueKeys never panics, and reports a duplicate only
// in valid JSON (anything else is left to the decoder).
func FuzzUniqueKeys(f *testing.F) {
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte(`[{"a":{"b":[1,{"c":2,"C":3}]}}]`))
	f.Add([]byte(`{"a":`))
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := uniqueKeys(data); err != nil && !json.Valid(data) {
			// A duplicate before a syntax error is still a duplicate.
			if !strings.Contains(err.Error(), "given twice") {
				t.Fatalf("uniqueKeys(%q) = %v", data, err)
			}
		}
	})
}
