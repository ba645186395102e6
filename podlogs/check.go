package podlogs

import (
	"regexp"
	"sync"
	"time"
)

// Limits of the sample lines a RuleCheck keeps.
const (
	MaxSamples  = 3
	SampleBytes = 300
)

// RuleCheck keeps what one rule made of the lines of one workload: how
// many it read, matched and excluded, the first lines it did not match,
// and every line per second. A rule that misses the lines of requests is
// then told from pods that got none: their logs grew in the window beyond
// their background, yet the rule matched nothing. Safe for concurrent use.
type RuleCheck struct {
	from time.Time
	// opposite matches the other side of a proxy's access log (nil: none).
	opposite *regexp.Regexp

	mu                      sync.Mutex
	read, matched, excluded int64
	opposites               int64
	// samples of lines not matched: from the window's start on, and before.
	samples, early []string
	perSecond      map[int64]int
}

// NewRuleCheck returns an empty check; lines from `from` on (the window's
// start) are preferred as samples, being the likeliest request lines.
func NewRuleCheck(from time.Time) *RuleCheck {
	return &RuleCheck{from: from, perSecond: map[int64]int{}}
}

// WithOpposite makes the check count the lines the rule did not match that
// re does: a proxy's access-log lines of the other side (Preset.Opposite).
func (c *RuleCheck) WithOpposite(re *regexp.Regexp) *RuleCheck {
	c.opposite = re
	return c
}

// Note records one line read and what the rule made of it.
func (c *RuleCheck) Note(l Line, m Match, matched bool) {
	opposite := !matched && c.opposite != nil && c.opposite.MatchString(l.Text)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.read++
	c.perSecond[l.Time.Unix()]++
	if opposite {
		c.opposites++
	}
	switch {
	case matched:
		c.matched++
	case m.Excluded:
		c.excluded++
	case !l.Time.Before(c.from) && len(c.samples) < MaxSamples:
		c.samples = append(c.samples, cutSample(l.Text))
	case l.Time.Before(c.from) && len(c.early) < MaxSamples:
		c.early = append(c.early, cutSample(l.Text))
	}
}

func cutSample(s string) string {
	if len(s) > SampleBytes {
		return s[:SampleBytes]
	}
	return s
}

// RuleStats is what a RuleCheck saw.
type RuleStats struct {
	Read     int64 `json:"read"`
	Matched  int64 `json:"matched"`
	Excluded int64 `json:"excluded"`
	// Opposite counts the lines not matched that are the other side of a
	// proxy's access log (WithOpposite).
	Opposite int64 `json:"opposite,omitempty"`
	// Samples are up to MaxSamples lines the rule did not match, from the
	// window's start on when there are any.
	Samples []string `json:"samples,omitempty"`
	// Lines counts every line read, in the window and its background.
	Lines ClassCount `json:"lines"`
	// Seconds counts the distinct seconds of the window with a line.
	Seconds int `json:"seconds"`
}

// MissedSeconds is how many distinct seconds of the window must have lines
// before a rule that matched none of them is said to miss the request
// lines: requests arrive through the attack, while an app's start-up
// messages or one stack trace come in a second or two. An attack shorter
// than that asks for every second it covered, but never fewer than
// minMissedSeconds (see MissedNeeds).
const MissedSeconds = 3

// minMissedSeconds: lines in a single second tell nothing from a burst.
const minMissedSeconds = 2

// MissedNeeds is how many seconds with lines Missed asks for after an
// attack from start to end: MissedSeconds, or the distinct seconds a
// shorter attack touched (600 requests in 1.8 s can fall in two), at
// least minMissedSeconds. An attack whose end is unknown (end before
// start) asks for MissedSeconds.
func MissedNeeds(start, end time.Time) int {
	if end.Before(start) {
		return MissedSeconds
	}
	touched := int(end.Unix()-start.Unix()) + 1
	return max(minMissedSeconds, min(MissedSeconds, touched))
}

// Stats returns the counts, with every line counted over w (without Since:
// a workload's pods differ in age, so its background period is w's).
func (c *RuleCheck) Stats(w Window) RuleStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := RuleStats{Read: c.read, Matched: c.matched, Excluded: c.excluded, Opposite: c.opposites}
	s.Samples = append(s.Samples, c.samples...)
	for _, e := range c.early {
		if len(s.Samples) < MaxSamples {
			s.Samples = append(s.Samples, e)
		}
	}
	w.Since = nil
	sp := w.span(Target{})
	s.Lines = sp.count(func(sec int64) int { return c.perSecond[sec] }, keys(c.perSecond))
	for sec := range c.perSecond {
		if sp.inWindow(sec) {
			s.Seconds++
		}
	}
	return s
}

// Missed reports whether the rule matched none of the workload's lines
// while its pods logged more in the window than their background explains
// (by more than 3σ plus slack lines), in at least seconds of its seconds
// (MissedNeeds): then it misses the request lines. A pod that got no
// request and only started up in the window (a mirror switched off, a
// rollout's fresh pod) is not a rule's mistake.
func (s RuleStats) Missed(slack float64, seconds int) bool {
	return s.Read > 0 && s.Matched == 0 && s.Seconds >= seconds && s.Lines.Net() > Tolerance(s.Lines.Variance, slack)
}
