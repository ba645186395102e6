package scenarios

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

// want is one expected error, read from a "# want: LINE:FIELD: SUBSTRING"
// (or "# want: LINE: SUBSTRING" for whole-file problems) comment.
type want struct {
	line  int
	field string
	msg   string
}

func parseWants(t *testing.T, file string, data []byte) []want {
	t.Helper()
	var ws []want
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "# want: ")
		if !ok {
			continue
		}
		lineStr, rest, ok := strings.Cut(rest, ":")
		line, err := strconv.Atoi(lineStr)
		if !ok || err != nil {
			t.Fatalf("%s: malformed want comment %q", file, sc.Text())
		}
		w := want{line: line}
		if strings.HasPrefix(rest, " ") {
			w.msg = strings.TrimPrefix(rest, " ")
		} else {
			w.field, w.msg, _ = strings.Cut(rest, ": ")
		}
		ws = append(ws, w)
	}
	if len(ws) == 0 {
		t.Fatalf("%s: no # want: comment", file)
	}
	return ws
}

// TestBadFiles checks every testdata/bad file reports exactly the errors
// its "# want:" comments name: the intended one, and no noise.
func TestBadFiles(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/bad/*.yaml")
	if err != nil || len(files) < 20 {
		t.Fatalf("want at least 20 bad fixtures, got %d (%v)", len(files), err)
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			wants := parseWants(t, file, data)
			s, err := Load(file)
			if err == nil {
				t.Fatalf("loaded without error: %+v", s)
			}
			var errs Errors
			if !errors.As(err, &errs) {
				t.Fatalf("error is %T, want Errors: %v", err, err)
			}
			if len(errs) != len(wants) {
				t.Errorf("got %d errors, want %d:\n%v", len(errs), len(wants), err)
			}
			for _, w := range wants {
				found := false
				for _, e := range errs {
					if e.File == file && e.Line == w.line && e.Field == w.field && strings.Contains(e.Msg, w.msg) {
						found = true
						prefix := file + ":" + strconv.Itoa(w.line) + ":"
						if !strings.HasPrefix(e.Error(), prefix) {
							t.Errorf("Error() = %q, want prefix %q", e.Error(), prefix)
						}
					}
				}
				if !found {
					t.Errorf("missing %d:%s: %s\ngot:\n%v", w.line, w.field, w.msg, err)
				}
			}
		})
	}
}

func TestGoodFiles(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob("testdata/good/*.yaml")
	if len(files) < 3 {
		t.Fatalf("want at least 3 good fixtures, got %d", len(files))
	}
	for _, file := range files {
		s, err := Load(file)
		if err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if s.File != file {
			t.Errorf("%s: File = %q", file, s.File)
		}
		// What Parse returns must pass Validate, the check built-ins get.
		if err := s.Validate(); err != nil {
			t.Errorf("%s: Validate after Load: %v", file, err)
		}
	}
}

func TestFullScenario(t *testing.T) {
	t.Parallel()
	s, err := Load("testdata/good/open-loop-rate.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := s.Attack
	checks := []struct {
		name      string
		got, want any
	}{
		{"name", s.Metadata.Name, "istio-v1-only"},
		{"clusters", s.ClusterNames(), []string{"c1", "c2"}},
		{"context", s.Clusters[1].Context, "kind-c2"},
		{"url", s.Target.URL, "http://127.0.0.1:8080/caller/ping?id={{.RequestID}}"},
		{"rate", *a.Rate, Rate{Freq: 50, Per: 100 * time.Millisecond}},
		{"rate/s", a.Rate.PerSecond(), 500.0},
		{"duration", a.Duration.Duration, 90 * time.Second},
		{"requests", a.Requests, uint64(20000)},
		{"concurrency", a.Concurrency, 50},
		{"method upper-cased", a.Method, "POST"},
		{"headers", a.Headers, map[string]string{"X-Trace": "{{.RequestID}}-{{.Seq}}", "Accept": "application/json"}},
		{"body", a.Body, `{"seq": {{.Seq}}}`},
		{"timeout", a.Timeout.Duration, 2 * time.Second},
		{"keepAlive", *a.KeepAlive, false},
		{"maxConnections", a.MaxConnections, 10},
		{"http2", a.HTTP2, true},
		{"maxBody", a.MaxBody, Size(1 << 20)},
		{"requestIdHeader", a.RequestID, "X-Mesh-Verify-Id"},
		{"preset", s.Attribution.Preset, "tutorial"},
		{"rule0", s.Attribution.Rules[0], Rule{Body: `I'm callme-service (?P<version>v\d+)`, Match: "last"}},
		{"rule1", s.Attribution.Rules[1], Rule{JSON: "data.0.instance", Regex: "^(?P<pod>[a-z0-9-]+)$", Match: "first"}},
		{"map", s.Attribution.Map, []ValueMap{{From: "version", To: "cluster", Values: map[string]string{"v1": "c1", "v2": "c2"}}}},
		{"statistics", s.Statistics, Statistics{Confidence: 0.99, Power: 0.9, Margin: 0.02, Interval: "clopper-pearson", Inconclusive: "pass", Stop: "early", Looks: 5,
			Balancing: "request", BalancingReason: "no link costs declared: an HTTP balancer (Envoy sidecar or gateway) that picks a backend for every request is assumed; set statistics.balancing: connection for an L4 balancer"}},
		{"only", *s.Expect[0].Only, BucketSet{By: "cluster", Buckets: []string{"c1"}, Margin: ptr(Percent(0.01)), Source: "body"}},
		{"only name", s.Expect[0].Name, "only cluster c1"},
		{"split", *s.Expect[1].Split, Split{By: "version", Model: "weights", Weights: map[string]float64{"v1": 1, "v2": 0}, Margin: ptr(Percent(0.01)), Source: "body"}},
		{"split name", s.Expect[1].Name, "split by version (weights)"},
		{"success", s.Expect[2].SuccessRate.AtLeast, Percent(0.995)},
		{"success name", s.Expect[2].Name, "success rate ≥ 99.5%"},
		{"latency default percentile", *s.Expect[3].Latency, Latency{Percentile: 99, Below: Duration{250 * time.Millisecond}}},
		{"latency name", s.Expect[3].Name, "p99 latency < 250ms"},
		{"p50", *s.Expect[4].Latency, Latency{Percentile: 50, Below: Duration{20 * time.Millisecond}}},
		{"kinds", []string{s.Expect[0].Kind(), s.Expect[1].Kind(), s.Expect[4].Kind()}, []string{"only", "split", "latency"}},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

func TestDefaults(t *testing.T) {
	t.Parallel()
	s, err := Load("testdata/good/closed-loop-siege.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := s.Attack
	checks := []struct {
		name      string
		got, want any
	}{
		{"method", a.Method, "GET"},
		{"timeout", a.Timeout.Duration, 10 * time.Second},
		{"keepAlive", *a.KeepAlive, true},
		{"requestIdHeader", a.RequestID, "X-Request-Id"},
		{"maxBody", a.MaxBody, Size(64 << 10)},
		{"forward", *s.Target.Forward, Forward{Cluster: "c1", Namespace: "interconnect", Resource: "deploy/skupper-router", Port: "8080", Scheme: "http"}},
		{"path", s.Target.Path, "/persons"},
		{"cost", *s.Clusters[2].Cost, 1.0},
		{"match", s.Attribution.Rules[0].Match, "first"},
		{"statistics", s.Statistics, Statistics{Confidence: 0.95, Power: 0.8, Margin: 0.05, Interval: "clopper-pearson", Inconclusive: "fail", Stop: "end",
			Balancing: "connection", BalancingReason: "cluster c1 declares a link cost (Skupper): its router balances connections, and every request on a connection goes where the connection went"}},
		{"split", *s.Expect[0].Split, Split{By: "cluster", Model: "equal", Buckets: []string{"c2", "c3"}, Source: "body"}},
		{"reached by", s.Expect[1].Reached.By, "cluster"},
		{"reached name", s.Expect[1].Name, "every cluster reached"},
		{"never name", s.Expect[2].Name, "never cluster c1"},
	}
	for _, c := range checks {
		if !reflect.DeepEqual(c.got, c.want) {
			t.Errorf("%s = %#v, want %#v", c.name, c.got, c.want)
		}
	}
}

const minimal = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: m}
clusters: [{name: c1}, {name: c2}]
target: {url: "http://127.0.0.1:1/"}
attack: {rate: 10, requests: 100}
attribution: {preset: tutorial}
`

func TestDerivedNamesAndBucketDefaults(t *testing.T) {
	t.Parallel()
	s, err := Parse("m.yaml", []byte(minimal+`expect:
  - split: {weights: {c1: 1, c2: 1}}
  - split: {weights: {c1: 2, c2: 1}}
  - name: split by cluster (equal)
    split: {model: equal, margin: 1%}
  - split: {}
  - reached: {}
`))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range s.Expect {
		names = append(names, e.Name)
	}
	wantNames := []string{"split by cluster (weights)", "split by cluster (weights) #2", "split by cluster (equal)", "split by cluster (equal) #2", "every cluster reached"}
	if !reflect.DeepEqual(names, wantNames) {
		t.Errorf("names = %q, want %q", names, wantNames)
	}
	if got := s.Expect[3].Split.Buckets; !reflect.DeepEqual(got, []string{"c1", "c2"}) {
		t.Errorf("equal split buckets = %v, want every declared cluster", got)
	}
	if got := s.Expect[4].Reached.Buckets; !reflect.DeepEqual(got, []string{"c1", "c2"}) {
		t.Errorf("reached buckets = %v, want every declared cluster", got)
	}
	if *s.Attack.Rate != (Rate{Freq: 10, Per: time.Second}) {
		t.Errorf("bare rate = %v, want 10/s", *s.Attack.Rate)
	}
	before := *s
	s.ApplyDefaults()
	if !reflect.DeepEqual(before.Expect, s.Expect) || !reflect.DeepEqual(before.Statistics, s.Statistics) {
		t.Error("ApplyDefaults is not idempotent")
	}
}

// TestAllErrorsSorted checks that one pass reports every problem, in file
// order, even when decode and validation problems mix.
func TestAllErrorsSorted(t *testing.T) {
	t.Parallel()
	src := `apiVersion: mesh-verify.io/v2
kind: Scenario
metadata: {name: m}
clusters: [{name: c1}, {name: c2}]
target: {url: "http://127.0.0.1:1/"}
attack:
  rate: 10/s
  requests: 100
  timeout: soon
  colour: blue
attribution: {preset: tutorial}
expect:
  - split: {weights: {c1: 1, c3: 1}}
  - latency: {below: 0s}
`
	_, err := Parse("x.yaml", []byte(src))
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("want Errors, got %T %v", err, err)
	}
	want := []string{
		`x.yaml:1:13: apiVersion: unsupported version "mesh-verify.io/v2"`,
		`x.yaml:9:12: attack.timeout: invalid duration "soon"`,
		`x.yaml:10:3: attack.colour: unknown field; allowed: body, concurrency,`,
		`x.yaml:13:30: expect[0].split.weights.c3: unknown cluster c3 (declared: c1, c2)`,
		`x.yaml:14:22: expect[1].latency.below: required: a duration > 0`,
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(errs[i].Error(), w) {
			t.Errorf("error %d = %q, want prefix %q", i, errs[i].Error(), w)
		}
	}
	if strings.Count(err.Error(), "\n") != len(want)-1 {
		t.Errorf("Errors.Error() should put one problem per line:\n%s", err)
	}
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != "apiVersion" {
		t.Errorf("errors.As(*FieldError) = %v", fe)
	}
}

func TestInlineBad(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, expect string // YAML appended to minimal (or replacing it when it starts with apiVersion)
		want         string // "line:field: substring"
	}{
		{"unknown top-level key", "defaults: &d {by: cluster}\n", `8:defaults: unknown field`},
		{"quoted key path", "expect:\n  - split:\n      weights: {c1: 1, \"c.2\": 1}\n", `10:expect[0].split.weights["c.2"]: unknown cluster c.2`},
		{"reached margin", "expect:\n  - reached: {buckets: [c1], margin: 1%}\n", `9:expect[0].reached.margin: margin applies to only and never`},
		{"pods with weights", "expect:\n  - split: {weights: {c1: 1}, pods: {c1: 1}}\n", `9:expect[0].split.pods: pods apply to models`},
		{"equal by version needs buckets", "expect:\n  - split: {by: version}\n", `9:expect[0].split.buckets: equal by version needs the versions`},
		{"all weights zero", "expect:\n  - split: {weights: {c1: 0, c2: 0}}\n", `9:expect[0].split.weights: all weights are zero`},
		{"weights on equal", "expect:\n  - split: {model: equal, weights: {c1: 1}}\n", `9:expect[0].split.weights: weights apply to model weights, not equal`},
		{"only without buckets", "expect:\n  - only: {by: pod}\n", `9:expect[0].only.buckets: required: at least one pod`},
		{"inverse zero cost", "expect:\n  - split: {model: link-cost-inverse, pods: {c1: 1, c2: 1}}\n", `4:clusters[0].cost: required by expect[0].split (link-cost-inverse)`},
		{"minimal passes", "expect:\n  - successRate: {atLeast: 99%}\n", ""},
		{"percent above 100", "expect:\n  - successRate: {atLeast: 120%}\n", `9:expect[0].successRate.atLeast: percentage "120%" is outside 0%..100%`},
		{"string for list", "expect: split\n", `8:expect: want a list, got string "split"`},
		{"list for string", "expect:\n  - name: [a]\n    successRate: {atLeast: 99%}\n", `9:expect[0].name: want a string, got a list`},
		{"uint negative", "expect:\n  - successRate: {atLeast: 99%}\nstatistics: {looks: -1, stop: early}\n", `10:statistics.looks: want 2..20 interim looks, got -1`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src := minimal + c.expect
			if !strings.Contains(c.expect, "expect:") {
				src += "expect:\n  - successRate: {atLeast: 99%}\n"
			}
			_, err := Parse("i.yaml", []byte(src))
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "i.yaml:"+strings.SplitN(c.want, ":", 2)[0]+":") ||
				!strings.Contains(err.Error(), strings.SplitN(c.want, ":", 2)[1]) {
				t.Fatalf("got:\n%v\nwant: %s", err, c.want)
			}
		})
	}
}

func TestAliasesAndMerge(t *testing.T) {
	t.Parallel()
	s, err := Parse("a.yaml", []byte(minimal+`expect:
  - only: &set
      buckets: [c1]
  - never:
      <<: *set
      buckets: [c2]
  - reached: *set
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Expect[1].Never.Buckets; !reflect.DeepEqual(got, []string{"c2"}) {
		t.Errorf("merge: never buckets = %v, want [c2] (explicit key wins)", got)
	}
	if got := s.Expect[2].Reached.Buckets; !reflect.DeepEqual(got, []string{"c1"}) {
		t.Errorf("alias: reached buckets = %v", got)
	}
}

func TestLoadMissingFile(t *testing.T) {
	t.Parallel()
	_, err := Load("testdata/no-such-file.yaml")
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("want fs.ErrNotExist through the error, got %v", err)
	}
	if !strings.HasPrefix(err.Error(), "testdata/no-such-file.yaml: cannot read scenario") {
		t.Errorf("message = %q", err)
	}
}

func TestSyntaxErrorLines(t *testing.T) {
	t.Parallel()
	// yaml.v3 numbers parser-error lines from 0; Parse corrects that.
	cases := map[string]int{
		"a: 1\nb: [1\nc: 2\n":         2,
		"a: 1\nb: 'x' y\n":            2,
		"a: 1\nb:\n  - x\n y: 1\n":    4,
		"a: 1\nb: c: d\n":             2,
		"apiVersion: x\n\tkind: y\n":  2,
		"a: 1\nb: @x\n":               2,
		"apiVersion: [\n":             2,
		"kind: Scenario\n%YAML 1.1\n": 3, // where --- was expected
		// yaml.v3 gives these no line at all; Parse finds it.
		"a: &nopey 1\nb: 2\nc: [*nope]\n": 3,
		"a: 1\nb: \"x\x00\"\n":            2,
		"a: 1\nb: 2\nc: \"\xff\xfe\"\n":   3,
	}
	for src, line := range cases {
		_, err := Parse("s.yaml", []byte(src))
		var errs Errors
		if !errors.As(err, &errs) || len(errs) != 1 || !strings.Contains(errs[0].Msg, "invalid YAML") {
			t.Errorf("%q: want one syntax error, got %v", src, err)
			continue
		}
		if errs[0].Line != line {
			t.Errorf("%q: line %d, want %d (%v)", src, errs[0].Line, line, err)
		}
	}
}

// statistics.balancing defaults to connection where Skupper is in play (a
// declared link cost), else to request, and says why.
func TestBalancingDefault(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, doc, want, reason string
	}{
		{"no costs", minimal + "expect: [{split: {model: equal}}]\n", "request", "no link costs declared"},
		{"set", minimal + "statistics: {balancing: connection}\nexpect: [{split: {model: equal}}]\n", "connection", "set by statistics.balancing"},
		{"a cost", strings.Replace(minimal, "{name: c1}", "{name: c1, cost: 0}", 1) + "expect: [{split: {model: equal}}]\n", "connection", "cluster c1 declares a link cost"},
		{"minShare", minimal + "expect: [{reached: {minShare: 1%}}]\n", "request", ""},
	} {
		s, err := Parse("b.yaml", []byte(c.doc))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if s.Statistics.Balancing != c.want || !strings.Contains(s.Statistics.BalancingReason, c.reason) {
			t.Errorf("%s: balancing %q (%s), want %q mentioning %q", c.name, s.Statistics.Balancing, s.Statistics.BalancingReason, c.want, c.reason)
		}
	}
}

// Hostile documents cost bounded work: merges of merges (a 1 KiB "billion
// laughs" through `<<`), plain alias fan-out, and a file that never ends.
func TestHostileDocumentsAreBounded(t *testing.T) {
	t.Parallel()
	var bomb strings.Builder
	bomb.WriteString("l0: &l0 {x: 1}\n")
	for i := 1; i <= 11; i++ {
		fmt.Fprintf(&bomb, "l%d: &l%d\n  <<: [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*l%d, ", i-1), 10), ", "))
	}
	mergeBomb := bomb.String() + "<<: *l11\n" + minimal
	if len(mergeBomb) > 2<<10 {
		t.Fatalf("the bomb is %d bytes", len(mergeBomb))
	}
	done := make(chan error, 1)
	go func() { _, err := Parse("bomb.yaml", []byte(mergeBomb)); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "more than a million values") {
			t.Errorf("merge bomb: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the merge-key bomb is still being expanded after 20 s")
	}

	_, err := Load("/dev/zero")
	if err == nil || !strings.Contains(err.Error(), "/dev/zero is not a regular file (a character device): want a scenario file") {
		t.Errorf("/dev/zero: %v", err)
	}
}

// BenchmarkParseManyExpectations shows loading is linear in the number of
// expectations (ns/op per size grows like n): derived names that repeat
// used to be numbered by a search from #2 each time, n²/2 steps.
func BenchmarkParseManyExpectations(b *testing.B) {
	for _, n := range []int{1_000, 10_000, 100_000} {
		var doc strings.Builder
		doc.WriteString(minimal + "expect:\n")
		for range n {
			doc.WriteString("  - split: {weights: {c1: 1, c2: 1}}\n")
		}
		data := []byte(doc.String())
		if n == 100_000 && len(data) > MaxFileSize {
			// Beyond the file limit, but Parse (data in memory) still
			// shows the growth.
			b.Logf("%d expectations are %d KiB", n, len(data)>>10)
		}
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			for b.Loop() {
				if _, err := Parse("many.yaml", data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// Values beyond what a run can carry are refused with the field named,
// and a fraction is not silently cut to a whole number (concurrency: 2.7
// used to run 2 workers).
func TestAttackBounds(t *testing.T) {
	t.Parallel()
	doc := func(attack, weights string) string {
		return strings.Replace(minimal, "attack: {rate: 10, requests: 100}", "attack: {"+attack+"}", 1) +
			"expect:\n  - split: {weights: {" + weights + "}}\n"
	}
	cases := []struct{ attack, weights, want string }{
		{"concurrency: 2.7, duration: 5s", "c1: 1, c2: 1", "attack.concurrency: want a whole number, got number 2.7"},
		{"concurrency: 1000000000000, duration: 5s", "c1: 1, c2: 1", "attack.concurrency: want a number of workers from 1 to 10000"},
		{"concurrency: 10000, duration: 5s", "c1: 1, c2: 1", ""},
		{"rate: 10, requests: 18446744073709551616", "c1: 1, c2: 1", "attack.requests: want a whole number ≥ 0"},
		{"rate: 10, requests: 1000000001", "c1: 1, c2: 1", "attack.requests: want at most 1000000000 requests"},
		{"rate: 9223372036854775807/ns, duration: 5s", "c1: 1, c2: 1", "attack.rate: want at most 1000000/s"},
		{"rate: 1000000/s, duration: 5s", "c1: 1, c2: 1", ""},
		{"ramp: {from: 1/s, to: 2000000/s, duration: 5s}", "c1: 1, c2: 1", "attack.ramp.to: want at most 1000000/s"},
		{"rate: 10, duration: 25h", "c1: 1, c2: 1", "attack.duration: want at most 24h0m0s"},
		{"rate: 10, duration: 5s, connections: 2.5", "c1: 1, c2: 1", "attack.connections: want a whole number"},
		{"rate: 10, duration: 5s, connections: 20000", "c1: 1, c2: 1", "attack.connections: want at most 10000"},
		{"rate: 10, duration: 5s, maxBody: 1GiB", "c1: 1, c2: 1", "attack.maxBody: want at most 64MiB"},
		{"rate: 10, duration: 5s, timeout: 1h", "c1: 1, c2: 1", "attack.timeout: want at most 10m0s"},
		{"rate: 10, duration: 5s", "c1: 1e308, c2: 1", "expect[0].split.weights.c1: want a weight from 0 to 1e+09, got 1e+308"},
		{"rate: 10, duration: 5s", "c1: .inf, c2: 1", "expect[0].split.weights.c1: want a weight from 0 to 1e+09"},
		{"rate: 10, duration: 5s", "c1: 1000000000, c2: 1", ""},
	}
	for _, c := range cases {
		t.Run(c.attack+" "+c.weights, func(t *testing.T) {
			_, err := Parse("b.yaml", []byte(doc(c.attack, c.weights)))
			switch {
			case c.want == "" && err != nil:
				t.Errorf("unexpected error: %v", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("got %v\nwant %q", err, c.want)
			}
		})
	}
}

func TestTargetTLSFields(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ target, want string }{
		{`{url: "http://127.0.0.1:1/", tls: {ca: ca.pem}}`, "target.tls: tls applies to an https target"},
		{`{url: "https://127.0.0.1:1/", tls: {ca: ca.pem, insecureSkipVerify: true}}`, "target.tls.insecureSkipVerify: insecureSkipVerify accepts any certificate"},
		{`{url: "https://127.0.0.1:1/", tls: {ca: ca.pem, serverName: callme.demo}}`, ""},
		{`{url: "https://127.0.0.1:1/", tls: {insecureSkipVerify: true}}`, ""},
		{`{url: "https://127.0.0.1:1/", tls: {insecure: true}}`, "target.tls.insecure: unknown field"},
	} {
		src := strings.Replace(minimal, `target: {url: "http://127.0.0.1:1/"}`, "target: "+c.target, 1) + "expect:\n  - successRate: {atLeast: 99%}\n"
		_, err := Parse("t.yaml", []byte(src))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.target, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: got %v, want %q", c.target, err, c.want)
		}
	}
}

func TestGRPCFields(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ target, grpc, want string }{
		{`{url: "http://127.0.0.1:1"}`, `{method: /grpc.health.v1.Health/Check}`, ""},
		{`{url: "http://127.0.0.1:1"}`, `{method: grpc.health.v1.Health/Check}`, "attack.grpc.method: want /package.Service/Method"},
		{`{url: "http://127.0.0.1:1/x"}`, `{method: /grpc.health.v1.Health/Check}`, "target.url: with attack.grpc the path is the method"},
	} {
		src := strings.Replace(strings.Replace(minimal, `target: {url: "http://127.0.0.1:1/"}`, "target: "+c.target, 1),
			"attack: {rate: 10, requests: 100}", "attack: {rate: 10, requests: 100, grpc: "+c.grpc+"}", 1) + "expect:\n  - successRate: {atLeast: 99%}\n"
		_, err := Parse("g.yaml", []byte(src))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: unexpected error %v", c.grpc, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: got %v, want %q", c.target, c.grpc, err, c.want)
		}
	}
}

// Issue 21 item 2: a port-forward enters a pod past its outbound sidecar,
// where Istio and Kuma split by version or cluster, so a scenario that
// port-forwards to a client pod gets a warning naming the way in from
// inside the mesh; a gateway, workers, or a mesh without sidecars do not.
func TestPortForwardPastSidecarWarning(t *testing.T) {
	t.Parallel()
	const base = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: t}
clusters: [{name: c1, context: kind-c1}, {name: c2, context: kind-c2}]
target: {portForward: {cluster: c1, namespace: sample, resource: RESOURCE, port: "5000"}, path: /hello}
attack: ATTACK
attribution: {preset: PRESET}
observe: [{name: helloworld, namespace: sample, selector: app=helloworld}]
expect: [{name: half, split: {by: BY, weights: {v1: 1, v2: 1}}}]
`
	for _, c := range []struct {
		name, resource, attack, preset, by string
		warn                               bool
	}{
		{"istio client pod by version", "svc/sleep", "{concurrency: 2, repetitions: 10}", "istio-helloworld", "version", true},
		{"kuma by version", "svc/sleep", "{concurrency: 2, repetitions: 10}", "kuma-test-server", "version", true},
		{"ingress gateway", "svc/istio-ingressgateway", "{concurrency: 2, repetitions: 10}", "istio-helloworld", "version", false},
		{"workers inside the mesh", "svc/sleep", "{concurrency: 2, repetitions: 10, workers: 2, from: c1}", "istio-helloworld", "version", false},
		{"no sidecar mesh", "svc/sleep", "{concurrency: 2, repetitions: 10}", "tutorial", "version", false},
		{"by pod", "svc/sleep", "{concurrency: 2, repetitions: 10}", "istio-helloworld", "pod", false},
		// The port-forward picks one pod of the observed service itself.
		{"the split service", "svc/helloworld", "{concurrency: 2, repetitions: 10}", "istio-helloworld", "version", true},
		// A caller that calls the split service through its own sidecar.
		{"a calling app", "svc/caller-service", "{concurrency: 2, repetitions: 10}", "istio-helloworld", "version", false},
		// Its own outbound log observed: still the caller, not the split service.
		{"a calling app observed", "svc/caller-service", "{concurrency: 2, repetitions: 10}", "istio-helloworld", "version", false},
		// Cilium's x-wing: the split is made in the client's node.
		{"cilium client pod", "svc/x-wing", "{concurrency: 2, repetitions: 10}", "cilium-rebel-base", "cluster", true},
		{"cilium from workers", "svc/x-wing", "{concurrency: 2, repetitions: 10, workers: 2, from: c1}", "cilium-rebel-base", "cluster", false},
	} {
		src := strings.NewReplacer("RESOURCE", c.resource, "ATTACK", c.attack, "PRESET", c.preset, "BY", c.by).Replace(base)
		if c.name == "a calling app observed" {
			src = strings.Replace(src, "observe: [", "observe: [{name: caller, selector: app=caller-service, logs: {preset: istio-proxy-outbound}}, ", 1)
		}
		if c.by == "cluster" {
			src = strings.Replace(src, "weights: {v1: 1, v2: 1}", "model: equal", 1)
		}
		if c.by == "pod" {
			src = strings.Replace(src, "weights: {v1: 1, v2: 1}", "model: equal-per-pod, pods: {c1: 1, c2: 1}", 1)
		}
		sc, err := Parse("t.yaml", []byte(src))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		w := sc.Warnings()
		if got := len(w) > 0; got != c.warn {
			t.Errorf("%s: warnings %q, want a warning: %v", c.name, w, c.warn)
			continue
		}
		past := "outbound sidecar"
		if strings.HasPrefix(c.preset, "cilium") {
			past = "Cilium decides"
		}
		if c.warn && !(strings.Contains(w[0], c.resource) && strings.Contains(w[0], past) &&
			strings.Contains(w[0], "attack.workers") && strings.Contains(w[0], "ingress gateway") && strings.Contains(w[0], "by "+c.by)) {
			t.Errorf("%s: warning %q does not say what to do", c.name, w[0])
		}
	}
}
