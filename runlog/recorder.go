// Package runlog keeps a run replayable: while the attack goes, it streams
// every result to the run directory, in vegeta's own result encoding
// (results.bin, which `vegeta report` and `vegeta plot` read) and, line
// for line, who served it (attribution.jsonl, for jq). ReadResults joins
// the two again to re-render a run; Plot draws its latencies per cluster.
//
// Wiring (the CLI): create the run directory's recorder before the attack,
// hand it to the runner, which records every result and closes it when the
// attack ends, reporting a failure to write as a warning; close it
// yourself too, for runs that fail before the attack (Close is idempotent):
//
//	rec, err := runlog.Create(dir)
//	if err != nil { ... }
//	defer rec.Close()
//	rep, err := runner.Run(ctx, sc, runner.Options{..., Record: rec})
//	...
//	f, _ := os.Create(filepath.Join(dir, runlog.PlotFile))
//	err = runlog.Plot(f, dir, "mesh-verify "+rep.RunID)
package runlog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/redact"
)

// The files of a run directory.
const (
	ResultsFile     = "results.bin"
	AttributionFile = "attribution.jsonl"
	PlotFile        = "plot.html"
)

// Bounds of what a recorder holds in memory: results wait in batches for
// the writer goroutine; at most maxBatches exist (about 0.5 MB; while the
// disk keeps up, two: the one filling and the one being written), plus one
// write buffer per file. They are small because they are most of a run's
// live heap, which the collector lets grow to twice its size (issue 27:
// private memory); a batch of 256 is still one hand-off per 256 results,
// and a 64 KiB buffer one write(2) per 64 KiB.
const (
	batchSize  = 256
	maxBatches = 8
	bufferSize = 64 << 10
	// batchAge hands a batch to the writer once it spans this much of the
	// attack, so the files follow a slow run closely.
	batchAge = time.Second
	// DefaultStallTimeout is how long the attack waits for a disk that
	// does not keep up before recording stops.
	DefaultStallTimeout = 10 * time.Second
	// heldBackReported is the total wait for the disk worth a warning.
	heldBackReported = time.Second
)

// Option tunes a recorder.
type Option func(*config)

type config struct {
	stall time.Duration
}

// StallTimeout bounds how long Record waits for the disk (the attack is
// held back meanwhile) before recording stops for good, and how long Close
// waits for the last writes. Default DefaultStallTimeout.
func StallTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.stall = d
		}
	}
}

// Recorder streams results to a run directory. Record runs on the runner's
// collector goroutine (which the attack's results loop waits for only when
// it falls behind, docs/architecture.md) and only copies the result into a
// batch; a writer
// goroutine encodes full batches into buffered files. Memory is bounded:
// when the writer falls maxBatches behind, Record waits for it (the
// attack is held back, nothing is dropped), and if the disk accepts
// nothing for the stall timeout recording stops, the attack goes on and
// Close reports it. A write error (disk full) stops recording the same
// way. Record and Close must be called from one goroutine at a time.
type Recorder struct {
	cfg config

	// Consumer side (Record, Close).
	cur      *batch
	batches  int
	closed   bool
	heldBack time.Duration
	closeErr error

	stopped atomic.Bool
	full    chan *batch
	free    chan *batch
	done    chan struct{}

	written atomic.Int64 // results handed to the write buffers

	mu       sync.Mutex
	err      error // what stopped recording
	finalErr error // set by the writer when it finishes

	// Writer side.
	files           [2]io.WriteCloser
	resW, attrW     *bufio.Writer
	enc             vegeta.Encoder
	line            []byte
	lastURL, urlOut string
	lastErr, errOut string
}

// rec is one result as it waits in a batch: the strings are the result's
// own, nothing is copied.
type rec struct {
	res  vegeta.Result // Body and Headers left nil
	rid  string
	conn uint64
	id   attribution.Identity
	ok   bool
	// unread: the body was never read (RecordUnread).
	unread bool
}

type batch struct {
	recs  []rec
	first time.Time
}

