package measure

import (
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

func TestBehindRateSaysWhy(t *testing.T) {
	base := attack.Summary{RequestedRate: 20, Requests: 60, Elapsed: 58 * time.Second, AchievedRate: 60.0 / 58}
	slowSink := base
	slowSink.Attributing = 57 * time.Second
	slowTarget := base
	slowTarget.Attributing = 30 * time.Millisecond
	onRate := base
	onRate.AchievedRate, onRate.Elapsed = 19.5, 3*time.Second
	interrupted := slowSink
	interrupted.Interrupted = true
	closedLoop := slowSink
	closedLoop.RequestedRate = 0
	rules := queueStats{attributed: 60, attributing: 60 * 250 * time.Millisecond}
	for _, c := range []struct {
		name string
		sum  attack.Summary
		qs   queueStats
		want string
	}{
		{"slow collector", slowSink, queueStats{}, "counting and recording them"},
		{"slow target", slowTarget, queueStats{}, "answered too slowly"},
		{"slow target, rules timed", slowTarget, rules, "took 250ms per response"},
		{"on rate", onRate, rules, ""},
		{"interrupted", interrupted, queueStats{}, ""},
		{"closed loop", closedLoop, queueStats{}, ""},
	} {
		got := behindRate(c.sum, c.qs)
		if c.want == "" && got != "" || c.want != "" && !strings.Contains(got, c.want) {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}

// The progress line names clusters taken from responses: escaped, and only
// the largest few.
func TestProgressLineIsEscapedAndBounded(t *testing.T) {
	start := time.Now()
	tl := tally.New(start, time.Minute)
	for i := range 20 {
		name := fmt.Sprintf("c%02d", i)
		if i == 0 {
			name = "c\x1b[2J\x1b]0;owned\a"
		}
		for range 20 - i {
			tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}}, attribution.Identity{Cluster: name})
		}
	}
	got := line(tl, start, attack.Options{})
	if strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, `c\u001b[2J`) || !strings.Contains(got, "(+12 more)") || strings.Contains(got, "c19") {
		t.Errorf("progress line %q", got)
	}
}

// sinkScenario attributes a body's pod and cluster, as the demo's
// callme-service says them.
func sinkScenario(t testing.TB) *scenarios.Scenario {
	t.Helper()
	sc, err := scenarios.Parse("sink.yaml", []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: sink}
clusters: [{name: c1}, {name: c2}]
target: {url: "http://127.0.0.1:1/"}
attack: {concurrency: 1, requests: 1}
attribution:
  rules: [{body: 'pod (?P<pod>\S+) in (?P<cluster>c\d)'}]
statistics: {confidence: 0.95}
expect:
  - split: {model: equal}
`))
	if err != nil {
		t.Fatal(err)
	}
	return sc
}

// BenchmarkSink is the cost of one result on the fast path (a cheap rule
// on a short body): "inline" attributes, counts and records on the
// results loop as the runner did before the attribution queue; "queue"
// hands it to the workers and the collector (measure/sink.go). ns/op is
// what the results loop spends per result, cpu-ns/op what the whole
// process spends (workers and collector included).
func BenchmarkSink(b *testing.B) {
	sc := sinkScenario(b)
	body := []byte("I'm callme-service v1 (pod callme-c2-0 in c2)")
	for _, mode := range []string{"inline", "queue", "inline", "queue"} {
		b.Run(mode, func(b *testing.B) {
			attr, err := attributor(sc)
			if err != nil {
				b.Fatal(err)
			}
			start := time.Now()
			tl := tally.New(start, 15*time.Second)
			var s *sink
			if mode == "inline" {
				s = &sink{attr: attr, tally: tl, codes: sc.Attack.SuccessCodes, runID: "bench"}
			} else {
				s = newSink(attr, tl, sc.Attack.SuccessCodes, "bench", nil, Queue{})
				s.start()
			}
			b.ReportAllocs()
			cpu := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				s.Add(&attack.Result{Result: &vegeta.Result{Seq: uint64(i), Code: 200, Timestamp: start.Add(time.Duration(i) * 50 * time.Microsecond),
					Latency: time.Millisecond, Body: body, Method: "GET"}, RequestID: "bench-" + strconv.Itoa(i), ConnID: uint64(1 + i%10)})
			}
			s.close()
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu)/float64(b.N), "cpu-ns/op")
			if got := tl.Snapshot().Total; got != int64(b.N) {
				b.Fatalf("%d counted of %d", got, b.N)
			}
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
