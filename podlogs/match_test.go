package podlogs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestRuleMatch(t *testing.T) {
	r := Rule{Regex: regexp.MustCompile(`rid=(?P<rid>\S+) host=(?P<host>\S+)(?: pod=(?P<pod>\S+))?`)}
	l := Line{Target: target("a"), Time: t0, Text: "GET /x rid=run-3 host=reviews-shadow:9080"}
	m, ok := r.Match(l)
	if !ok || m.RequestID != "run-3" || !m.Shadow || m.Fields["host"] != "reviews-shadow:9080" || m.Line != l {
		t.Fatalf("%+v %v", m, ok)
	}
	if _, has := m.Fields["pod"]; has {
		t.Error("an empty group is not a field")
	}
	if _, ok := r.Match(Line{Text: "healthz"}); ok {
		t.Error("matched a line without the pattern")
	}
	r.Targets = func(t Target) bool { return t.Container == "istio-proxy" }
	if _, ok := r.Match(l); ok {
		t.Error("Targets ignored")
	}
	envoy := Rule{Regex: regexp.MustCompile(`"(?P<authority>[^"]*)" "(?P<request_id>[^"]*)"$`)}
	m, ok = envoy.Match(Line{Text: `[2026-01-02T03:04:05.000Z] "GET /reviews/0 HTTP/1.1" 200 - "reviews:9080" "run-9"`})
	if !ok || m.RequestID != "run-9" || m.Shadow {
		t.Errorf("%+v", m)
	}
	for host, want := range map[string]bool{
		"reviews-shadow":               true,
		"reviews-shadow:9080":          true, // Envoy since 2018: before the port
		"reviews:9080-shadow":          true, // before that: after it
		"reviews.default.svc-shadow":   true,
		"[::1]-shadow:80":              false,
		"shadow":                       false,
		"reviews":                      false,
		"reviews:9080":                 false,
		"reviews-shadowed:9080":        false,
		"reviews.default-shadow.svc:1": false,
	} {
		if IsShadowHost(host) != want {
			t.Errorf("IsShadowHost(%q) = %v", host, !want)
		}
	}
}

func TestParseRequestID(t *testing.T) {
	for _, c := range []struct {
		run, id string
		seq     uint64
		ok      bool
	}{
		{"run7", "run7-0", 0, true},
		{"run7", "run7-123456", 123456, true},
		{"2026-01-02-abc", "2026-01-02-abc-5", 5, true},
		{"run7", "run77-3", 0, false},
		{"run7", "run7-", 0, false},
		{"run7", "run7-+3", 0, false},
		{"run7", "run7-3-4", 0, false},
		{"run7", "run6-3", 0, false},
		// Distributed workers: the index goes above the 48 bits of seq.
		{"run7", "run7-w0-0", 1 << 48, true},
		{"run7", "run7-w0-5", 1<<48 + 5, true},
		{"run7", "run7-w3-17", 4<<48 + 17, true},
		{"run7", "run7-w65534-1", 65535<<48 + 1, true},
		{"run7", "run7-w65535-1", 0, false},
		{"run7", "run7-w1-281474976710656", 0, false}, // 2^48
		{"run7", "run7-w-1", 0, false},
		{"run7", "run7-w+1-1", 0, false},
		{"run7", "run7-w1-+1", 0, false},
		{"run7", "run7-w1", 0, false},
		{"run7", "run7-w1-2-3", 0, false},
		{"run7", "run7-x1-2", 0, false},
		{"run7-w1", "run7-w1-9", 9, true},          // a worker's own prefix
		{"run7", "run7-281474976710661", 0, false}, // 2^48+5 would be worker 0's seq 5
	} {
		seq, ok := ParseRequestID(c.run, c.id)
		if seq != c.seq || ok != c.ok {
			t.Errorf("ParseRequestID(%q, %q) = %d, %v", c.run, c.id, seq, ok)
		}
	}
}

func TestSeqSetMatchesAMapAndStaysSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 5))
	var a, b seqSet
	ma, mb := map[uint64]bool{}, map[uint64]bool{}
	for range 50000 {
		x, y := rng.Uint64N(200000), rng.Uint64N(200000)
		if a.add(x) == ma[x] {
			t.Fatalf("add(%d) disagrees with the map", x)
		}
		ma[x] = true
		b.add(y)
		mb[y] = true
	}
	b.add(1 << 62) // a stray huge number costs one page
	mb[1<<62] = true
	both := 0
	for x := range ma {
		if mb[x] {
			both++
		}
		if !a.has(x) {
			t.Fatalf("lost %d", x)
		}
	}
	seen := 0
	b.each(func(x uint64) {
		if !mb[x] {
			t.Fatalf("each gave %d", x)
		}
		seen++
	})
	if seen != len(mb) {
		t.Errorf("each gave %d of %d", seen, len(mb))
	}
	if a.n != len(ma) || b.n != len(mb) || intersect(&a, &b) != both || intersect(&b, &a) != both {
		t.Errorf("sizes %d/%d %d/%d, intersection %d, want %d", a.n, len(ma), b.n, len(mb), intersect(&a, &b), both)
	}

	// A million requests in one pod's log: about n/8 bytes.
	var big seqSet
	for i := range uint64(1_000_000) {
		big.add(i)
	}
	if bytes := len(big.pages) * pageWords * 8; bytes > 1_000_000/8+512 {
		t.Errorf("%d bytes for a million requests", bytes)
	}
}

// TestMirrorShareFromLogs runs the whole path on constructed logs: two
// primary pods log the request ids they serve, the mirror target's sidecar
// logs the copies with Envoy's -shadow host, a third app logs no id. The
// Follower reads the CRI files, the rules match, the Counter joins.
func TestMirrorShareFromLogs(t *testing.T) {
	checkGoroutines(t)
	const run = "run-7"
	o := newFileOpener()
	dir := t.TempDir()
	pa, pb := target("productpage-a"), target("productpage-b")
	mirror := Target{Cluster: "c2", Namespace: "ns", Pod: "reviews-v2-x", Container: "istio-proxy"}
	noid := Target{Cluster: "c2", Namespace: "ns", Pod: "legacy-0", Container: "app"}
	logs := map[Target]*podLog{}
	for i, tg := range []Target{pa, pb, mirror, noid} {
		logs[tg] = newPodLog(t, fmt.Sprintf("%s/%d", dir, i))
		o.add(tg, logs[tg])
	}
	start := t0.Add(10 * time.Second)
	end := start.Add(20 * time.Second)
	ts := func(s float64) time.Time { return start.Add(time.Duration(s * float64(time.Second))) }
	rec := func(tg Target, at time.Time, text string) { logs[tg].append(criRecord(at, "stdout", false, text)) }

	// 20 primaries, even seqs at a, odd at b; 10 of them mirrored.
	mirrored := []int{0, 1, 3, 4, 7, 9, 12, 13, 16, 19}
	for seq := range 20 {
		tg := pa
		if seq%2 == 1 {
			tg = pb
		}
		rec(tg, ts(float64(seq)/2), fmt.Sprintf("GET /productpage rid=%s-%d host=productpage:9080 pod=%s", run, seq, tg.Pod))
		if slices.Contains(mirrored, seq) {
			rec(mirror, ts(float64(seq)/2+0.01), fmt.Sprintf(`[access] "GET /productpage HTTP/1.1" 200 "productpage-shadow:9080" "%s-%d"`, run, seq))
		}
	}
	rec(pa, ts(11), fmt.Sprintf("GET /productpage rid=%s-4 host=productpage:9080 pod=%s", run, pa.Pod)) // logged twice
	rec(pa, ts(11.5), "GET /productpage rid=20260102T030405Z-abcdef-4 host=productpage:9080 pod=x")     // another run
	rec(pa, ts(12), "GET /healthz")                                                                     // no rule
	for i, at := range []float64{-3, 0.5, 1, 2, 3, 4, 25, 26} {
		rec(noid, ts(at), fmt.Sprintf("served request %d", i))
	}

	f := NewFollower(o, Options{Since: start.Add(-5 * time.Second), Settle: 50 * time.Millisecond, RetryBackoff: 5 * time.Millisecond, Format: FormatCRI})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for tg := range logs {
		f.Follow(ctx, tg)
	}
	rules := []Rule{
		{Regex: regexp.MustCompile(`rid=(?P<rid>\S+) host=(?P<host>\S+) pod=(?P<pod>\S+)`)},
		{Regex: regexp.MustCompile(`"(?P<authority>[^"]*)" "(?P<request_id>[^"]*)"$`), Targets: func(t Target) bool { return t.Container == "istio-proxy" }},
		{Regex: regexp.MustCompile(`^served request`)},
	}
	c := NewCounter(CounterOptions{RunID: run})
	w := Window{From: start.Add(-time.Second), To: end.Add(2 * time.Second)}
	counted := make(chan struct{})
	go func() {
		defer close(counted)
		for l := range f.Lines() {
			for _, r := range rules {
				if m, ok := r.Match(l); ok {
					c.Add(m)
					break
				}
			}
		}
	}()
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	<-counted

	tot := c.Totals(w)
	if tot.Requests != 20 || tot.Mirrored != 10 || tot.MirroredServed != 10 || tot.MultiPod != 0 || tot.DataPlanePrimaries != 0 {
		t.Errorf("totals %+v", tot)
	}
	servedBy := map[uint64]Target{}
	c.EachServed(func(seq uint64, tg Target) { servedBy[seq] = tg })
	for seq := range uint64(20) {
		if want := []Target{pa, pb}[seq%2]; servedBy[seq] != want {
			t.Errorf("EachServed: %d by %v, want %v", seq, servedBy[seq], want)
		}
	}
	if len(servedBy) != 20 {
		t.Errorf("EachServed gave %d requests", len(servedBy))
	}
	if q := float64(tot.MirroredServed) / float64(tot.Requests); q != 0.5 {
		t.Errorf("mirror share %v, want 0.5", q)
	}
	pods := c.Pods(w)
	want := map[Target]PodCount{
		pa:     {Lines: 11, Requests: 10, Duplicates: 1, Foreign: 1},
		pb:     {Lines: 10, Requests: 10},
		mirror: {Lines: 10, Mirrored: 10},
		noid:   {Lines: 8, WithoutID: 8, Served: ClassCount{Window: 5}, OutsideWindow: 3},
	}
	for tg, w := range want {
		if pods[tg] != w {
			t.Errorf("%s: %+v, want %+v", tg, pods[tg], w)
		}
	}
	if s := c.Served(7); len(s) != 1 || s[0] != pb {
		t.Errorf("request 7 served by %v", s)
	}
	if !c.MirroredSeen(12) || c.MirroredSeen(2) {
		t.Error("MirroredSeen")
	}
}

