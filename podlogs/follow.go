package podlogs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// OpenRequest says which log to open and from when.
type OpenRequest struct {
	// Since is the earliest timestamp wanted. The API carries it with
	// one-second resolution: an Opener may round it down, never up. Lines
	// before it are dropped by the Follower whatever the Opener returns.
	Since time.Time
	// Follow keeps the stream open for new lines until the container stops.
	Follow bool
	// Previous reads the previous (terminated) container's log instead.
	Previous bool
}

// Opener opens one container's log with a timestamp on every line
// (PodLogOptions{Timestamps: true}), in the Format given to the Follower.
// Closing the returned reader (which may happen while a Read is blocked,
// from another goroutine), or ending ctx, must end a blocked Read.
type Opener interface {
	Open(ctx context.Context, t Target, r OpenRequest) (io.ReadCloser, error)
}

// Options tune a Follower. Zero values take the defaults in parentheses.
type Options struct {
	// Since is where every log starts: the attack start minus a small skew
	// for the nodes' clocks.
	Since time.Time
	// Concurrency bounds the streams open at once (64): a run may observe
	// hundreds of pods and every follow stream holds a connection to an API
	// server and a kubelet. Streams beyond it wait for a slot, in order, and
	// are read at the latest by Settle's final pass.
	Concurrency int
	// Settle is how long no new line must arrive, after the attack, before
	// Settle stops following (2s): proxies flush access logs late.
	Settle time.Duration
	// RetryBackoff is the first wait before reopening a dropped stream
	// (500ms); it doubles per failure up to 16 times that, with jitter so
	// hundreds of streams cut by one API server restart do not reconnect
	// in lockstep.
	RetryBackoff time.Duration
	// MaxLineBytes cuts longer lines (64 KiB); a cut line is still counted.
	MaxLineBytes int
	// Format is the framing the Opener returns (FormatTimestamps).
	Format Format
}

// StreamStats describe one target's stream.
type StreamStats struct {
	Lines      int64     // lines delivered
	Opens      int       // streams opened successfully
	Reconnects int       // follow streams reopened (dropped, or a container restarted)
	Skipped    int64     // replayed lines skipped on resume
	Truncated  int64     // lines cut to MaxLineBytes
	Malformed  int64     // lines without a timestamp, dropped
	Open       bool      // a stream is open now
	Forgotten  bool      // Forget was called
	Deleted    bool      // Deleted was called: read to the end of its log, then stop
	Restarts   int       // Restarted calls
	Last       time.Time // timestamp of the newest delivered line
	LastError  error     // most recent failure, if any
}

// Follower follows many containers' logs and delivers their lines on one
// channel, each target's lines in log order.
type Follower struct {
	open  Opener
	opts  Options
	sem   chan struct{}
	lines chan Line

	lastLine atomic.Int64 // unix nanos of the newest delivery, for Settle
	until    atomic.Int64 // unix nanos; lines after it do not hold Settle (0: all do)

	mu       sync.Mutex
	streams  map[Target]*stream
	stats    map[Target]*targetStats // kept after Forget, for the report
	draining bool
	closed   bool
	wg       sync.WaitGroup

	closeOnce sync.Once
}

// NewFollower returns a Follower reading through o. Read Lines until it is
// closed, which happens when Settle or Close returns.
func NewFollower(o Opener, opts Options) *Follower {
	if opts.Concurrency <= 0 {
		opts.Concurrency = 64
	}
	if opts.Settle <= 0 {
		opts.Settle = 2 * time.Second
	}
	if opts.RetryBackoff <= 0 {
		opts.RetryBackoff = 500 * time.Millisecond
	}
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = 64 << 10
	}
	return &Follower{
		open:    o,
		opts:    opts,
		sem:     make(chan struct{}, opts.Concurrency),
		lines:   make(chan Line, 1024),
		streams: map[Target]*stream{},
		stats:   map[Target]*targetStats{},
	}
}

