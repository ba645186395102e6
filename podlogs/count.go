package podlogs

import (
	"math/bits"
	"regexp"
	"strconv"
	"strings"
	"sync"
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
// of run runID: "<runID>-<seq>", as the attack stamps them, or
// "<runID>-w<i>-<seq>", as distributed worker i does (docs/distributed.md).
// A worker's sequence numbers restart at 0, so its index goes into the top
// bits (WorkerKey): every request of the run keeps a key of its own.
func ParseRequestID(runID, id string) (uint64, bool) {
	// Not CutPrefix(id, runID+"-"): that concatenation allocated once per
	// matched log line.
	rest, ok := strings.CutPrefix(id, runID)
	if !ok || len(rest) < 2 || rest[0] != '-' {
		return 0, false
	}
	rest = rest[1:]
	if rest[0] == 'w' {
		idx, seqText, ok := strings.Cut(rest[1:], "-")
		if !ok || !digits(idx) || !digits(seqText) {
			return 0, false
		}
		i, err := strconv.ParseUint(idx, 10, 16)
		if err != nil || i >= maxWorkerIndex {
			return 0, false
		}
		seq, err := strconv.ParseUint(seqText, 10, 64)
		if err != nil || seq >= 1<<workerShift {
			return 0, false
		}
		return WorkerKey(int(i), seq), true
	}
	if !digits(rest) {
		return 0, false
	}
	// At or above 2^48 a local sequence number would take a worker's key.
	seq, err := strconv.ParseUint(rest, 10, 64)
	if err != nil || seq >= 1<<workerShift {
		return 0, false
	}
	return seq, true
}

// workerShift leaves a worker 2^48 sequence numbers; maxWorkerIndex keeps
// index+1 within the 16 bits above them.
const (
	workerShift    = 48
	maxWorkerIndex = 1<<16 - 1
)

// WorkerKey is the key of worker i's request seq among a distributed run's
// requests: never a key of a single-process run's request below 2^48.
func WorkerKey(i int, seq uint64) uint64 { return uint64(i+1)<<workerShift | seq }

// digits reports whether s is one or more ASCII digits (no sign: ParseUint
// alone would take "+5").
func digits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// runRequestID is the shape of a request id another mesh-verify run stamped
// (runner.NewRunID plus "-<seq>", or a worker's "-w<i>-<seq>"): such lines belong to that run, not to
// this one, and not to the data plane either.
var runRequestID = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{6}(-w[0-9]+)?-[0-9]+$`)

// DefaultMaxDataPlaneIDs bounds the data plane's own request ids a Counter
// keeps for the mirror join: about 100 bytes each, so 25 MB at the limit.
const DefaultMaxDataPlaneIDs = 250_000

// CounterOptions configure a Counter.
type CounterOptions struct {
	// RunID selects this run's request ids; lines with other runs' ids are
	// ignored.
	RunID string
	// Mirror tells which matches are mirrored copies (nil: Match.Shadow).
	// Use the mirror target's pods when the proxy does not mark copies.
	Mirror func(Match) bool
	// Primary tells which served lines are primaries for the data-plane
	// id join (nil: all): not the mirror target's own traffic.
	Primary func(Match) bool
	// Success tells whether a logged status is a success (nil: all are).
	// Lines with a failing status count as errors, not as served requests.
	Success func(status int) bool
	// MaxDataPlaneIDs bounds the data plane's request ids kept for the
	// mirror join (DefaultMaxDataPlaneIDs); past it the join is refused.
	// The same bound holds the ids kept to count a retried request once.
	MaxDataPlaneIDs int
	// Group names the set of lines within which one request id is one
	// request, however many lines carry it (the workload whose rule
	// matched): a retry's attempts, to the same pod or another, count
	// once. Several groups may log the same request (an app that forwards
	// the id to its callee). nil: one group.
	Group func(Match) string
}

// Counter joins matches to one run. Lines with one of the run's request
// ids are joined by id: its memory grows with the highest request number
// and the number of targets (a bitset each). Lines without one (the app
// logs none, or the proxy's own id) are counted per second, so that any
// window can be applied once the attack is over and the background before
// it measured (Window); the data plane's ids are kept, up to
// MaxDataPlaneIDs, to join mirrored copies to their primaries. It is safe
// for concurrent use.
type Counter struct {
	opts CounterOptions

	mu       sync.Mutex
	pods     map[Target]*podCounter
	served   seqSet // union over targets
	mirrored seqSet
	multi    seqSet
	// The data plane's request ids, with the second they were first seen.
	dpPrimary, dpCopy map[string]int64
	dpOverflow        bool
	// groups are the run's requests served and failed per Group, and those
	// logged more than once there (retried).
	groups map[string]*groupSets
	// attempts holds, per group and data-plane request id, the line that
	// stands for the request among its attempts (lines without the run's
	// id); retriedIDs counts the ids seen more than once.
	attempts               map[attemptKey]*attemptRef
	retriedIDs, doubledIDs int
	attemptOverflow        bool
	// unmarked holds a mirror target's served lines (Primary false, no
	// copy mark) by data-plane id until a primary with the id shows they
	// were copies (Istio ≥ 1.28 marks none); unmarkedCopies counts those.
	unmarked       map[string]unmarkedRef
	unmarkedCopies int
}

type unmarkedRef struct {
	target Target
	sec    int64
}

// doubled are the run's requests two pods of the group answered with no
// failed attempt between: not a retry (Envoy retries after a failure),
// so a mirrored copy the proxy did not mark (Istio ≥ 1.28 drops the
// "-shadow" suffix by default) or a hedged request.
type groupSets struct{ served, failed, retried, doubled seqSet }

type attemptKey struct{ group, id string }

// attemptRef is the line counted for a request that has several attempt
// lines: where and in which class and second it was counted.
type attemptRef struct {
	target  Target
	sec     int64
	class   int
	attempt int
	time    int64 // UnixNano of the line
	lines   int
	// failedBefore: a line of the id had a failing status; retried and
	// doubled: the id is counted in retriedIDs or doubledIDs.
	failedBefore, retried, doubled bool
}

// Line classes of lines without this run's request id.
const (
	classServed = iota
	classCopy
	classError
	classes
)

type podCounter struct {
	lines, duplicates, foreign, failed int
	served, mirrored                   seqSet
	// failedSeqs are the run's requests this pod logged failing; notKept
	// those it served after another pod of its group had (a retry's
	// second answer): counted once, for the first pod.
	failedSeqs, notKept seqSet
	// attempts counts lines that are a further attempt of a request
	// counted already (the same id in the same group); noID the lines
	// without any request id, which count per attempt.
	attempts, noID int
	// otherIDs counts lines with a request id that is not the run's (the
	// data plane's own, or an id an edge proxy made up).
	otherIDs  int
	group     string
	perSecond map[int64]*[classes]int32
	// servedPerSecond counts the run's requests served here, by id, per
	// second of their line: the logs' timeline.
	servedPerSecond map[int64]int32
}

// NewCounter returns an empty Counter.
func NewCounter(o CounterOptions) *Counter {
	if o.Mirror == nil {
		o.Mirror = func(m Match) bool { return m.Shadow }
	}
	if o.Success == nil {
		o.Success = func(int) bool { return true }
	}
	if o.Primary == nil {
		o.Primary = func(Match) bool { return true }
	}
	if o.MaxDataPlaneIDs <= 0 {
		o.MaxDataPlaneIDs = DefaultMaxDataPlaneIDs
	}
	if o.Group == nil {
		o.Group = func(Match) string { return "" }
	}
	return &Counter{opts: o, pods: map[Target]*podCounter{}, dpPrimary: map[string]int64{}, dpCopy: map[string]int64{},
		groups: map[string]*groupSets{}, attempts: map[attemptKey]*attemptRef{}, unmarked: map[string]unmarkedRef{}}
}

func (c *Counter) group(name string) *groupSets {
	g := c.groups[name]
	if g == nil {
		g = &groupSets{}
		c.groups[name] = g
	}
	return g
}

// Add counts one match.
func (c *Counter) Add(m Match) {
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.pods[m.Line.Target]
	if p == nil {
		p = &podCounter{perSecond: map[int64]*[classes]int32{}, servedPerSecond: map[int64]int32{}, group: c.opts.Group(m)}
		c.pods[m.Line.Target] = p
	}
	failed := m.Status != 0 && !c.opts.Success(m.Status)
	copied := !failed && c.opts.Mirror(m)
	seq, ours := uint64(0), false
	if m.RequestID != "" {
		if seq, ours = ParseRequestID(c.opts.RunID, m.RequestID); !ours && runRequestID.MatchString(m.RequestID) {
			p.foreign++
			return
		}
	}
	p.lines++
	if !ours {
		class := classServed
		switch {
		case failed:
			class = classError
		case copied:
			class = classCopy
		}
		sec := m.Line.Time.Unix()
		primary := c.opts.Primary(m)
		if class == classServed && !primary && m.RequestID != "" {
			// The mirror target served a request whose id a primary
			// carries: an unmarked copy.
			if _, ok := c.dpPrimary[m.RequestID]; ok {
				class, copied = classCopy, true
				c.unmarkedCopies++
			}
		}
		if m.RequestID == "" {
			p.noID++
		} else {
			p.otherIDs++
		}
		if m.RequestID != "" && class != classCopy && !c.firstAttempt(m, p, class, sec) {
			return
		}
		p.count(sec, class, 1)
		if m.RequestID != "" && !failed && (copied || primary) {
			c.dataPlaneID(m.RequestID, sec, copied)
		}
		switch {
		case m.RequestID == "" || class != classServed:
		case !primary && len(c.unmarked) < c.opts.MaxDataPlaneIDs:
			c.unmarked[m.RequestID] = unmarkedRef{target: m.Line.Target, sec: sec}
		case primary:
			// A primary logged after its copy: the copy moves class.
			if ref, ok := c.unmarked[m.RequestID]; ok {
				delete(c.unmarked, m.RequestID)
				if tp := c.pods[ref.target]; tp != nil {
					tp.count(ref.sec, classServed, -1)
					tp.count(ref.sec, classCopy, 1)
				}
				c.dataPlaneID(m.RequestID, ref.sec, true)
				c.unmarkedCopies++
			}
		}
		return
	}
	g := c.group(c.opts.Group(m))
	switch {
	case failed:
		switch {
		case p.failedSeqs.has(seq):
			p.duplicates++
		case g.served.has(seq) || !g.failed.add(seq):
			// A failed attempt of a request answered (its lines came in
			// another order) or failed already in the group.
			g.retried.add(seq)
			p.attempts++
		default:
			p.failedSeqs.add(seq)
			p.failed++
		}
	case copied:
		if !p.mirrored.add(seq) {
			p.duplicates++
			return
		}
		c.mirrored.add(seq)
	default:
		if g.failed.has(seq) {
			g.retried.add(seq)
		}
		if !p.served.add(seq) {
			g.retried.add(seq)
			p.duplicates++
			return
		}
		if !c.served.add(seq) {
			c.multi.add(seq)
		}
		if !g.served.add(seq) {
			// Another pod of the group answered this request already: a
			// retry, or an unmarked copy when no attempt failed. It counts
			// once, for the first.
			if g.failed.has(seq) {
				g.retried.add(seq)
			} else {
				g.doubled.add(seq)
			}
			p.notKept.add(seq)
			p.attempts++
			return
		}
		p.servedPerSecond[m.Line.Time.Unix()]++
	}
}

func (p *podCounter) count(sec int64, class int, n int32) {
	h := p.perSecond[sec]
	if h == nil {
		h = new([classes]int32)
		p.perSecond[sec] = h
	}
	h[class] += n
}

// firstAttempt reports whether a line without the run's id, with the data
// plane's request id, is to be counted: the first line of its id in its
// group, or a later attempt that stands for the request better (a success
// after a failure; else the higher attempt count, else the later line),
// which then takes the earlier line's place. A retry's attempts carry the
// same x-request-id (Envoy retries the request as it is), so one request
// counts once however often it was tried. Past MaxDataPlaneIDs ids every
// line counts, as an attempt (Totals.AttemptOverflow).
func (c *Counter) firstAttempt(m Match, p *podCounter, class int, sec int64) bool {
	k := attemptKey{c.opts.Group(m), m.RequestID}
	ref := c.attempts[k]
	if ref == nil {
		if len(c.attempts) >= c.opts.MaxDataPlaneIDs {
			c.attemptOverflow = true
			return true
		}
		c.attempts[k] = &attemptRef{target: m.Line.Target, sec: sec, class: class, attempt: m.Attempt, time: m.Line.Time.UnixNano(), lines: 1,
			failedBefore: class != classServed}
		return true
	}
	ref.lines++
	if class == classServed && ref.class == classServed && ref.target != m.Line.Target && !ref.failedBefore {
		// Two answers and no failure: an unmarked copy, not a retry.
		if !ref.doubled {
			ref.doubled = true
			c.doubledIDs++
		}
	} else if !ref.retried {
		ref.retried = true
		c.retriedIDs++
	}
	if class != classServed {
		ref.failedBefore = true
	}
	p.attempts++
	better := false
	switch {
	case ref.doubled:
		// An unmarked copy: the first line read keeps the request.
	case class != ref.class:
		better = class == classServed
	case m.Attempt != ref.attempt && m.Attempt > 0 && ref.attempt > 0:
		better = m.Attempt > ref.attempt
	default:
		better = m.Line.Time.UnixNano() > ref.time
	}
	if !better {
		return false
	}
	if old := c.pods[ref.target]; old != nil {
		old.count(ref.sec, ref.class, -1)
	}
	ref.target, ref.sec, ref.class, ref.attempt, ref.time = m.Line.Target, sec, class, m.Attempt, m.Line.Time.UnixNano()
	return true
}

// ServedPerSecond is, per target, the served lines per second (Unix time):
// the run's requests joined by id, and the lines without one (their
// background included) — what a timeline of the logs shows.
func (c *Counter) ServedPerSecond() map[Target]map[int64]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Target]map[int64]int, len(c.pods))
	for t, p := range c.pods {
		m := make(map[int64]int, len(p.servedPerSecond)+len(p.perSecond))
		for sec, n := range p.servedPerSecond {
			m[sec] += int(n)
		}
		for sec, h := range p.perSecond {
			if h[classServed] > 0 {
				m[sec] += int(h[classServed])
			}
		}
		out[t] = m
	}
	return out
}

// dataPlaneID keeps a proxy's own request id (Envoy's x-request-id, which
// a mirrored copy shares with its primary) for the mirror join.
func (c *Counter) dataPlaneID(id string, sec int64, copied bool) {
	set := c.dpPrimary
	if copied {
		set = c.dpCopy
	}
	if _, ok := set[id]; ok {
		return
	}
	if len(c.dpPrimary)+len(c.dpCopy) >= c.opts.MaxDataPlaneIDs {
		c.dpOverflow = true
		return
	}
	set[id] = sec
}

// PodCount is what one target's log says about the run.
type PodCount struct {
	// Lines counts the matched lines of the run (any but other runs' ids).
	Lines int `json:"lines"`
	// Requests counts the distinct requests of the run served here, by
	// request id.
	Requests int `json:"requests"`
	// Mirrored counts the distinct mirrored copies of the run's requests.
	Mirrored int `json:"mirrored"`
	// Failed counts the run's requests this pod logged failing that no pod
	// of its group answered on a retry: a failed attempt of a request that
	// succeeded elsewhere is an attempt, not a failure.
	Failed int `json:"failed"`
	// Duplicates counts lines that repeat a request id already counted
	// here (a retry to the same pod, or a line logged twice).
	Duplicates int `json:"duplicates"`
	// Attempts counts lines of requests another line of the group already
	// counts: retries logged per attempt, counted once.
	Attempts int `json:"attempts,omitempty"`
	// WithoutID counts the lines with no request id at all: each counts,
	// so a retried request counts once per attempt that reached the pod.
	WithoutID int `json:"withoutId,omitempty"`
	// OtherIDs counts the lines whose request id is not the run's: the
	// data plane's own (an edge proxy regenerates x-request-id; an app
	// forwards none), counted in the window instead of joined by id.
	OtherIDs int `json:"otherIds,omitempty"`
	// Foreign counts lines with another run's request id.
	Foreign int `json:"foreign"`
	// Served, Copies and Errors count the lines without one of the run's
	// ids (the app logs none, or the proxy's own) in the window, with the
	// background measured before it.
	Served ClassCount `json:"served"`
	Copies ClassCount `json:"copies"`
	Errors ClassCount `json:"errors"`
	// OutsideWindow counts such lines neither in the window nor in the
	// background period.
	OutsideWindow int `json:"outsideWindow"`
	// BackgroundSeconds is how long the background was measured.
	BackgroundSeconds float64 `json:"backgroundSeconds"`
}

// Pods returns every target's counts over the window.
func (c *Counter) Pods(w Window) map[Target]PodCount {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[Target]PodCount, len(c.pods))
	for t, p := range c.pods {
		pc := PodCount{Lines: p.lines, Requests: p.served.n - p.notKept.n, Mirrored: p.mirrored.n, Failed: p.failed,
			Duplicates: p.duplicates, Foreign: p.foreign, Attempts: p.attempts, WithoutID: p.noID, OtherIDs: p.otherIDs}
		if g := c.groups[p.group]; g != nil {
			answered := intersect(&p.failedSeqs, &g.served)
			pc.Failed -= answered
			pc.Attempts += answered
		}
		span := w.span(t)
		pc.BackgroundSeconds = span.background.Seconds()
		for cl, dst := range []*ClassCount{&pc.Served, &pc.Copies, &pc.Errors} {
			*dst = span.count(func(sec int64) int {
				if h := p.perSecond[sec]; h != nil {
					return int(h[cl])
				}
				return 0
			}, keys(p.perSecond))
		}
		for sec, h := range p.perSecond {
			if !span.inWindow(sec) && !span.inBackground(sec) {
				pc.OutsideWindow += int(h[classServed] + h[classCopy] + h[classError])
			}
		}
		out[t] = pc
	}
	return out
}

// Totals join every target's log.
type Totals struct {
	// Requests counts distinct requests of the run seen served by any pod.
	Requests int `json:"requests"`
	// Mirrored counts distinct requests of the run seen as mirrored copies.
	Mirrored int `json:"mirrored"`
	// MirroredServed counts the requests seen both served and mirrored:
	// the mirror share is q̂ = MirroredServed / Requests (README.md,
	// mirroring).
	MirroredServed int `json:"mirroredServed"`
	// MultiPod counts requests seen served by more than one target.
	MultiPod int `json:"multiPod"`
	// DataPlanePrimaries and DataPlaneCopies count the distinct data-plane
	// request ids seen in the window on primaries and on copies;
	// DataPlaneBoth those seen on both: q̂ = DataPlaneBoth /
	// DataPlanePrimaries when the proxies of both log them.
	DataPlanePrimaries int `json:"dataPlanePrimaries"`
	DataPlaneCopies    int `json:"dataPlaneCopies"`
	DataPlaneBoth      int `json:"dataPlaneBoth"`
	// DataPlaneOverflow is set when more ids than MaxDataPlaneIDs came.
	DataPlaneOverflow bool `json:"dataPlaneOverflow,omitempty"`
	// Retried counts the requests logged more than once in a group (per
	// attempt, by the run's id or the data plane's), each counted once;
	// Attempts the lines beyond each request's first.
	Retried  int `json:"retried,omitempty"`
	Attempts int `json:"attempts,omitempty"`
	// Doubled counts the requests two pods of a group answered with no
	// failed attempt: no retry, so most likely a mirrored copy the proxy
	// did not mark as one (Istio ≥ 1.28); each counts once.
	Doubled int `json:"doubled,omitempty"`
	// UnmarkedCopies counts the mirror target's lines without a copy mark
	// (no "-shadow": Istio ≥ 1.28) told to be copies by a primary's
	// request id: counted as copies, not served.
	UnmarkedCopies int `json:"unmarkedCopies,omitempty"`
	// AttemptOverflow is set when more data-plane ids than MaxDataPlaneIDs
	// came: later ones count per line, attempts included.
	AttemptOverflow bool `json:"attemptOverflow,omitempty"`
}

// Totals returns the join over all targets; data-plane ids count in the
// window only.
func (c *Counter) Totals(w Window) Totals {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := Totals{
		Requests:          c.served.n,
		Mirrored:          c.mirrored.n,
		MirroredServed:    intersect(&c.served, &c.mirrored),
		MultiPod:          c.multi.n,
		DataPlaneOverflow: c.dpOverflow,
	}
	t.Retried, t.Doubled, t.UnmarkedCopies = c.retriedIDs, c.doubledIDs, c.unmarkedCopies
	for _, g := range c.groups {
		t.Retried += g.retried.n
		t.Doubled += g.doubled.n
	}
	t.AttemptOverflow = c.attemptOverflow
	for _, p := range c.pods {
		t.Attempts += p.attempts + p.duplicates
		if g := c.groups[p.group]; g != nil {
			t.Attempts += intersect(&p.failedSeqs, &g.served)
		}
	}
	span := w.span(Target{})
	for id, sec := range c.dpPrimary {
		if !span.inWindow(sec) {
			continue
		}
		t.DataPlanePrimaries++
		if cs, ok := c.dpCopy[id]; ok && span.inWindow(cs) {
			t.DataPlaneBoth++
		}
	}
	for _, sec := range c.dpCopy {
		if span.inWindow(sec) {
			t.DataPlaneCopies++
		}
	}
	return t
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
		p.served.each(func(seq uint64) {
			if !p.notKept.has(seq) {
				fn(seq, t)
			}
		})
	}
}

// MirroredSeen reports whether a mirrored copy of request seq was logged.
func (c *Counter) MirroredSeen(seq uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mirrored.has(seq)
}
