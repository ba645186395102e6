package podlogs

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
)

// stamps makes a timestamp sequence with many lines per second, runs of
// identical timestamps, and late lines (stderr landing after newer stdout,
// less than a second late) that may straddle a second boundary.
type stamps struct {
	rng  *rand.Rand
	now  time.Time
	step time.Duration
}

func (s *stamps) next() (ts time.Time, late bool) {
	switch r := s.rng.Float64(); {
	case r < 0.2: // identical to the previous line
	case r < 0.25:
		return s.now.Add(-time.Duration(s.rng.Int64N(int64(900 * time.Millisecond)))), true
	default:
		s.now = s.now.Add(time.Duration(s.rng.Int64N(int64(2 * s.step))))
	}
	return s.now, false
}

// TestPositionReplayProperty drives position against an in-memory kubelet:
// a growing log, replays from sinceTime (one-second resolution) cut at
// random points, thousands of times. Every line at or after Since must be
// delivered once, in log order.
func TestPositionReplayProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := range 1500 {
		base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		st := stamps{rng: rng, now: base, step: time.Duration(1+rng.IntN(50)) * time.Millisecond}
		since := base.Add(time.Duration(rng.Int64N(int64(2 * time.Second))))
		var file []time.Time
		grow := func(n int) {
			for range n {
				ts, _ := st.next()
				file = append(file, ts)
			}
		}
		var p position
		var got []int
		grow(rng.IntN(200))
		for cut := 0; cut < 30; cut++ {
			from := p.reopen(since)
			sec := from.Truncate(time.Second)
			budget := rng.IntN(300) // lines this stream carries before it drops
			for i, ts := range file {
				if budget == 0 {
					break
				}
				if ts.Before(sec) { // the kubelet's filter
					continue
				}
				budget--
				if ts.Before(from) {
					continue
				}
				if r, _ := p.replayed(ts); r {
					continue
				}
				got = append(got, i)
				p.delivered(ts)
			}
			grow(rng.IntN(100))
		}
		// A last read to the end.
		from := p.reopen(since)
		for i, ts := range file {
			if ts.Before(from) {
				continue
			}
			if r, _ := p.replayed(ts); r {
				continue
			}
			got = append(got, i)
			p.delivered(ts)
		}
		var want []int
		for i, ts := range file {
			if !ts.Before(since) {
				want = append(want, i)
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("trial %d: delivered %d lines, want %d\ngot  %v\nwant %v", trial, len(got), len(want), got, want)
		}
	}
}

// TestResumeOverHTTP is the heart: 20,000 lines written at a high rate into
// the CRI logs of six pods in two clusters, served by real HTTP servers that
// cut the streams mid-line, at line ends and cleanly, and refuse some opens,
// read through client-go. Every line must arrive exactly once, in order.
func TestResumeOverHTTP(t *testing.T) {
	checkGoroutines(t)
	dir := t.TempDir()
	const total = 20000
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	since := base.Add(1500 * time.Millisecond) // sub-second: the API rounds it down

	type pod struct {
		t    Target
		log  *podLog
		want []string
	}
	var pods []*pod
	clients := map[string]kclient.Interface{}
	var servers []*apiServer
	for ci, cluster := range []string{"east", "west"} {
		srv := newAPIServer(t, uint64(ci+10))
		srv.cutMin, srv.cutSpan, srv.failOpen = 300, 900, 0.1
		servers = append(servers, srv)
		clients[cluster] = srv.client(t)
		for i := range 3 {
			tg := Target{Cluster: cluster, Namespace: "shop", Pod: fmt.Sprintf("reviews-%d", i), Container: "app"}
			p := &pod{t: tg, log: newPodLog(t, fmt.Sprintf("%s/%s/%s", dir, cluster, tg.Pod))}
			srv.add(tg, p.log)
			pods = append(pods, p)
		}
	}

	f := NewFollower(ClientGoOpener(clients), Options{Since: since, Concurrency: 6, Settle: 200 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	got := collect(f)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, p := range pods {
		f.Follow(ctx, p.t)
	}

	// Writers: about 200 lines per log second per pod, runs of identical
	// timestamps, late stderr lines, lines split into partial records
	// (sometimes across a second boundary), and lines before since.
	var wg sync.WaitGroup
	var wantMu sync.Mutex
	wantTotal := 0
	for pi, p := range pods {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(pi), 99))
			st := stamps{rng: rng, now: base, step: 5 * time.Millisecond}
			for seq := range total / len(pods) {
				ts, late := st.next()
				text := fmt.Sprintf("%s seq=%d %s", p.t.Pod, seq, strings.Repeat("x", rng.IntN(120)))
				stream := "stdout"
				if late {
					stream = "stderr"
				}
				if rng.Float64() < 0.03 && !late {
					k := 1 + rng.IntN(len(text)-1)
					ts2 := ts.Add(time.Duration(rng.Int64N(int64(time.Millisecond))))
					p.log.append(criRecord(ts, stream, true, text[:k]), criRecord(ts2, stream, false, text[k:]))
					st.now = ts2
				} else {
					p.log.append(criRecord(ts, stream, false, text))
				}
				if !ts.Before(since) {
					p.want = append(p.want, text)
				}
				if seq%4 == 0 {
					time.Sleep(200 * time.Microsecond)
				}
			}
			wantMu.Lock()
			wantTotal += len(p.want)
			wantMu.Unlock()
		}()
	}
	wg.Wait()
	cutsWhileWriting := servers[0].cuts.Load() + servers[1].cuts.Load()
	waitFor(t, 15*time.Second, "every line", func() bool { return got.n.Load() >= int64(wantTotal) })
	for _, s := range servers {
		s.mu.Lock()
		s.failOpen = 0 // a failed final read is reported, not retried forever
		s.mu.Unlock()
	}
	if err := f.Settle(ctx); err != nil {
		t.Fatalf("Settle: %v", err)
	}
	<-got.done

	for _, p := range pods {
		texts := got.texts(p.t)
		if len(texts) != len(p.want) {
			t.Errorf("%s: %d lines delivered, want %d", p.t, len(texts), len(p.want))
		}
		for i := range min(len(texts), len(p.want)) {
			if texts[i] != p.want[i] {
				t.Errorf("%s: line %d is %.40q, want %.40q", p.t, i, texts[i], p.want[i])
				break
			}
		}
	}
	var cuts, fails, reconnects, skipped, malformed int64
	for _, s := range servers {
		cuts += s.cuts.Load()
		fails += s.fails.Load()
		if n := s.fractional.Load(); n > 0 {
			t.Errorf("%d sinceTime values had sub-second digits; the resume assumes the API rounds down", n)
		}
	}
	for _, st := range f.Stats() {
		reconnects += int64(st.Reconnects)
		skipped += st.Skipped
		malformed += st.Malformed
	}
	t.Logf("%d lines, %d cuts (%d while writing), %d refused opens, %d reconnects, %d replayed lines skipped, %d fragments dropped", wantTotal, cuts, cutsWhileWriting, fails, reconnects, skipped, malformed)
	if cutsWhileWriting < 20 || reconnects < 20 {
		t.Errorf("only %d cuts and %d reconnects: the test did not exercise resuming", cuts, reconnects)
	}
	if skipped == 0 {
		t.Error("no replayed line was skipped")
	}
}