// Lines delivers every line once, each target's lines in order. It is
// closed when Settle or Close returns; until then it must be read, or the
// streams stall (they never drop a line).
func (f *Follower) Lines() <-chan Line { return f.lines }

// targetStats back StreamStats: counters the stream goroutine bumps per
// line are atomic, the rest is guarded by Follower.mu.
type targetStats struct {
	lines, skipped, truncated, malformed, last atomic.Int64

	opens, reconnects, restarts int
	open, forgotten, deleted    bool
	lastErr                     error
}

// stream is one target's follower: its goroutine owns pos.
type stream struct {
	t    Target
	f    *Follower
	st   *targetStats
	ctx  context.Context    // set by Follow under Follower.mu
	stop context.CancelFunc // idem
	done chan struct{}      // idem
	wake chan struct{}      // cuts a backoff short when the mode changes

	// Owned by the goroutine while it runs.
	pos position
	// old is the position in the log that pos described before the stream
	// diverged (see position.replayed), kept for a Restarted that arrives
	// after the stream already went on to the new container; its lines are
	// those before switched, the first line of the new log.
	old      *position
	switched time.Time

	mu            sync.Mutex
	previous      bool               // read the previous container's tail next
	draining      bool               // read to the end once, then stop
	deleted       bool               // the pod was deleted: stop when its log ends
	cancelAttempt context.CancelFunc // ends the open stream for a mode change
	drainErr      error
}

// Follow starts following t, from Options.Since, until ctx ends, Forget(t),
// Settle or Close. It is idempotent: a target already followed is left
// alone, so a pod watch may call it for every event. A target whose ctx
// ended resumes where it stopped.
func (f *Follower) Follow(ctx context.Context, t Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return
	}
	s := f.streams[t]
	if s != nil {
		select {
		case <-s.done:
		default:
			// Still following: a pod of the same name replaced a deleted
			// one (a StatefulSet's), so its log goes on.
			s.mu.Lock()
			s.deleted = false
			s.mu.Unlock()
			s.st.deleted = false
			return
		}
	} else {
		if f.stats[t] == nil {
			f.stats[t] = &targetStats{}
		}
		s = &stream{t: t, f: f, st: f.stats[t], wake: make(chan struct{}, 1)}
		f.streams[t] = s
	}
	s.st.forgotten, s.st.deleted = false, false
	s.ctx, s.stop = context.WithCancel(ctx)
	s.done = make(chan struct{})
	s.mu.Lock()
	s.draining = f.draining
	s.mu.Unlock()
	f.wg.Add(1)
	go s.run()
}

// Forget stops following t (the pod was deleted). Its stats remain; a later
// Follow of the same name (a StatefulSet pod recreated) starts afresh.
func (f *Follower) Forget(t Target) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if s := f.streams[t]; s != nil {
		delete(f.streams, t)
		s.st.forgotten = true
		s.stop()
	}
}

// Deleted tells that t's pod was deleted. Its container may still run (a
// pod serves through its grace period), so the stream reads on until the
// log ends, when the container stopped: a reopen brings nothing new, or
// finds the pod gone (ErrGone) right after a clean end. A stream cut with
// an error is followed again, a few times at most without a line: lines
// may be lost then, and Settle says so. Unlike Forget, it keeps what the
// pod logged while terminating.
func (f *Follower) Deleted(t Target) {
	f.mu.Lock()
	s := f.streams[t]
	if s != nil {
		s.st.deleted = true
	}
	f.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	s.deleted = true
	s.mu.Unlock()
}

// SetUntil says when the lines that matter end (the attack's end plus the
// settle time): newer lines, such as an access log's probe lines, no
// longer count as activity that Settle waits out. They are still delivered.
func (f *Follower) SetUntil(t time.Time) {
	f.until.Store(t.UnixNano())
}

// Restarted tells that t's container restarted: the stream reads what is
// left of the previous container's log since its position, then follows
// the new container. Following an exited container otherwise just ends.
// Call it promptly on the restart count's change: the previous log is only
// the most recent terminated container's.
func (f *Follower) Restarted(t Target) {
	f.mu.Lock()
	s := f.streams[t]
	if s != nil {
		s.st.restarts++
	}
	f.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	s.previous = true
	if s.cancelAttempt != nil {
		s.cancelAttempt()
	}
	s.mu.Unlock()
	s.poke()
}

