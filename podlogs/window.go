package podlogs

import (
	"maps"
	"math"
	"slices"
	"time"
)

// Window is where a run's lines without its request id count: the attack
// window [From, To] = [attack start − skew, attack end + settle], and the
// background period [From − Background, From) before it, where each pod's
// usual rate of such lines (kubelet probes, other clients) is measured so
// that it can be taken out (README.md, counting without request ids).
// Both are applied to the second: lines are counted per second.
type Window struct {
	From, To   time.Time
	Background time.Duration
	// Since, when set, says when a target's log began (its pod's start): a
	// pod younger than the background period has a shorter one.
	Since func(Target) time.Time
}

// BackgroundBin is the width of the bins the background rate is averaged
// over. Bins far above the quiet ones (a burst, such as the previous run's
// requests) are left out, so a run right after another does not take the
// other's traffic for background, even when the burst fills nearly all of
// a young pod's short history. One second: such a pod still has enough
// bins.
const BackgroundBin = time.Second

// baselineBins is how many of the bins just before the window set the
// level above which a bin is a burst.
const baselineBins = 3

// burstGuard is how many bins on each side of a burst are left out with it:
// a run starts and ends inside a second, so the seconds it only partly
// filled look quiet without being background.
const burstGuard = 1

// ClassCount is one kind of line in a pod's log: how many fell in the
// window, and how many the background explains.
type ClassCount struct {
	// Window counts the lines in the attack window.
	Window int `json:"window"`
	// Background counts the lines in the background period.
	Background int `json:"background"`
	// Rate is the background rate per second.
	Rate float64 `json:"rate"`
	// Expected is the background's expected lines in the window.
	Expected float64 `json:"expected"`
	// Variance is the Poisson variance of Window − Expected when only
	// background fell in the window: λT from the window plus (T/B)²·λB
	// from the rate's own estimate.
	Variance float64 `json:"variance"`
}

// Net is the window's lines less the background's share: the run's.
func (c ClassCount) Net() float64 { return float64(c.Window) - c.Expected }

// span is a Window in unix seconds for one target.
type span struct {
	from, to     int64 // window, inclusive
	open, opened bool  // no end; no start
	bgFrom       int64 // background period [bgFrom, from)
	background   time.Duration
}

func (w Window) span(t Target) span {
	s := span{from: w.From.Unix(), to: w.To.Unix(), open: w.To.IsZero(), opened: w.From.IsZero()}
	s.bgFrom = s.from
	if w.Background > 0 && !s.opened {
		s.bgFrom = w.From.Add(-w.Background).Unix()
		if w.Since != nil {
			if since := w.Since(t); !since.IsZero() {
				// The first whole second the log covers.
				first := since.Unix()
				if since.After(time.Unix(first, 0)) {
					first++
				}
				s.bgFrom = min(max(s.bgFrom, first), s.from)
			}
		}
		s.background = time.Duration(s.from-s.bgFrom) * time.Second
	}
	return s
}

func (s span) inWindow(sec int64) bool {
	return (s.opened || sec >= s.from) && (s.open || sec <= s.to)
}

func (s span) inBackground(sec int64) bool { return !s.opened && sec >= s.bgFrom && sec < s.from }

// count sums one class over the window and estimates its background; get
// returns the class's lines in a second, secs lists the seconds with any.
func (s span) count(get func(sec int64) int, secs []int64) ClassCount {
	var c ClassCount
	last := s.from - 1 // the window's last second: its end, else the last line's
	if !s.open {
		last = s.to
	}
	for _, sec := range secs {
		switch {
		case s.inWindow(sec):
			c.Window += get(sec)
			last = max(last, sec)
		case s.inBackground(sec):
			c.Background += get(sec)
		}
	}
	if s.background <= 0 {
		return c
	}
	// Bins of BackgroundBin ending at the window's start; a burst is a bin
	// above q + 3√q + 3, which a Poisson count of the background's rate
	// reaches rarely. q is the lower of two quiet levels: the bins' lower
	// quartile (quiet when the history is older than a burst in it) and the
	// smallest of the last baselineBins bins (quiet when a burst fills a
	// young pod's history: a run ends only once its logs stopped growing).
	// The smallest, not their median: the previous run's last lines may
	// still fall in one or two of them. A burst's neighbours within
	// burstGuard bins are left out too: the seconds a run only partly
	// filled (its last requests finishing) are below the limit but not
	// background. When
	// no bin is left, nothing is known of a background and none is taken
	// out. When neither level is quiet the rate is too high, the window's
	// net count too low, and the reconciliation says so: INCONCLUSIVE,
	// never a verdict on a wrong count.
	width := int64(BackgroundBin / time.Second)
	nbins := (s.from - s.bgFrom) / width
	var rate, used float64
	if nbins >= 3 {
		bins := make([]int, nbins)
		for sec := s.from - nbins*width; sec < s.from; sec++ {
			bins[(s.from-1-sec)/width] += get(sec)
		}
		sorted := slices.Sorted(slices.Values(bins))
		q := float64(min(sorted[(len(sorted)-1)/4], slices.Min(bins[:min(baselineBins, len(bins))]))) // bins[0] is the last second
		limit := q + 3*math.Sqrt(q) + 3
		near := make([]bool, len(bins)) // within burstGuard bins of a burst
		for i, b := range bins {
			if float64(b) > limit {
				for j := max(0, i-burstGuard); j <= min(len(bins)-1, i+burstGuard); j++ {
					near[j] = true
				}
			}
		}
		var sum, kept float64
		for i, b := range bins {
			if !near[i] {
				sum += float64(b)
				kept++
			}
		}
		used = max(kept, 1) * float64(width)
		rate = sum / used
	} else {
		used = s.background.Seconds()
		rate = float64(c.Background) / used
	}
	t := float64(last - s.from + 1) // the window's length in seconds
	c.Rate = rate
	c.Expected = rate * t
	c.Variance = rate * t * (1 + t/used)
	return c
}

// keys lists a per-second map's seconds.
func keys[V any](m map[int64]V) []int64 { return slices.Collect(maps.Keys(m)) }

// Tolerance is how far a count may stray from what it should be before it
// is a disagreement rather than noise: three standard deviations of the
// background's Poisson noise plus slack lines (README.md, reconciliation).
func Tolerance(variance, slack float64) float64 {
	return 3*math.Sqrt(max(variance, 0)) + slack
}
