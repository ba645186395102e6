package podlogs

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// clock hands out increasing timestamps, several per millisecond.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) next() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(300 * time.Microsecond)
	return c.now
}

// write appends n lines to p and returns their texts.
func write(p *podLog, c *clock, prefix string, n int) []string {
	var out []string
	for i := range n {
		text := fmt.Sprintf("%s %d", prefix, i)
		p.append(criRecord(c.next(), "stdout", false, text))
		out = append(out, text)
	}
	return out
}

// backend is one way of serving the test logs: the CRI files directly, or
// kubelet-style over HTTP through client-go.
type backend struct {
	opener Opener
	format Format
	add    func(Target, *podLog)
}

// backends makes each backend inside the (sub)test, so that its server is
// closed before the test's goroutine check.
var backends = []struct {
	name string
	make func(t *testing.T) backend
}{
	{"cri-file", func(t *testing.T) backend {
		b, _ := fileBackend()
		return b
	}},
	{"http", func(t *testing.T) backend {
		api := newAPIServer(t, 1)
		return backend{opener: ClientGoOpener(map[string]kclient.Interface{"c1": api.client(t)}), format: FormatTimestamps, add: api.add}
	}},
}

// fileBackend serves the CRI files directly, through the returned opener.
func fileBackend() (backend, *fileOpener) {
	fo := newFileOpener()
	return backend{opener: fo, format: FormatCRI, add: fo.add}, fo
}

// onePod is one container log behind b, and the clock that stamps the
// lines a test writes to it.
func onePod(t *testing.T, b backend, pod string) (*clock, *podLog, Target) {
	p := newPodLog(t, t.TempDir())
	tg := target(pod)
	b.add(tg, p)
	return &clock{now: t0}, p, tg
}

// follow starts a follower on b (in b's log format) that collects what it
// delivers, with a context that ends with the test at the latest.
func (b backend) follow(t *testing.T, o Options) (*Follower, *collected, context.Context) {
	o.Format = b.format
	f := NewFollower(b.opener, o)
	got := collect(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return f, got, ctx
}

func target(pod string) Target {
	return Target{Cluster: "c1", Namespace: "ns", Pod: pod, Container: "app"}
}

func TestBoundedConcurrencyAndForget(t *testing.T) {
	checkGoroutines(t)
	o := newFileOpener()
	c := &clock{now: t0}
	dir := t.TempDir()
	logs := map[Target]*podLog{}
	want := map[Target][]string{}
	var targets []Target
	for i := range 10 {
		tg := target(fmt.Sprintf("p%d", i))
		logs[tg] = newPodLog(t, fmt.Sprintf("%s/%d", dir, i))
		o.add(tg, logs[tg])
		want[tg] = write(logs[tg], c, tg.Pod+" early", 50)
		targets = append(targets, tg)
	}
	f := NewFollower(o, Options{Since: t0, Concurrency: 3, Settle: 100 * time.Millisecond, RetryBackoff: 5 * time.Millisecond, Format: FormatCRI})
	got := collect(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, tg := range targets {
		f.Follow(ctx, tg)
		f.Follow(ctx, tg) // idempotent
	}
	open := func() []Target {
		var out []Target
		for tg, st := range f.Stats() {
			if st.Open {
				out = append(out, tg)
			}
		}
		return out
	}
	waitFor(t, 5*time.Second, "three open streams with their lines", func() bool {
		n := 0
		for _, tg := range targets {
			if len(got.get(tg)) == 50 {
				n++
			}
		}
		return len(open()) == 3 && n == 3
	})

	// Lines keep coming while streams are forgotten.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			mu.Lock()
			for _, tg := range targets {
				want[tg] = append(want[tg], write(logs[tg], c, fmt.Sprintf("%s late%d", tg.Pod, i), 1)...)
			}
			mu.Unlock()
		}
	}()
	// Stop the writer on every exit, a t.Fatal in waitFor included.
	halt := sync.OnceFunc(func() {
		close(stop)
		wg.Wait()
	})
	defer halt()
	forgotten := open()
	for _, tg := range forgotten {
		f.Forget(tg)
	}
	waitFor(t, 5*time.Second, "three other streams to open", func() bool {
		o := open()
		return len(o) == 3 && !slices.ContainsFunc(o, func(tg Target) bool { return slices.Contains(forgotten, tg) })
	})
	frozen := map[Target]int{}
	for _, tg := range forgotten {
		frozen[tg] = len(got.get(tg))
	}
	// A window in which a forgotten stream would still get lines: their
	// absence is what is tested, so this pause is no wait on a condition.
	time.Sleep(50 * time.Millisecond)
	halt()
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	<-got.done

	if _, maxOpen, _ := o.stats(); maxOpen > 3 {
		t.Errorf("%d streams were open at once, want at most 3", maxOpen)
	}
	if now, _, _ := o.stats(); now != 0 {
		t.Errorf("%d streams still open after Settle", now)
	}
	for _, tg := range targets {
		texts := got.texts(tg)
		if slices.Contains(forgotten, tg) {
			if len(texts) != frozen[tg] || !slices.Equal(texts, want[tg][:len(texts)]) {
				t.Errorf("%s: forgotten, but %d lines after %d at Forget", tg, len(texts), frozen[tg])
			}
			if !f.Stats()[tg].Forgotten {
				t.Errorf("%s: not marked forgotten", tg)
			}
			continue
		}
		// The four targets that never had a slot are read by Settle.
		if !slices.Equal(texts, want[tg]) {
			t.Errorf("%s: %d lines delivered, want %d exactly", tg, len(texts), len(want[tg]))
		}
	}
}

