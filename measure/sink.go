package measure

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Bounds of the attribution queue (README.md, Limits; docs/architecture.md,
// "Attribution off the results loop"). The attack's results loop only
// hands each response on: attribution workers read the bodies, one
// collector counts and records them. Bodies wait for the workers up to
// DefaultAttributionQueue bytes (one body at a time however large) and
// attributionSlots responses; a response that finds the queue full is
// counted with its body unread, so the pacer never waits for the rules.
const (
	// DefaultAttributionQueue bounds the bytes of response bodies waiting
	// for attribution or for the collector, the only memory the queue
	// holds that grows with attack.maxBody.
	DefaultAttributionQueue int64 = 32 << 20
	// attributionSlots bounds the responses waiting for a worker.
	attributionSlots = 4096
	// collectorSlots bounds the results waiting for the collector; a
	// collector that falls behind (a disk slower than the attack, see
	// runlog's recorder) holds the results loop back, as before.
	collectorSlots = 1024
)

// DefaultAttributionWorkers leaves a core to the attack on a small machine:
// a rule that costs CPU must not starve the workers that send requests.
func DefaultAttributionWorkers() int {
	return max(1, min(8, runtime.GOMAXPROCS(0)-1))
}

// job is one result on its way from the results loop to the collector.
type job struct {
	r  *attack.Result
	id attribution.Identity
	ok bool
	// size is the body bytes counted against the queue's bound.
	size int64
	// unread: attribution never read the body (the queue was full, or the
	// run was aborted).
	unread bool
}

// waiting is a job waiting for an attribution worker: only what the worker
// needs, so the attributionSlots of the work queue cost 24 bytes each
// rather than a whole job's (its identity is four strings).
type waiting struct {
	r    *attack.Result
	size int64
	ok   bool
}

// sink takes the attack's results. Add runs on the attack's results loop
// and never waits for attribution: a response goes to a bounded queue that
// attribution workers drain, or, when the queue is full, on with its body
// unread. One collector goroutine counts (tally), records (Recorder) and
// takes the sequential looks, so those need no extra locking. A scenario
// without attribution rules attributes nothing, and the results loop does
// everything inline, as there is nothing to wait for.
type sink struct {
	attr   *attribution.Attributor
	tally  *tally.Tally
	codes  scenarios.StatusCodes
	looks  []int64
	next   int
	seen   int64
	onLook func(int)
	rec    Recorder

	// recordConns keeps the connection of every request, indexed by its
	// request sequence number, so log lines joined by request id get the
	// same connection-aware statistics: 4 bytes per request, the one cost
	// that grows with the run, paid only when logs attribute.
	recordConns bool
	runID       string
	seqConn     []uint32

	// The queue; nil work means inline.
	workers   int
	budget    int64
	work      chan waiting
	out       chan job
	abort     <-chan struct{}
	workersWG sync.WaitGroup
	collected chan struct{}
	queued    atomic.Int64 // body bytes queued or waiting for the collector
	peak      atomic.Int64 // the most body bytes queued at once

	attributing atomic.Int64 // nanoseconds the workers spent attributing
	attributed  atomic.Int64 // responses the workers attributed
	overloaded  atomic.Int64 // responses not attributed: the queue was full
	aborted     atomic.Int64 // responses not attributed: the run was aborted

	// A connection's state may be forgotten by the tally only once every
	// result it carried is counted (tally.ConnClosed starts the grace
	// period), so a close is held back while results of the connection
	// wait in the queue: per-connection statistics stay exact however
	// long the queue takes.
	connMu  sync.Mutex
	pending map[uint64]int32
	closing map[uint64]bool
}

// Queue sizes the attribution queue: the workers that read the response
// bodies off the attack's results loop (default DefaultAttributionWorkers)
// and the bytes of bodies waiting for them (default
// DefaultAttributionQueue); zero values take the defaults. Abort, when
// it ends, drops what still waits (a second Ctrl-C).
type Queue struct {
	Workers int
	Bytes   int64
	Abort   context.Context
}

func newSink(attr *attribution.Attributor, tl *tally.Tally, codes scenarios.StatusCodes, runID string, rec Recorder, cfg Queue) *sink {
	s := &sink{attr: attr, tally: tl, codes: codes, runID: runID, rec: rec}
	if attr.Empty() {
		return s
	}
	s.workers, s.budget = cfg.Workers, cfg.Bytes
	if s.workers <= 0 {
		s.workers = DefaultAttributionWorkers()
	}
	if s.budget <= 0 {
		s.budget = DefaultAttributionQueue
	}
	s.work = make(chan waiting, attributionSlots)
	s.out = make(chan job, collectorSlots)
	s.collected = make(chan struct{})
	s.pending, s.closing = map[uint64]int32{}, map[uint64]bool{}
	if cfg.Abort != nil {
		s.abort = cfg.Abort.Done()
	}
	return s
}

// start runs the workers and the collector; call it once the sink's
// fields (looks, recordConns) are set, before the attack.
func (s *sink) start() {
	if s.work == nil {
		return
	}
	for range s.workers {
		s.workersWG.Add(1)
		go s.worker()
	}
	go func() {
		defer close(s.collected)
		for j := range s.out {
			s.collect(j)
		}
	}()
}

// close waits until every result handed to Add is counted and recorded:
// the queue is drained (bounded by its size), not dropped, except after
// an abort. Call it once the attack returned.
func (s *sink) close() {
	if s.work == nil {
		return
	}
	close(s.work)
	s.workersWG.Wait()
	close(s.out)
	<-s.collected
}

// Add is called on the attack's results loop, for each result in turn.
func (s *sink) Add(r *attack.Result) {
	j := job{r: r, ok: answered(r, s.codes)}
	if r.Error != "" {
		// Every error message is redacted here, once, before it reaches
		// the tally, the recording or any report: net/http quotes the
		// request's URL, credentials in the query included.
		r.Error = redact.Message(r.Error)
	}
	if s.work == nil {
		if r.Code != 0 {
			j.id = s.attribute(r, j.ok)
		}
		s.collect(j)
		return
	}
	if r.Code != 0 {
		// Error responses are attributed too: errors per cluster and pod.
		// Only the results loop adds to queued, so the check and the add
		// cannot race with another admission; the workers only take away.
		n := int64(len(r.Body))
		if q := s.queued.Load(); q == 0 || q+n <= s.budget {
			s.hold(r.ConnID)
			s.queued.Add(n)
			select {
			case s.work <- waiting{r: r, size: n, ok: j.ok}:
				s.notePeak()
				return
			default: // every slot taken
			}
			s.queued.Add(-n)
			s.release(r.ConnID)
		}
		j.unread = true
		r.Body = nil
		s.overloaded.Add(1)
	}
	s.out <- j
}

func (s *sink) notePeak() {
	q := s.queued.Load()
	for p := s.peak.Load(); q > p && !s.peak.CompareAndSwap(p, q); p = s.peak.Load() {
	}
}

func (s *sink) worker() {
	defer s.workersWG.Done()
	for q := range s.work {
		j := job{r: q.r, ok: q.ok, size: q.size}
		if s.isAborted() {
			// A second Ctrl-C: what waits is not read, only counted.
			j.unread = true
			j.r.Body = nil
			s.aborted.Add(1)
		} else {
			t0 := time.Now()
			j.id = s.attribute(j.r, j.ok)
			s.attributing.Add(int64(time.Since(t0)))
			s.attributed.Add(1)
		}
		s.out <- j
	}
}

func (s *sink) isAborted() bool {
	select {
	case <-s.abort:
		return true
	default:
		return false
	}
}

// attribute reads one response; safe on several goroutines at once.
func (s *sink) attribute(r *attack.Result, ok bool) attribution.Identity {
	h := r.Headers
	if len(r.Trailer) > 0 {
		// gRPC puts metadata in trailers too: rules read both.
		h = h.Clone()
		for k, vs := range r.Trailer {
			h[k] = append(h[k], vs...)
		}
	}
	return s.attr.Attribute(r.Body, h, ok)
}

// collect counts and records one result; on the collector goroutine (or
// the results loop, inline).
func (s *sink) collect(j job) {
	r := j.r
	if j.unread {
		s.tally.AddUnread(r)
	} else {
		s.tally.Add(r, j.id)
	}
	switch {
	case s.rec == nil:
	case j.unread:
		s.rec.RecordUnread(r, j.ok)
	default:
		s.rec.Record(r, j.id, j.ok)
	}
	r.Body = nil // attributed and sampled; the body is not kept
	if j.size > 0 {
		s.queued.Add(-j.size)
		s.release(r.ConnID)
	}
	if s.recordConns {
		if seq, ok := podlogs.ParseRequestID(s.runID, r.RequestID); ok && seq < 1<<32 {
			for uint64(len(s.seqConn)) <= seq {
				s.seqConn = append(s.seqConn, 0)
			}
			s.seqConn[seq] = uint32(r.ConnID)
		}
	}
	s.seen++
	if s.onLook != nil && s.next < len(s.looks) && s.seen >= s.looks[s.next] {
		look := s.next
		s.next++
		s.onLook(look)
	}
}

// hold notes a result of connection id waiting in the queue.
func (s *sink) hold(id uint64) {
	if id == 0 {
		return
	}
	s.connMu.Lock()
	s.pending[id]++
	s.connMu.Unlock()
}

// release notes it counted, and passes on a close held back for it.
func (s *sink) release(id uint64) {
	if id == 0 {
		return
	}
	s.connMu.Lock()
	n := s.pending[id] - 1
	closed := false
	if n <= 0 {
		delete(s.pending, id)
		closed = s.closing[id]
		delete(s.closing, id)
	} else {
		s.pending[id] = n
	}
	s.connMu.Unlock()
	if closed {
		s.tally.ConnClosed(id)
	}
}

// ConnClosed is called from the transport's goroutines.
func (s *sink) ConnClosed(id uint64) {
	if s.work != nil {
		s.connMu.Lock()
		if s.pending[id] > 0 {
			s.closing[id] = true
			s.connMu.Unlock()
			return
		}
		s.connMu.Unlock()
	}
	s.tally.ConnClosed(id)
}

// queueStats is what the attribution queue did, for the report's warnings.
type queueStats struct {
	workers                       int
	budget, peak                  int64
	attributed, overloaded, abort int64
	attributing                   time.Duration
}

func (s *sink) stats() queueStats {
	return queueStats{workers: s.workers, budget: s.budget, peak: s.peak.Load(),
		attributed: s.attributed.Load(), overloaded: s.overloaded.Load(), abort: s.aborted.Load(),
		attributing: time.Duration(s.attributing.Load())}
}
