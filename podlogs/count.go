package podlogs

import (
	"math/bits"
	"strconv"
	"strings"
	"sync"
	"time"
)

// seqSet is a set of request sequence numbers as a paged bitset: one bit per
// number in every 4096-number page touched, so a set over a run of n
// requests takes about n/8 bytes however many lines name them. Pages sit in
// a map so that a stray huge number costs one page, not a gigabyte slice.
type seqSet struct {
	pages map[uint64]*[pageWords]uint64
	n     int
}

const pageWords = 64 // 64 words of 64 bits: 4096 numbers, 512 bytes

func (s *seqSet) add(seq uint64) bool {
	if s.pages == nil {
		s.pages = map[uint64]*[pageWords]uint64{}
	}
	p := s.pages[seq/(pageWords*64)]
	if p == nil {
		p = new([pageWords]uint64)
		s.pages[seq/(pageWords*64)] = p
	}
	w, b := (seq/64)%pageWords, uint64(1)<<(seq%64)
	if p[w]&b != 0 {
		return false
	}
	p[w] |= b
	s.n++
	return true
}

func (s *seqSet) has(seq uint64) bool {
	p := s.pages[seq/(pageWords*64)]
	return p != nil && p[(seq/64)%pageWords]&(uint64(1)<<(seq%64)) != 0
}

func (s *seqSet) each(fn func(uint64)) {
	for k, p := range s.pages {
		for i, w := range p {
			for w != 0 {
				b := bits.TrailingZeros64(w)
				fn(k*pageWords*64 + uint64(i)*64 + uint64(b))
				w &= w - 1
			}
		}
	}
}

// intersect counts the numbers in both sets.
func intersect(a, b *seqSet) int {
	if len(a.pages) > len(b.pages) {
		a, b = b, a
	}
	n := 0
	for k, pa := range a.pages {
		if pb := b.pages[k]; pb != nil {
			for i := range pa {
				n += bits.OnesCount64(pa[i] & pb[i])
			}
		}
	}
	return n
}

// ParseRequestID returns the sequence number of id when it is a request id
// of run runID ("<runID>-<seq>", as the attack stamps them).
func ParseRequestID(runID, id string) (uint64, bool) {
	rest, ok := strings.CutPrefix(id, runID+"-")
	if !ok || rest == "" || rest[0] == '+' {
		return 0, false
	}
	seq, err := strconv.ParseUint(rest, 10, 64)
	return seq, err == nil
}

// CounterOptions configure a Counter.
type CounterOptions struct {
	// RunID selects this run's request ids; lines with others are ignored.
	RunID string
	// From and To bound the attack window, [start − skew, end + settle]:
	// lines without a request id count only inside it (zero: unbounded).
	From, To time.Time
	// Mirror tells which matches are mirrored copies (nil: Match.Shadow).
	// Use the mirror target's pods when the proxy does not mark copies.
	Mirror func(Match) bool
}

// PodCount is what one target's log says about the run.
type PodCount struct {
	// Lines counts the matched lines counted for the run: with one of its
	// request ids, or without an id inside the window.
	Lines int
	// Requests counts the distinct requests of the run served here.
	Requests int
	// Mirrored counts the distinct mirrored copies of the run's requests.
	Mirrored int
	// Duplicates counts lines that repeat a request id already counted
	// here (a retry to the same pod, or a line logged twice).
	Duplicates int
	// NoID counts lines without a request id inside the window: the only
	// measure when the app does not log the id.
	NoID int
	// OutsideWindow counts lines without a request id outside the window.
	OutsideWindow int
	// Foreign counts lines whose request id is not of this run.
	Foreign int
}

// Totals join every target's log.
type Totals struct {
	// Requests counts distinct requests seen served by any pod.
	Requests int
	// Mirrored counts distinct requests seen as mirrored copies.
	Mirrored int
	// MirroredServed counts the requests seen both served and mirrored:
	// the mirror share is q̂ = MirroredServed / Requests (DESIGN.md §4).
	MirroredServed int
	// MultiPod counts requests seen served by more than one target.
	MultiPod int
	// NoID sums the targets' NoID lines.
	NoID int
}

// Counter joins matches to one run. Its memory grows with the highest
// request number and the number of targets (a bitset each), never per line.
// It is safe for concurrent use.
type Counter struct {
	opts CounterOptions

	mu       sync.Mutex
	pods     map[Target]*podCounter
	served   seqSet // union over targets
	mirrored seqSet
	multi    seqSet
	noID     int
}

type podCounter struct {
	PodCount
	served, mirrored seqSet
}

// NewCounter returns an empty Counter.
func NewCounter(o CounterOptions) *Counter {
	if o.Mirror == nil {
		o.Mirror = func(m Match) bool { return m.Shadow }
	}
	return &Counter{opts: o, pods: map[Target]*podCounter{}}
}

// Add counts one match.
func (c *Counter) Add(m Match) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pods[m.Line.Target]
	if p == nil {
		p = &podCounter{}
		c.pods[m.Line.Target] = p
	}
	if m.RequestID == "" {
		if (!c.opts.From.IsZero() && m.Line.Time.Before(c.opts.From)) || (!c.opts.To.IsZero() && m.Line.Time.After(c.opts.To)) {
			p.OutsideWindow++
			return
		}
		p.Lines++
		p.NoID++
		c.noID++
		return
	}
	seq, ok := ParseRequestID(c.opts.RunID, m.RequestID)
	if !ok {
		p.Foreign++
		return
	}
	p.Lines++
	if c.opts.Mirror(m) {
		if !p.mirrored.add(seq) {
			p.Duplicates++
			return
		}
		p.Mirrored++
		c.mirrored.add(seq)
		return
	}
	if !p.served.add(seq) {
		p.Duplicates++
		return
	}
	p.Requests++
	if !c.served.add(seq) {
		c.multi.add(seq)
	}
}

// Pods returns every target's counts.
func (c *Counter) Pods() map[Target]PodCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Target]PodCount, len(c.pods))
	for t, p := range c.pods {
		out[t] = p.PodCount
	}
	return out
}

// Totals returns the join over all targets.
func (c *Counter) Totals() Totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	return Totals{
		Requests:       c.served.n,
		Mirrored:       c.mirrored.n,
		MirroredServed: intersect(&c.served, &c.mirrored),
		MultiPod:       c.multi.n,
		NoID:           c.noID,
	}
}

// Served reports the targets whose logs show request seq served, so the
// attribution can compare them with what the response said.
func (c *Counter) Served(seq uint64) []Target {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Target
	for t, p := range c.pods {
		if p.served.has(seq) {
			out = append(out, t)
		}
	}
	return out
}

// EachServed calls fn for every (request, target) pair seen served, in no
// particular order: one pass over the bitsets instead of a Served query per
// request. fn must not call the Counter.
func (c *Counter) EachServed(fn func(seq uint64, t Target)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, p := range c.pods {
		p.served.each(func(seq uint64) { fn(seq, t) })
	}
}

// MirroredSeen reports whether a mirrored copy of request seq was logged.
func (c *Counter) MirroredSeen(seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mirrored.has(seq)
}
