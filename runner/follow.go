package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/meshconfig"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// cutFixedWindows cuts the tally for a split in fixed windows
// (split.windows.every) from the attack's start: up to the attack's
// duration when it has one, else up to tally.MaxWindows windows (the
// last then holds everything after it). Windows that get no request are
// not judged (assert.SplitWindows), so cutting ahead costs nothing.
func cutFixedWindows(sc *scenarios.Scenario, tl *tally.Tally, start time.Time) error {
	for _, e := range sc.Expect {
		sp := e.Split
		if sp == nil || sp.Windows == nil || sp.Windows.Every.Duration <= 0 {
			continue
		}
		every := sp.Windows.Every.Duration
		n := tally.MaxWindows
		if d := sc.Attack.Duration.Duration; d > 0 {
			n = min(n, int((d+every-1)/every))
		}
		for i := range n {
			if _, err := tl.Cut(start.Add(time.Duration(i) * every)); err != nil {
				return fmt.Errorf("expectation %q: split.windows: %w", e.Name, err)
			}
		}
		return nil // validation allows one split in windows
	}
	return nil
}

// follower follows the mesh object of a split judged in windows that
// follow it (split.windows.follow; docs/statistics.md §10): it reads the
// object every poll with the run's credentials, through the client
// meshconfig reads it with at the start, and at each change of the
// shares it defines cuts the tally: a settling window from the last poll
// that still saw the old version (the change happened since) until
// settle after the poll that saw the new one, then a window judged
// against the new version.
type follower struct {
	// name is the expectation's, object the followed object's; read
	// reads and resolves it (meshQuery.resolve; a test's script).
	name, object string
	read         func(context.Context) (meshconfig.Expected, error)
	tl           *tally.Tally
	poll         time.Duration
	settle       time.Duration
	// readTimeout bounds one read (split.windows.readTimeout; default
	// scenarios.DefaultReadTimeout).
	readTimeout time.Duration
	// every > 0 also cuts a window, against the same version, once the
	// window in force has lasted every (a converge gate's windows,
	// --converge-window): a gate judges windows as they seal, and a
	// version that holds for the whole run would otherwise be one window.
	// The cut is made here, in the loop that cuts at changes, so that the
	// cuts stay in time order.
	every time.Duration
	start time.Time
	w     io.Writer

	mu       sync.Mutex
	windows  []judge.MeshWindow
	warnings []string

	cancel context.CancelFunc
	done   chan struct{}
}

// maxFollowWarnings bounds the read failures a follower reports: a lost
// API server during a long run would otherwise repeat every poll.
const maxFollowWarnings = 5

// startFollow cuts the first window at start, judged against the split
// read at the start, and follows the object until stop.
// every > 0 also cuts a window every that long between changes.
func startFollow(ctx context.Context, mq meshQuery, initial meshconfig.Expected, win *scenarios.Windows, every time.Duration, tl *tally.Tally, start time.Time, w io.Writer) (*follower, error) {
	if w == nil {
		w = io.Discard
	}
	f := &follower{name: mq.name, object: mq.q.Ref.Object(), read: mq.resolve, tl: tl, poll: win.PollEvery(), settle: win.SettleTime(), readTimeout: win.ReadTimeoutOr(), every: every, start: start, w: w}
	return f, f.begin(ctx, initial)
}

// hold is how far in the past a change's settling window may open: the
// last read that saw the old version began up to a poll and a read
// before the next read began (the ticker keeps one tick while a read
// runs late), which ends up to a read later, when the change is seen.
func (f *follower) hold() time.Duration {
	return f.poll + 2*f.readTimeout
}

// begin makes the tally hold answers back for hold, so that a settling
// window cut in the past takes the answers after its start, cuts the
// first window and starts following.
func (f *follower) begin(ctx context.Context, initial meshconfig.Expected) error {
	if err := f.tl.SetHold(f.hold()); err != nil {
		return fmt.Errorf("expectation %q: split.windows.follow: %w", f.name, err)
	}
	if err := f.cut(f.start, f.start, false, initial, nil); err != nil {
		return err
	}
	f.done = make(chan struct{})
	ctx, f.cancel = context.WithCancel(ctx)
	go f.loop(ctx, initial)
	return nil
}

// cut starts a window at at and records the split in force in it. The
// tally starts it later when answers after at were already counted in a
// window (reads that failed in between held the last good one further
// back than the hold): that is said, since those answers stay in the
// window before.
func (f *follower) cut(at, seen time.Time, settling bool, ex meshconfig.Expected, err error) error {
	used, cerr := f.tl.Cut(at)
	if cerr != nil {
		return fmt.Errorf("expectation %q: split.windows.follow: %w", f.name, cerr)
	}
	if used.After(at) {
		f.warn("expectation %q: the window from %s of the attack starts at %s: the answers in between were counted in the window before (the last read of the old version was more than %s earlier)",
			f.name, at.Sub(f.start).Round(100*time.Millisecond), used.Sub(f.start).Round(100*time.Millisecond), f.hold())
	}
	f.mu.Lock()
	f.windows = append(f.windows, judge.MeshWindow{Start: used, SeenAt: seen, Settling: settling, Expected: ex, Err: err})
	f.mu.Unlock()
	return nil
}