// A request two pods of one group answered with no failed attempt is no
// retry (Envoy retries after a failure): an unmarked mirrored copy (Istio
// ≥ 1.28 drops "-shadow"). It is counted once, for the first, and
// reported as doubled; a mirror predicate by target replaces the marker.
func TestCounterRetriesAndMirrorByTarget(t *testing.T) {
	t.Parallel()
	mirrorPod := target("v2")
	c := NewCounter(CounterOptions{RunID: "r", Mirror: func(m Match) bool { return m.Line.Target == mirrorPod }})
	add := func(tg Target, id string) { c.Add(Match{Line: Line{Target: tg, Time: t0}, RequestID: id}) }
	add(target("a"), "r-1")
	add(target("b"), "r-1")
	add(target("a"), "r-2")
	add(mirrorPod, "r-2")
	add(mirrorPod, "r-3") // a copy whose primary is not in the logs
	if tot := c.Totals(Window{}); tot != (Totals{Requests: 2, Mirrored: 2, MirroredServed: 1, MultiPod: 1, Doubled: 1, Attempts: 1}) {
		t.Errorf("%+v", tot)
	}
	if s := c.Served(1); len(s) != 2 {
		t.Errorf("served by %v", s)
	}
	n := 0
	c.EachServed(func(seq uint64, tg Target) {
		if seq == 1 {
			n++
			if tg != target("a") {
				t.Errorf("request 1 counted for %v, want the first pod", tg)
			}
		}
	})
	if n != 1 {
		t.Errorf("request 1 counted %d times", n)
	}
}

