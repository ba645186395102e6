package measure

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/tally"
)

// progress prints the attack's state while it runs: on a terminal one line
// rewritten in place every 250ms, otherwise a plain line every few seconds
// so CI logs stay readable.
func progress(ctx context.Context, o Progress, t *tally.Tally, ao attack.Options, done chan<- struct{}) {
	defer close(done)
	every := o.Every
	if every <= 0 {
		every = 5 * time.Second
	}
	if o.Terminal {
		every = 250 * time.Millisecond
	}
	start := time.Now()
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			if o.Terminal {
				fmt.Fprintf(o.W, "\r%s\n", line(t, start, ao))
			}
			return
		case <-tick.C:
			if o.Terminal {
				fmt.Fprintf(o.W, "\r\033[K%s", line(t, start, ao))
			} else {
				fmt.Fprintln(o.W, line(t, start, ao))
			}
		}
	}
}

// remaining is how far the attack has come (0..1) and how long it has
// left, by whichever of its bounds ends it first: Duration (time left) or
// Requests (requests left at the rate achieved so far). ok is false for
// an attack with neither, or before a rate can be told.
func remaining(done int64, el time.Duration, rate float64, ao attack.Options) (frac float64, left time.Duration, ok bool) {
	if ao.Duration > 0 {
		frac = min(1, float64(el)/float64(ao.Duration))
		left = max(0, ao.Duration-el)
		ok = true
	}
	if ao.Requests > 0 && rate > 0 {
		f := min(1, float64(done)/float64(ao.Requests))
		l := time.Duration(float64(max(0, int64(ao.Requests)-done)) / rate * float64(time.Second))
		if !ok || l < left {
			frac, left = f, l
		}
		ok = true
	}
	return frac, left, ok
}

// progressClusters bounds the clusters the progress line names.
const progressClusters = 8

func line(t *tally.Tally, start time.Time, ao attack.Options) string {
	s := t.Snapshot()
	el := time.Since(start)
	rate := float64(s.Total) / el.Seconds()
	var b strings.Builder
	// The total: --requests exactly, else what the asked rate (or ramp)
	// sends in the duration, approximately; none for a closed loop bound
	// by time alone.
	switch total := PlannedRequests(ao); {
	case total > 0 && total == int64(ao.Requests):
		fmt.Fprintf(&b, "%5.1fs  %d/%d requests  %.1f/s", el.Seconds(), s.Total, total, rate)
	case total > 0:
		fmt.Fprintf(&b, "%5.1fs  %d/~%d requests  %.1f/s", el.Seconds(), s.Total, total, rate)
	default:
		fmt.Fprintf(&b, "%5.1fs  %d requests  %.1f/s", el.Seconds(), s.Total, rate)
	}
	if ao.Rate.Freq > 0 {
		fmt.Fprintf(&b, " (asked %.1f/s)", ao.Rate.Rate(0))
	}
	if frac, left, ok := remaining(s.Total, el, rate, ao); ok {
		fmt.Fprintf(&b, "  %.0f%% ETA %s", 100*frac, left.Round(time.Second))
	}
	oc := s.Dimensions[tally.Outcome]
	var ok int64
	for i, n := range oc.Buckets {
		if n == tally.Success {
			ok = oc.N[i]
		}
	}
	if s.Total > 0 {
		fmt.Fprintf(&b, "  success %.1f%%", 100*float64(ok)/float64(s.Total))
	}
	if s.Unread > 0 {
		// Said while it happens: the split shown leaves these out.
		fmt.Fprintf(&b, "  %d not attributed (attribution overloaded)", s.Unread)
	}
	c := s.Dimensions["cluster"]
	var tot int64
	for _, n := range c.N {
		tot += n
	}
	if tot > 0 {
		idx := make([]int, len(c.Buckets))
		for i := range idx {
			idx[i] = i
		}
		// The largest few, by name: cluster names come from responses, and
		// a rule that captures a per-request value would make one line of
		// thousands of names (and its control characters would reach the
		// terminal unescaped).
		sort.Slice(idx, func(a, b int) bool { return c.N[idx[a]] > c.N[idx[b]] })
		shown := idx[:min(len(idx), progressClusters)]
		sort.Slice(shown, func(a, b int) bool { return c.Buckets[shown[a]] < c.Buckets[shown[b]] })
		b.WriteString("  split")
		for _, i := range shown {
			fmt.Fprintf(&b, " %s %.1f%%", reports.Printable(c.Buckets[i]), 100*float64(c.N[i])/float64(tot))
		}
		if more := len(idx) - len(shown); more > 0 {
			fmt.Fprintf(&b, " (+%d more)", more)
		}
	}
	return b.String()
}