func TestPodAddedMidRun(t *testing.T) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			checkGoroutines(t)
			b := bk.make(t)
			c := &clock{now: t0}
			dir := t.TempDir()
			a := newPodLog(t, dir+"/a")
			b.add(target("a"), a)
			f, got, ctx := b.follow(t, Options{Since: t0, Settle: 100 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
			f.Follow(ctx, target("a"))
			wantA := write(a, c, "a", 20)
			waitFor(t, 5*time.Second, "pod a", func() bool { return len(got.get(target("a"))) == 20 })

			// A pod scheduled during the attack: its earlier lines count too.
			n := newPodLog(t, dir+"/new")
			wantN := write(n, c, "new", 10)
			b.add(target("new"), n)
			f.Follow(ctx, target("new"))
			wantN = append(wantN, write(n, c, "new more", 10)...)
			wantA = append(wantA, write(a, c, "a more", 10)...)
			waitFor(t, 5*time.Second, "the new pod", func() bool { return len(got.get(target("new"))) == 20 })
			f.Follow(ctx, target("new")) // the watch repeats itself: no second stream
			if err := f.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			<-got.done
			if g := got.texts(target("a")); !slices.Equal(g, wantA) {
				t.Errorf("pod a: %q", g)
			}
			if g := got.texts(target("new")); !slices.Equal(g, wantN) {
				t.Errorf("new pod: %q", g)
			}
			// One follow stream each, plus Settle's final read.
			for _, tg := range []Target{target("a"), target("new")} {
				if st := f.Stats()[tg]; st.Opens != 2 {
					t.Errorf("%s opened %d times, want 2", tg, st.Opens)
				}
			}
		})
	}
}

func TestRestartedReadsPreviousThenCurrent(t *testing.T) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			checkGoroutines(t)
			b := bk.make(t)
			c, p, tg := onePod(t, b, "r")
			f, got, ctx := b.follow(t, Options{Since: t0, Settle: 100 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
			f.Follow(ctx, tg)
			want := write(p, c, "first", 30)
			waitFor(t, 5*time.Second, "first lines", func() bool { return len(got.get(tg)) == 30 })

			// The stream falls behind (held back), the container writes its
			// last lines, crashes and restarts, and the new one writes.
			p.setPaused(true)
			want = append(want, write(p, c, "last words", 25)...)
			p.restart(t)
			want = append(want, write(p, c, "second", 30)...)
			f.Restarted(tg)
			p.setPaused(false)
			waitFor(t, 5*time.Second, "all lines", func() bool { return len(got.get(tg)) >= len(want) })
			if err := f.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			<-got.done
			if g := got.texts(tg); !slices.Equal(g, want) {
				t.Errorf("got %d lines, want %d: %q", len(g), len(want), g)
			}
			if st := f.Stats()[tg]; st.Restarts != 1 {
				t.Errorf("restarts %d", st.Restarts)
			}
		})
	}
}