// Stats returns a snapshot of every target's stream, forgotten ones included.
func (f *Follower) Stats() map[Target]StreamStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[Target]StreamStats, len(f.stats))
	for t, st := range f.stats {
		ss := StreamStats{
			Lines:      st.lines.Load(),
			Opens:      st.opens,
			Reconnects: st.reconnects,
			Skipped:    st.skipped.Load(),
			Truncated:  st.truncated.Load(),
			Malformed:  st.malformed.Load(),
			Open:       st.open,
			Forgotten:  st.forgotten,
			Deleted:    st.deleted,
			Restarts:   st.restarts,
			LastError:  st.lastErr,
		}
		if ns := st.last.Load(); ns != 0 {
			ss.Last = time.Unix(0, ns).UTC()
		}
		out[t] = ss
	}
	return out
}

// Settle is called after the attack: it keeps reading until no line arrived
// for Options.Settle (counted from the call at the earliest), then stops
// following and reads every target's log once more to its end from its
// position — which also reads targets that were still waiting for a slot —
// and closes Lines. It returns ctx's error if ctx ended first (Lines is
// closed then too), or the targets whose final read failed.
func (f *Follower) Settle(ctx context.Context) error {
	start := time.Now().UnixNano()
	timer := time.NewTimer(f.opts.Settle)
	defer timer.Stop()
	for {
		quiet := time.Duration(time.Now().UnixNano() - max(f.lastLine.Load(), start))
		if quiet >= f.opts.Settle {
			break
		}
		timer.Reset(f.opts.Settle - quiet)
		select {
		case <-ctx.Done():
			f.Close()
			return fmt.Errorf("settle pod logs: %w", ctx.Err())
		case <-timer.C:
		}
	}

	f.mu.Lock()
	f.draining = true
	streams := make([]*stream, 0, len(f.streams))
	for _, s := range f.streams {
		streams = append(streams, s)
	}
	f.mu.Unlock()
	for _, s := range streams {
		s.mu.Lock()
		s.draining = true
		if s.cancelAttempt != nil {
			s.cancelAttempt()
		}
		s.mu.Unlock()
		s.poke()
	}
	// Wait for every final read, including those of targets that Follow
	// added meanwhile (they start in the draining mode).
	for {
		f.mu.Lock()
		var running []chan struct{}
		for _, s := range f.streams {
			select {
			case <-s.done:
			default:
				running = append(running, s.done)
			}
		}
		f.mu.Unlock()
		if len(running) == 0 {
			break
		}
		for _, done := range running {
			select {
			case <-done:
			case <-ctx.Done():
				f.Close()
				return fmt.Errorf("settle pod logs: final read: %w", ctx.Err())
			}
		}
	}
	f.mu.Lock()
	var errs []error
	for _, s := range f.streams {
		s.mu.Lock()
		if s.drainErr != nil {
			errs = append(errs, s.drainErr)
		}
		s.mu.Unlock()
	}
	f.mu.Unlock()
	f.Close()
	return errors.Join(errs...)
}

// Close stops every stream without a final read, waits for them, and closes
// Lines. It is safe to call more than once and after Settle.
func (f *Follower) Close() {
	f.closeOnce.Do(func() {
		f.mu.Lock()
		f.closed = true
		for _, s := range f.streams {
			s.stop()
		}
		f.mu.Unlock()
		f.wg.Wait()
		close(f.lines)
	})
}

func (s *stream) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

type mode int

const (
	modeFollow mode = iota
	modePrevious
	modeDrain
)