// Create creates dir if needed and the run's files in it (they must not
// exist yet: a run never overwrites another's), and starts the writer.
func Create(dir string, opts ...Option) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return nil, fmt.Errorf("runlog: %w", err)
	}
	var files [2]io.WriteCloser
	for i, name := range []string{ResultsFile, AttributionFile} {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666) // the umask decides, as for every run file
		if err != nil {
			if i == 1 {
				files[0].Close()
				os.Remove(filepath.Join(dir, ResultsFile))
			}
			return nil, fmt.Errorf("runlog: %w", err)
		}
		files[i] = f
	}
	return newRecorder(files[0], files[1], opts...), nil
}

func newRecorder(results, attribution io.WriteCloser, opts ...Option) *Recorder {
	r := &Recorder{
		cfg:   config{stall: DefaultStallTimeout},
		full:  make(chan *batch, maxBatches),
		free:  make(chan *batch, maxBatches),
		done:  make(chan struct{}),
		files: [2]io.WriteCloser{results, attribution},
		resW:  bufio.NewWriterSize(results, bufferSize),
		attrW: bufio.NewWriterSize(attribution, bufferSize),
	}
	for _, o := range opts {
		o(&r.cfg)
	}
	r.enc = vegeta.NewEncoder(r.resW)
	r.cur = r.newBatch()
	go r.write()
	return r
}

func (r *Recorder) newBatch() *batch {
	r.batches++
	return &batch{recs: make([]rec, 0, batchSize)}
}

// Record queues one result and who served it (ok: counted as answered).
// It keeps no reference to res itself; the body is never written. Safe on
// a nil recorder, a no-op once recording stopped or the recorder closed.
func (r *Recorder) Record(res *attack.Result, id attribution.Identity, ok bool) {
	r.record(res, id, ok, false)
}

// RecordUnread queues a result whose body attribution never read: its
// attribution.jsonl line says so ("unread": true).
func (r *Recorder) RecordUnread(res *attack.Result, ok bool) {
	r.record(res, attribution.Identity{}, ok, true)
}

func (r *Recorder) record(res *attack.Result, id attribution.Identity, ok, unread bool) {
	if r == nil || r.closed || r.stopped.Load() {
		return
	}
	b := r.cur
	if len(b.recs) == 0 {
		b.first = res.Timestamp
	}
	b.recs = append(b.recs, rec{
		res: vegeta.Result{
			Attack: res.Attack, Seq: res.Seq, Code: res.Code, Timestamp: res.Timestamp,
			Latency: res.Latency, BytesOut: res.BytesOut, BytesIn: res.BytesIn,
			Error: res.Error, Method: res.Method, URL: res.URL,
		},
		rid: res.RequestID, conn: res.ConnID, id: id, ok: ok, unread: unread,
	})
	if len(b.recs) == cap(b.recs) || res.Timestamp.Sub(b.first) >= batchAge {
		r.handOver()
	}
}

// handOver passes the current batch to the writer and takes an empty one,
// waiting for the writer if every batch is in use.
func (r *Recorder) handOver() {
	r.full <- r.cur // never blocks: the channel holds every batch there is
	r.cur = nil
	select {
	case r.cur = <-r.free:
		return
	default:
	}
	if r.batches < maxBatches {
		r.cur = r.newBatch()
		return
	}
	start := time.Now()
	t := time.NewTimer(r.cfg.stall)
	defer t.Stop()
	select {
	case r.cur = <-r.free:
		r.heldBack += time.Since(start)
	case <-t.C:
		r.heldBack += time.Since(start)
		r.fail(fmt.Errorf("the disk took no result for %v", r.cfg.stall))
	}
}

// fail stops recording with err unless something stopped it before.
func (r *Recorder) fail(err error) {
	r.mu.Lock()
	if r.err == nil {
		r.err = fmt.Errorf("run log: %w: recording stopped after %d results, the attack went on", err, r.written.Load())
	}
	r.mu.Unlock()
	r.stopped.Store(true)
}

