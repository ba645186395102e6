package runner

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// script is a followed object read by a test instead of an API server (a
// fake: the lab test TestWindowsFollowThePatchedTrafficRoute follows a
// real one): call i returns steps[i], the last step ever after.
type script struct {
	mu    sync.Mutex
	calls int
	steps []func() (meshconfig.Expected, error)
}

func (s *script) read(context.Context) (meshconfig.Expected, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.steps)-1)
	s.calls++
	return s.steps[i]()
}

func (s *script) done() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls >= len(s.steps)
}

func version(rv string, c1 float64) func() (meshconfig.Expected, error) {
	return func() (meshconfig.Expected, error) {
		return meshconfig.Expected{Shares: map[string]float64{"c1": c1, "c2": 1 - c1}, Sources: []meshconfig.Source{{Kind: "TrafficRoute", ResourceVersion: rv}}}, nil
	}
}

func failing(err error) func() (meshconfig.Expected, error) {
	return func() (meshconfig.Expected, error) { return meshconfig.Expected{}, err }
}

// waitUntil polls cond every millisecond for up to 10 seconds.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// The follower's windows: a new resourceVersion with the same shares is
// no change; a change cuts a settling window, then after settle a judged
// one; a change while settling makes the settling window expect the
// newest; a read that fails is a warning (capped), a version that defines
// no split is a window with its error.
func TestFollowerWindows(t *testing.T) {
	t.Parallel()
	readErr := errors.New("expectation \"e\": read the expected split: connection refused")
	noSplit := resolveError{errors.New("spec.conf.split: no weights")}
	for _, tc := range []struct {
		name   string
		settle time.Duration
		steps  []func() (meshconfig.Expected, error)
		// windows wanted: the c1 share expected in each, settling or not
		want     []float64
		settling []bool
		rvs      []string
		warnings int
		errFrom  int // the first window whose Err is set, -1 none
	}{
		{"same shares, new resourceVersion", 0, []func() (meshconfig.Expected, error){version("1", 0.9), version("2", 0.9)},
			[]float64{0.9}, []bool{false}, []string{"1"}, 0, -1},
		{"a change, settled at once", 0, []func() (meshconfig.Expected, error){version("1", 0.9), version("2", 0.5)},
			[]float64{0.9, 0.5, 0.5}, []bool{false, true, false}, []string{"1", "2", "2"}, 0, -1},
		{"a second change while settling", time.Hour, []func() (meshconfig.Expected, error){version("1", 0.9), version("2", 0.5), version("3", 0.3)},
			[]float64{0.9, 0.3}, []bool{false, true}, []string{"1", "3"}, 0, -1},
		{"reads that fail", 0, []func() (meshconfig.Expected, error){version("1", 0.9), failing(readErr), failing(readErr), failing(readErr),
			failing(readErr), failing(readErr), failing(readErr), failing(readErr), failing(readErr), version("1", 0.9)},
			[]float64{0.9}, []bool{false}, []string{"1"}, maxFollowWarnings + 1, -1},
		{"a version with no split", 0, []func() (meshconfig.Expected, error){version("1", 0.9), failing(noSplit)},
			[]float64{0.9, 0, 0}, []bool{false, true, false}, []string{"1", "", ""}, 0, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			tl := tally.New(start, time.Minute)
			s := &script{steps: tc.steps}
			initial, _ := tc.steps[0]()
			f := &follower{name: "e", object: "TrafficRoute test-server", read: s.read, tl: tl, poll: time.Millisecond, readTimeout: scenarios.DefaultReadTimeout, settle: tc.settle, start: start, w: io.Discard}
			if err := f.begin(context.Background(), initial); err != nil {
				t.Fatal(err)
			}
			waitUntil(t, "the script read", s.done)
			waitUntil(t, "the windows", func() bool {
				f.mu.Lock()
				defer f.mu.Unlock()
				return len(f.windows) >= len(tc.want)
			})
			ws, warnings := f.stop()
			if len(ws) != len(tc.want) || len(warnings) != tc.warnings {
				t.Fatalf("%d windows, %d warnings %q; want %d, %d", len(ws), len(warnings), warnings, len(tc.want), tc.warnings)
			}
			if got := len(tl.Snapshot().Windows); got != len(ws) {
				t.Errorf("the tally has %d windows, the follower %d", got, len(ws))
			}
			for i, w := range ws {
				rv := ""
				if len(w.Expected.Sources) > 0 {
					rv = w.Expected.Sources[0].ResourceVersion
				}
				if w.Expected.Shares["c1"] != tc.want[i] || w.Settling != tc.settling[i] || rv != tc.rvs[i] || (w.Err != nil) != (tc.errFrom >= 0 && i >= tc.errFrom) {
					t.Errorf("window %d: c1 %v settling %v rv %q err %v; want %v %v %q, error %v", i, w.Expected.Shares["c1"], w.Settling, rv, w.Err, tc.want[i], tc.settling[i], tc.rvs[i], tc.errFrom >= 0 && i >= tc.errFrom)
				}
				if i > 0 && !w.Start.After(ws[i-1].Start) {
					t.Errorf("window %d starts %s, not after window %d", i, w.Start, i-1)
				}
			}
			if tc.warnings > 0 && !strings.Contains(warnings[len(warnings)-1], "further read failures") {
				t.Errorf("the warnings are not capped: %q", warnings)
			}
		})
	}
}