// run is the stream's goroutine: open, read, and on any end reopen after a
// backoff, until the stream is stopped or its final read is done.
func (s *stream) run() {
	defer s.f.wg.Done()
	defer close(s.done)
	backoff := s.f.opts.RetryBackoff
	// Failures in a row in the previous or drain modes, which give up after
	// a few: a previous container that is gone, or a pod deleted before
	// Settle, must not hold the run until its deadline.
	failures := 0
	// cleanEnd: the last attempt's stream ended without an error.
	cleanEnd := false
	for s.ctx.Err() == nil {
		m, n, err := s.attempt()
		if s.ctx.Err() != nil {
			return
		}
		prevClean := cleanEnd
		cleanEnd = err == nil
		s.mu.Lock()
		deleted, draining := s.deleted, s.draining
		s.mu.Unlock()
		switch {
		case errors.Is(err, errModeChange) && m == modeFollow && deleted && draining:
			// Settle cut a deleted pod's open stream after the logs were
			// quiet: it was read to the end, and reopening it would fail.
			return
		case errors.Is(err, errModeChange):
			failures = 0
			continue
		case m != modePrevious && deleted && (err == nil && n == 0 || errors.Is(err, ErrGone) && prevClean):
			// The deleted pod's log ended (its container stopped: a reopen
			// brought nothing new, or the pod is gone after a clean end).
			return
		case m == modeFollow && deleted:
			// Reopen: the end may have been a cut while the container still
			// logs. Opens that fail in a row are bounded, since the log is
			// gone once the pod is and lines may have been lost.
			if n > 0 || err == nil {
				failures = 0
			}
			if err != nil {
				if failures++; failures >= maxTries {
					s.mu.Lock()
					s.drainErr = err
					s.mu.Unlock()
					return
				}
			}
		case m == modePrevious && (err == nil || failures >= maxTries-1):
			// The previous log was read to its end, or cannot be (the
			// container restarted again, or was never there): go on with
			// the current container.
			s.mu.Lock()
			s.previous = false
			s.mu.Unlock()
			if s.old != nil {
				s.old = nil // pos is already in the current container's log
			} else {
				s.pos.newContainer()
			}
			failures = 0
			continue
		case m == modeDrain && err == nil:
			return
		case m == modeDrain && failures >= maxTries-1:
			s.mu.Lock()
			s.drainErr = err
			s.mu.Unlock()
			return
		}
		if n > 0 {
			backoff = s.f.opts.RetryBackoff
		}
		if m != modeFollow && err != nil {
			failures++
		}
		// Jitter in [backoff/2, backoff].
		wait := backoff/2 + rand.N(backoff/2+1)
		backoff = min(2*backoff, 16*s.f.opts.RetryBackoff)
		t := time.NewTimer(wait)
		select {
		case <-s.ctx.Done():
		case <-s.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// maxTries bounds the attempts at reading a previous container's log or
// at Settle's final read.
const maxTries = 5

// ErrGone marks an Opener's error for a pod the API no longer has.
var ErrGone = errors.New("pod not found")

// errModeChange ends an attempt that Restarted or Settle interrupted.
var errModeChange = errors.New("stream interrupted to change mode")

// attempt opens the log once and delivers its new lines until it ends. It
// returns the mode it ran in, how many lines it delivered and why it ended
// (nil: the stream ended cleanly).
func (s *stream) attempt() (mode, int, error) {
	select {
	case s.f.sem <- struct{}{}:
	case <-s.ctx.Done():
		return modeFollow, 0, s.ctx.Err()
	}
	defer func() { <-s.f.sem }()

	ctx, cancel := context.WithCancel(s.ctx)
	defer cancel()
	s.mu.Lock()
	m := modeFollow
	switch {
	case s.previous:
		m = modePrevious
	case s.draining:
		m = modeDrain
	}
	s.cancelAttempt = cancel
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.cancelAttempt = nil
		s.mu.Unlock()
	}()

	op := "follow logs of"
	switch m {
	case modePrevious:
		op = "read previous logs of"
	case modeDrain:
		op = "read remaining logs of"
	}
	// The previous container's log resumes where the stream was in it: at
	// pos, unless the stream has gone on to the new container already.
	pos, until := &s.pos, time.Time{}
	if m == modePrevious && s.old != nil {
		pos, until = s.old, s.switched
	}
	from := pos.reopen(s.f.opts.Since)
	req := OpenRequest{Since: from, Follow: m == modeFollow, Previous: m == modePrevious}
	rc, err := s.f.open.Open(ctx, s.t, req)
	if err != nil {
		return m, 0, s.fail(ctx, fmt.Errorf("%s %s: %w", op, s.t.describe(), err))
	}
	// Closing the body is what ends a Read blocked on a quiet stream. It is
	// closed once, and before the slot is released, whoever gets there first.
	closeBody := sync.OnceValue(rc.Close)
	stopClose := context.AfterFunc(ctx, func() { closeBody() })
	defer func() {
		stopClose()
		closeBody()
	}()
	s.f.mu.Lock()
	if m == modeFollow && s.st.opens > 0 {
		s.st.reconnects++
	}
	s.st.opens++
	s.st.open = true
	s.f.mu.Unlock()
	defer func() {
		s.f.mu.Lock()
		s.st.open = false
		s.f.mu.Unlock()
	}()

	n, err := s.read(ctx, rc, pos, from, until, m != modePrevious)
	if err != nil {
		err = fmt.Errorf("%s %s: %w", op, s.t.describe(), err)
	}
	return m, n, s.fail(ctx, err)
}

// fail classifies an attempt's end and records real failures.
func (s *stream) fail(ctx context.Context, err error) error {
	if ctx.Err() != nil && s.ctx.Err() == nil {
		return errModeChange
	}
	s.mu.Lock()
	gone := s.deleted && errors.Is(err, ErrGone) // expected: Settle reports a loss
	s.mu.Unlock()
	if err != nil && s.ctx.Err() == nil && !gone {
		s.f.mu.Lock()
		s.st.lastErr = err
		s.f.mu.Unlock()
	}
	return err
}

// read delivers the stream's new lines, resuming at pos from the time from;
// a non-zero until ends the log (lines from then on are the next
// container's). track notes a divergence. nil means a clean end of stream.
func (s *stream) read(ctx context.Context, rc io.Reader, pos *position, from, until time.Time, track bool) (int, error) {
	limit := s.f.opts.MaxLineBytes
	br := bufio.NewReaderSize(rc, 32<<10)
	dec := decoder{format: s.f.opts.Format, max: limit}
	var buf []byte
	n := 0
	for {
		raw, cutRaw, err := readLine(br, buf, limit+64) // room for the prefix
		buf = raw
		if err != nil {
			if err == io.EOF {
				return n, nil // an unterminated last fragment is dropped
			}
			return n, err
		}
		ts, text, truncated, ok, derr := dec.decode(raw)
		if derr != nil {
			s.st.malformed.Add(1)
			continue
		}
		// The Follower drops what the Opener should have: the kubelet
		// filters by sinceTime, but the skip count is only exact if lines
		// before it never count, whatever an Opener returns.
		if !ok || ts.Before(from) || (!until.IsZero() && !ts.Before(until)) {
			continue
		}
		replayed, diverged := pos.replayed(ts)
		if replayed {
			s.st.skipped.Add(1)
			continue
		}
		if diverged && track && s.old == nil {
			old := *pos
			s.old, s.switched = &old, ts
		}
		if ctx.Err() != nil {
			// Stopped (Forget, Settle): a select below could still pick
			// the send at random.
			return n, ctx.Err()
		}
		l := Line{Target: s.t, Time: ts, Text: string(text)}
		select {
		case s.f.lines <- l:
		case <-ctx.Done():
			return n, ctx.Err()
		}
		pos.delivered(ts)
		n++
		if truncated || cutRaw {
			s.st.truncated.Add(1)
		}
		s.st.lines.Add(1)
		s.st.last.Store(max(s.st.last.Load(), ts.UnixNano()))
		if u := s.f.until.Load(); u == 0 || ts.UnixNano() <= u {
			s.f.lastLine.Store(time.Now().UnixNano())
		}
	}
}