// A restart that the watch reports late: the old container's follow stream
// ends with it, the stream reopens on the new container, and its new lines
// are not mistaken for a replay.
func TestRestartBeforeSignal(t *testing.T) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			checkGoroutines(t)
			b := bk.make(t)
			c, p, tg := onePod(t, b, "r")
			f, got, ctx := b.follow(t, Options{Since: t0, Settle: 100 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
			f.Follow(ctx, tg)
			want := write(p, c, "first", 30)
			waitFor(t, 5*time.Second, "first lines", func() bool { return len(got.get(tg)) == 30 })
			p.restart(t)
			want = append(want, write(p, c, "second", 30)...)
			waitFor(t, 5*time.Second, "second container", func() bool { return len(got.get(tg)) >= 60 })
			f.Restarted(tg)
			want = append(want, write(p, c, "third", 5)...)
			if err := f.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			<-got.done
			if g := got.texts(tg); !slices.Equal(g, want) {
				t.Errorf("got %d lines, want %d: %q", len(g), len(want), g)
			}
		})
	}
}

// A line split into partial records across a second boundary: a resume
// whose sinceTime falls between them gets the kubelet's continuation
// without a prefix, which is dropped (the whole line was delivered).
func TestResumeDropsContinuationFragment(t *testing.T) {
	checkGoroutines(t)
	api := newAPIServer(t, 3)
	api.cutMin, api.cutSpan, api.modes, api.maxCuts = 3, 1, []int{1}, 1
	p := newPodLog(t, t.TempDir())
	tg := target("frag")
	api.add(tg, p)
	sec := t0.Add(5 * time.Second)
	p.append(
		criRecord(sec.Add(-500*time.Microsecond), "stdout", true, "split "),
		criRecord(sec.Add(500*time.Microsecond), "stdout", false, "line"),
	)
	// The stream is cut after "one": the resume asks for the second before
	// its second, which starts between the two records.
	p.append(criRecord(sec.Add(1100*time.Millisecond), "stdout", false, "one"))
	p.append(criRecord(sec.Add(1200*time.Millisecond), "stdout", false, "two"))
	p.append(criRecord(sec.Add(1300*time.Millisecond), "stdout", false, "three"))
	f := NewFollower(ClientGoOpener(map[string]kclient.Interface{"c1": api.client(t)}), Options{Since: t0, Settle: 100 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	got := collect(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Follow(ctx, tg)
	waitFor(t, 5*time.Second, "all lines", func() bool { return len(got.get(tg)) >= 4 })
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	<-got.done
	want := []string{"split line", "one", "two", "three"}
	if g := got.texts(tg); !slices.Equal(g, want) {
		t.Errorf("got %q, want %q", g, want)
	}
	if l := got.get(tg); len(l) > 0 && !l[0].Time.Equal(sec.Add(-500*time.Microsecond)) {
		t.Errorf("joined line has time %v, want its first record's", l[0].Time)
	}
	if st := f.Stats()[tg]; st.Malformed == 0 || api.cuts.Load() == 0 {
		t.Errorf("no fragment was dropped (%+v, %d cuts): the test missed its case", st, api.cuts.Load())
	}
}

func TestLongLinesTruncated(t *testing.T) {
	for _, bk := range backends {
		t.Run(bk.name, func(t *testing.T) {
			checkGoroutines(t)
			b := bk.make(t)
			c, p, tg := onePod(t, b, "long")
			long := strings.Repeat("y", 200_000)
			p.append(criRecord(c.next(), "stdout", false, "short"))
			p.append(criRecord(c.next(), "stdout", false, long))
			ts := c.next()
			p.append(criRecord(ts, "stdout", true, long[:100_000]), criRecord(ts, "stdout", true, long[:50_000]), criRecord(ts, "stdout", false, "end"))
			p.append(criRecord(c.next(), "stderr", false, "after"))
			f, got, ctx := b.follow(t, Options{Since: t0, Settle: 50 * time.Millisecond, RetryBackoff: 5 * time.Millisecond, MaxLineBytes: 1000})
			f.Follow(ctx, tg)
			if err := f.Settle(ctx); err != nil {
				t.Fatal(err)
			}
			<-got.done
			want := []string{"short", long[:1000], long[:1000], "after"}
			if g := got.texts(tg); !slices.Equal(g, want) {
				t.Errorf("got %d lines %.80q", len(g), g)
			}
			if st := f.Stats()[tg]; st.Truncated != 2 {
				t.Errorf("truncated %d, want 2", st.Truncated)
			}
		})
	}
}

func TestSettleWaitsForQuiet(t *testing.T) {
	checkGoroutines(t)
	o := newFileOpener()
	c := &clock{now: t0}
	p := newPodLog(t, t.TempDir())
	tg := target("s")
	o.add(tg, p)
	const settle = 250 * time.Millisecond
	f := NewFollower(o, Options{Since: t0, Settle: settle, RetryBackoff: 5 * time.Millisecond, Format: FormatCRI})
	got := collect(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Follow(ctx, tg)
	var want []string
	var last time.Time
	done := make(chan struct{})
	go func() {
		defer close(done)
		// An access log flushed late: lines trickle in after the attack,
		// each gap shorter than the settle period.
		for i := range 6 {
			time.Sleep(settle / 3)
			want = append(want, write(p, c, fmt.Sprintf("late %d", i), 1)...)
			last = time.Now()
		}
	}()
	start := time.Now()
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	end := time.Now()
	<-done
	<-got.done
	if g := got.texts(tg); !slices.Equal(g, want) {
		t.Errorf("got %q, want %q", g, want)
	}
	if quiet := end.Sub(last); quiet < settle || end.Sub(start) < 6*settle/3 {
		t.Errorf("Settle returned %v after the last line, %v after its call; want the settle period of quiet after the last line", quiet, end.Sub(start))
	}
	if over := end.Sub(last); over > settle+300*time.Millisecond {
		t.Errorf("Settle took %v after the last line", over)
	}
}

// keepWriting writes a line every 20 ms until the returned func is called.
func keepWriting(p *podLog, c *clock, prefix string) (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(20 * time.Millisecond):
				write(p, c, prefix, 1)
			}
		}
	}()
	return func() {
		close(quit)
		<-done
	}
}

func TestSettleBoundedByContext(t *testing.T) {
	checkGoroutines(t)
	o := newFileOpener()
	c := &clock{now: t0}
	p := newPodLog(t, t.TempDir())
	tg := target("busy")
	o.add(tg, p)
	f := NewFollower(o, Options{Since: t0, Settle: 200 * time.Millisecond, RetryBackoff: 5 * time.Millisecond, Format: FormatCRI})
	got := collect(f)
	f.Follow(context.Background(), tg)
	stop := keepWriting(p, c, "busy")
	ctx, cancel := context.WithTimeout(context.Background(), 400*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := f.Settle(ctx)
	stop()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Settle: %v, want the deadline", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("Settle took %v past its deadline", d)
	}
	<-got.done // Lines is closed
	if len(got.get(tg)) == 0 {
		t.Error("no line was read")
	}
}

func TestForgetThenFollowStartsAfresh(t *testing.T) {
	checkGoroutines(t)
	o := newFileOpener()
	c := &clock{now: t0}
	dir := t.TempDir()
	tg := target("sts-0")
	old := newPodLog(t, dir+"/old")
	o.add(tg, old)
	f := NewFollower(o, Options{Since: t0, Settle: 50 * time.Millisecond, RetryBackoff: 5 * time.Millisecond, Format: FormatCRI})
	got := collect(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	f.Follow(ctx, tg)
	want := write(old, c, "old", 10)
	waitFor(t, 5*time.Second, "old pod", func() bool { return len(got.get(tg)) == 10 })
	f.Forget(tg)
	// A StatefulSet pod recreated under the same name has a new log.
	recreated := newPodLog(t, dir+"/new")
	want = append(want, write(recreated, c, "new", 10)...)
	o.add(tg, recreated)
	f.Follow(ctx, tg)
	if err := f.Settle(ctx); err != nil {
		t.Fatal(err)
	}
	<-got.done
	if g := got.texts(tg); !slices.Equal(g, want) {
		t.Errorf("got %q", g)
	}
}

func TestOpenErrorsAreRetriedAndReported(t *testing.T) {
	checkGoroutines(t)
	api := newAPIServer(t, 5)
	f := NewFollower(ClientGoOpener(map[string]kclient.Interface{"c1": api.client(t)}), Options{Since: t0, Settle: 50 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	got := collect(f)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tg := target("missing")
	f.Follow(ctx, tg)
	f.Follow(ctx, Target{Cluster: "nowhere", Namespace: "ns", Pod: "x"})
	waitFor(t, 5*time.Second, "retries", func() bool { return api.requests.Load() >= 3 })
	// The pod appears (a watch lagging behind): the retries pick it up.
	p := newPodLog(t, t.TempDir())
	want := write(p, &clock{now: t0}, "found", 3)
	api.add(tg, p)
	waitFor(t, 5*time.Second, "lines", func() bool { return len(got.get(tg)) == 3 })
	err := f.Settle(ctx)
	<-got.done
	if g := got.texts(tg); !slices.Equal(g, want) {
		t.Errorf("got %q", g)
	}
	if err == nil || !strings.Contains(err.Error(), `read remaining logs of pod ns/x in cluster nowhere: no client for cluster "nowhere"`) {
		t.Errorf("Settle: %v", err)
	}
	st := f.Stats()[tg]
	if st.LastError == nil || !strings.Contains(st.LastError.Error(), "follow logs of pod ns/missing container app in cluster c1: ") || !strings.Contains(st.LastError.Error(), "not found") {
		t.Errorf("last error %v", st.LastError)
	}
}

// A consumer that stops reading must not keep the streams alive: Close
// ends them even while they wait to hand on a line.
func TestCloseWithoutReader(t *testing.T) {
	checkGoroutines(t)
	o := newFileOpener()
	p := newPodLog(t, t.TempDir())
	o.add(target("x"), p)
	write(p, &clock{now: t0}, "x", 3000) // more than the channel holds
	f := NewFollower(o, Options{Since: t0, Format: FormatCRI})
	f.Follow(context.Background(), target("x"))
	waitFor(t, 5*time.Second, "a full channel", func() bool { return len(f.Lines()) == cap(f.Lines()) })
	f.Close()
	f.Close()
	f.Follow(context.Background(), target("x")) // after Close: ignored
	n := 0
	for range f.Lines() {
		n++
	}
	if n != cap(f.Lines()) {
		t.Errorf("%d lines buffered", n)
	}
}

// A deleted pod keeps serving and logging through its grace period: its
// stream is read until the container stops, then not reopened, so what it
// logged while terminating is kept; a pod whose stream never ends (kwok's
// kubelet) is read until Settle, which does not try to reopen it.
func TestDeletedPodIsReadToTheEndOfItsLog(t *testing.T) {
	checkGoroutines(t)
	for _, stops := range []bool{true, false} {
		t.Run(fmt.Sprintf("container stops %v", stops), func(t *testing.T) {
			b, o := fileBackend()
			c, p, tg := onePod(t, b, "terminating-0")
			f, got, ctx := b.follow(t, Options{Since: t0, Settle: 100 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
			f.Follow(ctx, tg)
			want := write(p, c, "before", 10)
			waitFor(t, 5*time.Second, "lines before the deletion", func() bool { return len(got.get(tg)) == 10 })
			f.Deleted(tg)
			want = append(want, write(p, c, "terminating", 10)...)
			if stops {
				p.exit()
				waitFor(t, 5*time.Second, "the stream's end", func() bool {
					st := f.Stats()[tg]
					return len(got.get(tg)) == 20 && !st.Open
				})
				o.remove(tg) // the API removes the pod after the container stopped
				time.Sleep(50 * time.Millisecond)
			}
			if err := f.Settle(ctx); err != nil {
				t.Fatalf("settle: %v", err)
			}
			<-got.done
			if g := got.texts(tg); !slices.Equal(g, want) {
				t.Errorf("got %q, want %q", g, want)
			}
			st := f.Stats()[tg]
			// Stopped: one reopen brings nothing new or finds the pod gone,
			// which is no error. Never stopping: Settle reads it to the
			// quiet end and does not reopen it.
			maxOpens := 1
			if stops {
				maxOpens = 2
			}
			if _, _, opens := o.stats(); opens > maxOpens || !st.Deleted || st.LastError != nil {
				t.Errorf("opens %d, stats %+v: want at most %d, no error", opens, st, maxOpens)
			}
		})
	}
}

// A deleted pod's stream cut with an error is followed again; when its log
// is gone by then, lines may be lost and Settle names the pod.
func TestDeletedPodWhoseLogIsGone(t *testing.T) {
	checkGoroutines(t)
	api := newAPIServer(t, 3)
	api.cutMin, api.cutSpan, api.modes, api.maxCuts = 8, 1, []int{1}, 1
	b := backend{opener: ClientGoOpener(map[string]kclient.Interface{"c1": api.client(t)}), format: FormatTimestamps, add: api.add}
	c, p, tg := onePod(t, b, "gone-0")
	// Settle waits for this much quiet: long enough for the cut stream's
	// reopen (and its 404) on a loaded machine, where 50 ms let Settle
	// end before the reopen was tried (once in 30 runs, and in CI).
	f, got, ctx := b.follow(t, Options{Since: t0, Settle: 500 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	f.Follow(ctx, tg)
	want := write(p, c, "line", 5)
	waitFor(t, 5*time.Second, "lines", func() bool { return len(got.get(tg)) == 5 })
	f.Deleted(tg)
	api.remove(tg)
	want = append(want, write(p, c, "terminating", 5)...)[:8] // cut after the 8th
	err := f.Settle(ctx)
	<-got.done
	if err == nil || !strings.Contains(err.Error(), "gone-0") || !errors.Is(err, ErrGone) {
		t.Errorf("settle error %v, want one naming the pod", err)
	}
	if g := got.texts(tg); !slices.Equal(g, want) {
		t.Errorf("got %q, want %q", g, want)
	}
}

// Lines past SetUntil (an access log's probe lines after the window) are
// delivered but do not keep Settle waiting for quiet (without it, Settle
// waits for its deadline: TestSettleBoundedByContext).
func TestSettleIgnoresLinesPastUntil(t *testing.T) {
	checkGoroutines(t)
	b, _ := fileBackend()
	c, p, tg := onePod(t, b, "rebel-base-0")
	f, got, ctx := b.follow(t, Options{Since: t0, Settle: 100 * time.Millisecond, RetryBackoff: 5 * time.Millisecond})
	f.Follow(ctx, tg)
	write(p, c, "request", 5)
	f.SetUntil(t0.Add(time.Second))
	stop := keepWriting(p, &clock{now: t0.Add(2 * time.Second)}, "probe")
	sctx, scancel := context.WithTimeout(ctx, time.Second)
	defer scancel()
	err := f.Settle(sctx)
	stop()
	<-got.done
	if err != nil {
		t.Errorf("settle: %v", err)
	}
	if len(got.get(tg)) < 5 {
		t.Errorf("%d lines read", len(got.get(tg)))
	}
}