// Close writes what is queued, flushes and closes both files, waiting at
// most the stall timeout for the disk. It returns what the report should
// warn about: the error that stopped recording (the files then hold the
// results before it; ReadResults reads every complete one and reports a
// cut), or that the disk held the attack back for over a second in all.
// Later calls return the same. A nil recorder returns nil.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	if r.closed {
		return r.closeErr
	}
	r.closed = true
	if r.cur != nil && len(r.cur.recs) > 0 && !r.stopped.Load() {
		r.full <- r.cur
	}
	r.cur = nil
	close(r.full)
	t := time.NewTimer(r.cfg.stall)
	defer t.Stop()
	select {
	case <-r.done:
	case <-t.C:
		r.fail(fmt.Errorf("the disk did not finish the last writes in %v, the files may end early", r.cfg.stall))
	}
	r.mu.Lock()
	err := r.err
	if err == nil {
		err = r.finalErr
	}
	r.mu.Unlock()
	if err == nil && r.heldBack >= heldBackReported {
		err = fmt.Errorf("run log: the disk held the attack back for %v in all", r.heldBack.Round(time.Millisecond))
	}
	r.closeErr = err
	return err
}

// write is the writer goroutine: it encodes every batch, flushes when it
// has nothing more to do, and on a write error stops writing but keeps
// returning batches, so Record never waits on a broken disk.
func (r *Recorder) write() {
	defer close(r.done)
	for b := range r.full {
		if !r.stopped.Load() {
			for i := range b.recs {
				if err := r.writeOne(&b.recs[i]); err != nil {
					r.fail(err)
					break
				}
			}
			if len(r.full) == 0 && !r.stopped.Load() {
				if err := r.flush(); err != nil {
					r.fail(err)
				}
			}
		}
		clear(b.recs) // let the results' strings go
		b.recs = b.recs[:0]
		r.free <- b // never blocks: the channel holds every batch there is
	}
	// Flushed even after a stall, so the files end on a whole result; a
	// write error repeats itself here and was reported already.
	var errs []error
	if err := r.flush(); err != nil && !r.stopped.Load() {
		errs = append(errs, err)
	}
	for i, f := range r.files {
		if err := f.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", []string{ResultsFile, AttributionFile}[i], err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		r.mu.Lock()
		r.finalErr = fmt.Errorf("run log: %w", err)
		r.mu.Unlock()
	}
}

func (r *Recorder) flush() error {
	if err := r.resW.Flush(); err != nil {
		return fmt.Errorf("%s: %w", ResultsFile, err)
	}
	if err := r.attrW.Flush(); err != nil {
		return fmt.Errorf("%s: %w", AttributionFile, err)
	}
	return nil
}

func (r *Recorder) writeOne(x *rec) error {
	res := &x.res
	// Credentials redacted in the report (a URL's password, token
	// parameters, also quoted by net/http's errors) do not reach the disk
	// either. Results repeat the same URL and errors, so each is redacted
	// once per distinct value in a row, off the attack's goroutine.
	if res.URL != "" {
		if res.URL != r.lastURL {
			r.lastURL, r.urlOut = res.URL, redact.URL(res.URL)
		}
		res.URL = r.urlOut
	}
	if res.Error != "" {
		if res.Error != r.lastErr {
			r.lastErr, r.errOut = res.Error, redact.Message(res.Error)
		}
		res.Error = r.errOut
	}
	if err := r.enc.Encode(res); err != nil {
		return fmt.Errorf("%s: %w", ResultsFile, err)
	}
	a := Attribution{Seq: res.Seq, RequestID: x.rid, ConnID: x.conn, Identity: x.id, Code: res.Code, OK: x.ok, Unread: x.unread}
	if !x.id.Empty() {
		a.Source = SourceBody
	}
	r.line = appendAttribution(r.line[:0], &a)
	if _, err := r.attrW.Write(r.line); err != nil {
		return fmt.Errorf("%s: %w", AttributionFile, err)
	}
	r.written.Add(1)
	return nil
}