// A read takes time, and what it returns held at some instant during it:
// the settling window after a change opens when the last read that still
// saw the old version began, not when it returned, so a data plane that
// moved during that read is not counted in the window before the change.
func TestFollowerSettlesFromTheReadStart(t *testing.T) {
	t.Parallel()
	const took = 50 * time.Millisecond
	var mu sync.Mutex
	var began []time.Time
	slow := func(v func() (meshconfig.Expected, error)) func() (meshconfig.Expected, error) {
		return func() (meshconfig.Expected, error) {
			mu.Lock()
			began = append(began, time.Now())
			mu.Unlock()
			time.Sleep(took)
			return v()
		}
	}
	s := &script{steps: []func() (meshconfig.Expected, error){slow(version("1", 0.9)), slow(version("1", 0.9)), slow(version("2", 0.5))}}
	start := time.Now()
	tl := tally.New(start, time.Minute)
	f := &follower{name: "e", object: "TrafficRoute test-server", read: s.read, tl: tl, poll: time.Millisecond, readTimeout: scenarios.DefaultReadTimeout, settle: time.Hour, start: start, w: io.Discard}
	initial, _ := version("1", 0.9)()
	if err := f.begin(context.Background(), initial); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the script read", s.done)
	waitUntil(t, "the settling window", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.windows) >= 2
	})
	ws, _ := f.stop()
	mu.Lock()
	last := began[1] // the second read, the last to see version 1
	mu.Unlock()
	if st := ws[1].Start; !ws[1].Settling || st.After(last) || st.Before(last.Add(-took/2)) {
		t.Errorf("settling window from %s, want from the start of the last read of the old version, %s (it returned at about %s)",
			st.Sub(start), last.Sub(start), last.Add(took).Sub(start))
	}
}

// Reads that take 1–2 s: the data plane moves to c2 while the read that
// will see the change runs, so the answers from c2 come before the
// change is seen, up to a poll and two reads after the settling window's
// start. Held back for that long (follower.hold), they are counted in
// the settling window; counted at once, they were in the window before
// the change, which then saw c2 although its version sent nothing there.
func TestFollowerHoldsAnswersForSlowReads(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	moved := false
	slow := func(took time.Duration, move bool, v func() (meshconfig.Expected, error)) func() (meshconfig.Expected, error) {
		return func() (meshconfig.Expected, error) {
			if move {
				mu.Lock()
				moved = true
				mu.Unlock()
			}
			time.Sleep(took)
			return v()
		}
	}
	s := &script{steps: []func() (meshconfig.Expected, error){
		slow(time.Second, false, version("1", 1)),
		slow(1500*time.Millisecond, true, version("2", 0)), // the data plane moves as this read begins
		slow(time.Second, false, version("2", 0)),
	}}
	start := time.Now()
	tl := tally.New(start, time.Minute)
	f := &follower{name: "e", object: "TrafficRoute test-server", read: s.read, tl: tl, poll: 100 * time.Millisecond, readTimeout: 2 * time.Second, settle: time.Hour, start: start, w: io.Discard}
	initial, _ := version("1", 1)()
	if err := f.begin(context.Background(), initial); err != nil {
		t.Fatal(err)
	}
	// Answers every 5 ms, from the cluster the data plane routes to.
	stop := make(chan struct{})
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		for {
			select {
			case <-stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			mu.Lock()
			cl := "c1"
			if moved {
				cl = "c2"
			}
			mu.Unlock()
			tl.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: time.Now()}}, attribution.Identity{Cluster: cl})
		}
	}()
	waitUntil(t, "the script read", s.done)
	waitUntil(t, "the settling window", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.windows) >= 2
	})
	close(stop)
	<-fed
	ws, warnings := f.stop()
	tl.ReleaseHeld()
	got := tl.Snapshot().Windows
	if len(ws) != 2 || len(got) != 2 || !ws[1].Settling || len(warnings) != 0 {
		t.Fatalf("windows %d (tally %d), warnings %q; want the window before and a settling one", len(ws), len(got), warnings)
	}
	before, settling := got[0].Dimensions["cluster"], got[1].Dimensions["cluster"]
	if before.Count("c2") != 0 || before.Count("c1") == 0 || settling.Count("c2") < 100 {
		t.Errorf("window before the change %v %v, settling window %v %v: want c2's answers (about 300, sent during the 1.5 s read that saw the change) all in the settling window", before.Buckets, before.N, settling.Buckets, settling.N)
	}
}