// resettle makes the open settling window expect the newest version: a
// change seen while the previous one settled.
func (f *follower) resettle(seen time.Time, ex meshconfig.Expected, err error) {
	f.mu.Lock()
	last := &f.windows[len(f.windows)-1]
	last.Expected, last.Err, last.SeenAt = ex, err, seen
	f.mu.Unlock()
}

func (f *follower) warn(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch n := len(f.warnings); {
	case n < maxFollowWarnings:
		f.warnings = append(f.warnings, fmt.Sprintf(format, args...))
	case n == maxFollowWarnings:
		f.warnings = append(f.warnings, fmt.Sprintf("expectation %q: further read failures of the followed object not reported", f.name))
	}
}

func (f *follower) loop(ctx context.Context, cur meshconfig.Expected) {
	defer close(f.done)
	tick := time.NewTicker(f.poll)
	defer tick.Stop()
	var curErr error
	lastSeen := f.start // when the last read that saw the version in force began
	var settleC <-chan time.Time
	var settleAt time.Time
	var next meshconfig.Expected
	var nextErr error
	var nextSeen time.Time
	stopped := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-settleC:
			settleC = nil
			if err := f.cut(settleAt, nextSeen, false, next, nextErr); err != nil {
				f.warn("%v: the split is judged on the windows cut so far", err)
				stopped = true
			}
		case <-tick.C:
			if stopped {
				continue
			}
			// A read takes time (every cluster's objects and pods, one
			// list after another): what it returns held at some instant
			// between asked and now. So the version read was still in
			// force after asked, and a new one was made before now: the
			// settling window opens at the last read's asked, not its
			// end, or a loaded API server's second would count the data
			// plane's move in the window before the change.
			asked := time.Now()
			rctx, cancel := context.WithTimeout(ctx, f.readTimeout)
			ex, err := f.read(rctx)
			cancel()
			now := time.Now()
			var rerr resolveError
			switch {
			case ctx.Err() != nil:
				return
			case err != nil && !errors.As(err, &rerr):
				f.warn("%v (at %s of the attack; the window in force continues)", err, now.Sub(f.start).Round(100*time.Millisecond))
				continue
			}
			var exErr error
			if err != nil {
				exErr = rerr.err
			}
			if sameSplit(cur, curErr, ex, exErr) {
				lastSeen = asked
				if f.every > 0 && settleC == nil && asked.Sub(f.lastStart()) >= f.every && f.count() < tally.MaxWindows-changeCuts {
					// The version read held at asked: a window of the
					// same version, so the one before can seal. The
					// tally's last windows are kept for a change: a
					// change it could not cut would stop the follow, and
					// the rest of the run would be judged against the
					// version before it.
					if err := f.cut(asked, asked, false, cur, curErr); err != nil {
						f.warn("%v: the split is judged on the windows cut so far", err)
						stopped = true
					}
				}
				continue
			}
			fmt.Fprintf(f.w, "expectation %q: %s changed (seen at %s of the attack): %s\n", f.name, f.object, now.Sub(f.start).Round(100*time.Millisecond), describeVersion(ex, exErr))
			if settleC == nil {
				// The change happened after lastSeen: from there until
				// settle after now, the data plane may be on either.
				at := lastSeen
				if last := f.lastStart(); !at.After(last) {
					at = last.Add(time.Microsecond)
				}
				if err := f.cut(at, now, true, ex, exErr); err != nil {
					f.warn("%v: the split is judged on the windows cut so far", err)
					stopped = true
					continue
				}
			} else {
				f.resettle(now, ex, exErr)
			}
			next, nextErr, nextSeen, cur, curErr, lastSeen = ex, exErr, now, ex, exErr, asked
			settleAt = now.Add(f.settle)
			settleC = time.After(f.settle)
		}
	}
}

// changeCuts is the windows a change cuts: the settling one and the one
// after it.
const changeCuts = 2

// count is the number of windows cut so far.
func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.windows)
}

// snapshot copies the windows recorded so far: a converge gate judges
// them while the follower goes on.
func (f *follower) snapshot() []judge.MeshWindow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.windows)
}

func (f *follower) lastStart() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.windows[len(f.windows)-1].Start
}

// stop ends the following and returns the windows recorded, paired with
// the tally's, and the read failures.
func (f *follower) stop() ([]judge.MeshWindow, []string) {
	f.cancel()
	<-f.done
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.windows, f.warnings
}

// sameSplit reports whether two reads define the same split: a new
// resourceVersion that changes nothing the split depends on (a label, an
// unrelated route) is no change.
func sameSplit(a meshconfig.Expected, aErr error, b meshconfig.Expected, bErr error) bool {
	if aErr != nil || bErr != nil {
		return aErr != nil && bErr != nil && aErr.Error() == bErr.Error()
	}
	return maps.Equal(a.Shares, b.Shares)
}

// describeVersion is a version read of the followed object for the
// progress line, which a converge gate's run prints live: the shares'
// names, the resourceVersion and a resolution error come from the
// cluster, so they are made printable (reports.Printable).
func describeVersion(ex meshconfig.Expected, err error) string {
	if err != nil {
		return reports.Printable("no expected split: " + err.Error())
	}
	rv := ""
	for _, s := range ex.Sources {
		rv += " " + s.Kind + " resourceVersion " + s.ResourceVersion
	}
	return reports.Printable("expected split " + judge.FormatShares(ex.Shares) + ";" + rv)
}
