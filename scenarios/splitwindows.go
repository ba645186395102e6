package scenarios

import (
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
)

// Windows judges a split over time (split.windows; docs/statistics.md §10):
// in fixed windows (every), or in windows that follow the mesh object its
// expected shares come from (follow, with fromMesh): every change of the
// shares the object defines starts a window judged against them. Each
// window is judged on its own and α is spent over them, so the split
// FAILs when any window FAILs and PASSes when every window PASSes.
type Windows struct {
	// Every cuts the attack into windows of this length from its start.
	Every Duration `yaml:"every"`
	// Follow re-reads the fromMesh object during the run (every Poll) and
	// starts a window at each change of the expected shares it defines.
	Follow bool `yaml:"follow"`
	// Poll is how often a followed object is read; default DefaultPoll.
	Poll Duration `yaml:"poll"`
	// Settle is how long after a change of the expected shares the data
	// plane is given to converge: the requests sent then are reported but
	// not judged. Default DefaultSettle with follow; fixed windows have no
	// changes.
	Settle *Duration `yaml:"settle"`
	// ReadTimeout bounds one read of a followed object (every cluster's
	// objects and pods): a read that takes longer fails, with a warning,
	// and the window in force continues. It bounds how long the run holds
	// the answers back before it counts them in a window (the poll plus
	// two reads: docs/statistics.md §10). Default DefaultReadTimeout.
	ReadTimeout Duration `yaml:"readTimeout"`
}

// Limits and defaults of split.windows (README.md, Limits).
const (
	// MinWindow is the shortest window: the tally's timeline has a
	// one-second resolution, and a shorter window holds too few requests.
	MinWindow = time.Second
	// DefaultPoll and MinPoll/MaxPoll bound how often a followed object is
	// read: often enough to time a change to a second or two, rarely
	// enough not to load the API server.
	DefaultPoll = 2 * time.Second
	MinPoll     = 200 * time.Millisecond
	MaxPoll     = time.Minute
	// DefaultSettle is the settling time after a change: an Envoy config
	// push converges within seconds (docs/statistics.md §10).
	DefaultSettle = 5 * time.Second
	// MaxSettle bounds the settling time.
	MaxSettle = 10 * time.Minute
	// DefaultReadTimeout and MinReadTimeout/MaxReadTimeout bound one
	// read of a followed object: a loaded API server takes a second or
	// two to list every cluster's objects and pods.
	DefaultReadTimeout = 10 * time.Second
	MinReadTimeout     = 100 * time.Millisecond
	MaxReadTimeout     = time.Minute
)

// SettleTime is the settling time after a change, with its default.
func (w *Windows) SettleTime() time.Duration {
	switch {
	case w.Settle != nil:
		return w.Settle.Duration
	case w.Follow:
		return DefaultSettle
	}
	return 0
}

// PollEvery is how often a followed object is read, with its default.
func (w *Windows) PollEvery() time.Duration {
	if w.Poll.Duration > 0 {
		return w.Poll.Duration
	}
	return DefaultPoll
}

// ReadTimeoutOr is the bound of one read of a followed object, with its
// default.
func (w *Windows) ReadTimeoutOr() time.Duration {
	if w.ReadTimeout.Duration > 0 {
		return w.ReadTimeout.Duration
	}
	return DefaultReadTimeout
}

// checkWindows validates split.windows at path p.
func (s *Scenario) checkWindows(c *checker, p string, sp *Split) {
	w := sp.Windows
	if w == nil {
		return
	}
	wp := p + ".windows"
	for _, e := range s.Expect {
		if o := e.Split; o != nil && o.Windows != nil {
			if o != sp {
				c.add(wp, "a second split in windows: the run cuts one set of windows, for one split")
			}
			break
		}
	}
	switch {
	case w.Follow && w.Every.Duration > 0:
		c.add(wp, "every and follow: windows are fixed or follow the mesh object, not both")
	case !w.Follow && w.Every.Duration == 0:
		c.add(wp, "set every (fixed windows, like 10s) or follow: true (with fromMesh)")
	case w.Follow && sp.FromMesh == nil:
		c.add(wp+".follow", "follow needs fromMesh: the windows follow the object the expected shares are read from")
	}
	if e := w.Every.Duration; e != 0 && e < MinWindow {
		c.add(wp+".every", "want at least %s, got %s", MinWindow, e)
	}
	if d, e := s.Attack.Duration.Duration, w.Every.Duration; e >= MinWindow && d > 0 && (d+e-1)/e > assert.MaxWindows {
		c.add(wp+".every", "%s windows over a %s attack: %d windows, at most %d", e, d, (d+e-1)/e, assert.MaxWindows)
	}
	if pl := w.Poll.Duration; pl != 0 {
		if !w.Follow {
			c.add(wp+".poll", "applies to follow only")
		} else if pl < MinPoll || pl > MaxPoll {
			c.add(wp+".poll", "want %s to %s, got %s", MinPoll, MaxPoll, pl)
		}
	}
	if rt := w.ReadTimeout.Duration; rt != 0 {
		if !w.Follow {
			c.add(wp+".readTimeout", "applies to follow only")
		} else if rt < MinReadTimeout || rt > MaxReadTimeout {
			c.add(wp+".readTimeout", "want %s to %s, got %s", MinReadTimeout, MaxReadTimeout, rt)
		}
	}
	if st := w.Settle; st != nil && (st.Duration < 0 || st.Duration > MaxSettle) {
		c.add(wp+".settle", "want 0 to %s, got %s", MaxSettle, st.Duration)
	}
	if st := w.Settle; st != nil && st.Duration > 0 && !w.Follow {
		c.add(wp+".settle", "applies to follow only: fixed windows do not change the expected shares")
	}
	// A distributed run cuts the windows at the coordinator, in the
	// workers' results merged in time order (fleet.ResultWriter): the
	// whole run's, so not one source's alone.
	for _, e := range s.Expect {
		if e.Split == sp && e.From != "" {
			c.add(wp, "windows are cut in the results of every source together: judge the split in windows without from: %s", e.From)
		}
	}
}