// A read that takes longer than readTimeout fails with a warning and the
// window in force continues: the hold (a poll and two reads) bounds how
// far back a settling window may open only if every read is bounded.
func TestFollowerReadTimeout(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var deadlines []bool
	hang := func(ctx context.Context) (meshconfig.Expected, error) {
		_, ok := ctx.Deadline()
		mu.Lock()
		deadlines = append(deadlines, ok)
		mu.Unlock()
		<-ctx.Done()
		return meshconfig.Expected{}, ctx.Err()
	}
	start := time.Now()
	tl := tally.New(start, time.Minute)
	f := &follower{name: "e", object: "TrafficRoute test-server", read: hang, tl: tl, poll: time.Millisecond, readTimeout: 20 * time.Millisecond, settle: time.Hour, start: start, w: io.Discard}
	initial, _ := version("1", 0.9)()
	if err := f.begin(context.Background(), initial); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "two reads timed out", func() bool {
		f.mu.Lock()
		defer f.mu.Unlock()
		return len(f.warnings) >= 2
	})
	ws, warnings := f.stop()
	if len(ws) != 1 || !strings.Contains(warnings[0], "context deadline exceeded") || !strings.Contains(warnings[0], "the window in force continues") {
		t.Errorf("%d windows, warnings %q; want the first window only and the reads' timeouts", len(ws), warnings)
	}
	mu.Lock()
	defer mu.Unlock()
	for i, ok := range deadlines {
		if !ok {
			t.Errorf("read %d had no deadline", i)
		}
	}
}

// The progress line of a change prints what the cluster returned (share
// names, resourceVersion, a resolution error) with its control
// characters escaped: a converge gate prints it live to the terminal.
func TestDescribeVersionEscapes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		ex  meshconfig.Expected
		err error
	}{
		{meshconfig.Expected{Shares: map[string]float64{"v1\x1b[2J": 1}, Sources: []meshconfig.Source{{Kind: "VirtualService", ResourceVersion: "7\x1b]0;x\a"}}}, nil},
		{meshconfig.Expected{}, errors.New(`subset "v9\x1b[31m" is not defined`)},
	} {
		got := describeVersion(tc.ex, tc.err)
		if strings.ContainsAny(got, "\x1b\a") || !strings.Contains(got, "1b") {
			t.Errorf("%q: control characters not escaped", got)
		}
	}
}

// A converge gate's periodic windows stop short of the tally's limit,
// keeping room for a change: a long gate of short windows still follows
// a change near its end instead of judging the rest of the run against
// the version before it.
func TestFollowerEveryKeepsRoomForAChange(t *testing.T) {
	t.Parallel()
	steps := []func() (meshconfig.Expected, error){}
	for range 2 * tally.MaxWindows {
		steps = append(steps, version("1", 0.9))
	}
	steps = append(steps, version("2", 0.5))
	start := time.Now()
	tl := tally.New(start, time.Minute)
	s := &script{steps: steps}
	initial, _ := steps[0]()
	f := &follower{name: "e", object: "TrafficRoute test-server", read: s.read, tl: tl, poll: time.Millisecond, readTimeout: scenarios.DefaultReadTimeout, every: time.Nanosecond, start: start, w: io.Discard}
	if err := f.begin(context.Background(), initial); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the script read", s.done)
	waitUntil(t, "the change's windows", func() bool { return f.count() >= tally.MaxWindows })
	ws, warnings := f.stop()
	if len(ws) != tally.MaxWindows || len(warnings) != 0 {
		t.Fatalf("%d windows, warnings %q; want %d, none", len(ws), warnings, tally.MaxWindows)
	}
	if last := ws[len(ws)-1]; last.Expected.Shares["c1"] != 0.5 || last.Settling || !ws[len(ws)-2].Settling {
		t.Errorf("the last windows do not follow the change: %+v, %+v", ws[len(ws)-2], last)
	}
}