// Envoy retries a request with its x-request-id unchanged, and each
// attempt that reached a pod is a line in that pod's inbound access log
// (Istio's TEXT format; the lines are the istio.io access-log task's,
// testdata/README.md, with status, pod and id changed to play a retry).
// One request is one count, for the attempt that answered; an attempt
// that failed before one that succeeded is no error. The same id logged
// by two workloads (an app that forwards it) is two requests.
func TestCounterCountsARetriedRequestOnce(t *testing.T) {
	t.Parallel()
	p, err := LookupPreset("istio-proxy")
	if err != nil {
		t.Fatal(err)
	}
	rule := NewRule(regexp.MustCompile(p.Match))
	line := func(status, id, pod string) string {
		return fmt.Sprintf(`[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" %s - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "%s" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 %s:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default`, status, id, pod)
	}
	a, b, other := target("httpbin-a"), target("httpbin-b"), target("frontend-0")
	group := map[Target]string{a: "httpbin", b: "httpbin", other: "frontend"}
	for _, run := range []struct {
		name string
		id   func(i int) string
	}{
		{"data plane's ids", func(i int) string { return fmt.Sprintf("84961386-6d84-929d-98bd-c5aee93b5c%02d", i) }},
		{"the run's ids", func(i int) string { return fmt.Sprintf("r-%d", i) }},
	} {
		t.Run(run.name, func(t *testing.T) {
			t.Parallel()
			c := NewCounter(CounterOptions{RunID: "r", Success: func(s int) bool { return s < 500 },
				Group: func(m Match) string { return group[m.Line.Target] }})
			add := func(tg Target, at time.Duration, status string, i int) {
				m, ok := rule.Match(Line{Target: tg, Time: t0.Add(at), Text: line(status, run.id(i), tg.Pod)})
				if !ok {
					t.Fatalf("preset does not match %q", line(status, run.id(i), tg.Pod))
				}
				c.Add(m)
			}
			// 0: answered by a first try. 1: a 503 at a, retried to b,
			// which answers. 2: answered at b, then (lines in any order)
			// its failed first try at a. 3: failed at a and b: a failure.
			// 4: answered at a and logged by the frontend too.
			add(a, 0, "418", 0)
			add(a, 100*time.Millisecond, "503", 1)
			add(b, 150*time.Millisecond, "418", 1)
			add(b, 300*time.Millisecond, "418", 2)
			add(a, 250*time.Millisecond, "503", 2)
			add(a, 400*time.Millisecond, "503", 3)
			add(b, 450*time.Millisecond, "503", 3)
			add(a, 500*time.Millisecond, "418", 4)
			add(other, 500*time.Millisecond, "418", 4)
			w := Window{From: t0.Add(-time.Second), To: t0.Add(10 * time.Second)}
			pods := c.Pods(w)
			served := func(tg Target) int { return pods[tg].Requests + int(pods[tg].Served.Window) }
			failed := func(tg Target) int { return pods[tg].Failed + int(pods[tg].Errors.Window) }
			if served(a) != 2 || served(b) != 2 || served(other) != 1 {
				t.Errorf("served a %d b %d frontend %d, want 2 2 1", served(a), served(b), served(other))
			}
			// Request 3 failed at both: one failure, at whichever pod
			// holds it; its other line is an attempt.
			if failed(a)+failed(b) != 1 {
				t.Errorf("failed a %d + b %d, want 1", failed(a), failed(b))
			}
			tot := c.Totals(w)
			if tot.Retried != 3 || tot.Attempts != 3 {
				t.Errorf("retried %d attempts %d, want 3 3 (%+v)", tot.Retried, tot.Attempts, tot)
			}
		})
	}
}

// Keys of a worker's ids and of a single process's never meet: whether a
// key carries a worker is read from the id's text here, not from the
// parser, and a key parses back from its canonical id.
func FuzzParseRequestID(f *testing.F) {
	for _, s := range []string{"run7-0", "run7-w3-17", "run7-w65534-1", "run7-w-1", "run7-+3", "run7-w1-2-3", "run7-281474976710661"} {
		f.Add("run7", s)
	}
	f.Fuzz(func(t *testing.T, run, id string) {
		key, ok := ParseRequestID(run, id)
		if !ok {
			return
		}
		rest := strings.TrimPrefix(id, run+"-")
		if fromWorker := strings.HasPrefix(rest, "w"); fromWorker != (key>>48 != 0) {
			t.Fatalf("ParseRequestID(%q, %q) = %d: a worker's id %v, key in a worker's range %v", run, id, key, fromWorker, key>>48 != 0)
		}
		canonical := fmt.Sprintf("%s-%d", run, key)
		if w := key >> 48; w > 0 {
			canonical = fmt.Sprintf("%s-w%d-%d", run, w-1, key&(1<<48-1))
		}
		again, ok := ParseRequestID(run, canonical)
		if !ok || again != key {
			t.Fatalf("ParseRequestID(%q, %q) = %d; its canonical id %q parses to %d, %v", run, id, key, canonical, again, ok)
		}
	})
}
