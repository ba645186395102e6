package attack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/valyala/fasthttp"
)

// The attack engines. EngineFast sends plain HTTP/1.1 over connections it
// holds itself, one worker goroutine per request in flight and nothing
// else: no reader and writer goroutine per connection, no hand-off per
// request, no context or timer per request (a connection deadline bounds
// each request). EngineNetHTTP is vegeta's attacker over net/http, for
// everything the fast engine does not do (HTTP/2 and h2c, TLS, gRPC, a
// URL whose host is templated).
const (
	EngineAuto    = ""
	EngineFast    = "fasthttp"
	EngineNetHTTP = "net/http"
)

// Buffer sizes of the fast engine's connections. A response's header
// block must fit in the reader's buffer; a larger one grows it, up to
// maxFastHeaderBytes, beyond which the request fails with an error naming
// the limit (net/http allows 10 MB: a mesh entry's answer carries a few
// hundred bytes of headers).
const (
	fastReadBuffer     = 4 << 10
	fastWriteBuffer    = 4 << 10
	maxFastHeaderBytes = 1 << 20
	// fastBodyChunk is how much of a body of unknown length is read at a
	// time into the worker's scratch buffer.
	fastBodyChunk = 16 << 10
	// maxKnownBody is the largest body read in one allocation of its
	// announced length; a longer one is read as it comes, so that a
	// Content-Length alone cannot make the attack allocate.
	maxKnownBody = 1 << 20
)

// goUserAgent is what net/http sends when the scenario names no
// User-Agent, so that the target (and its logs) sees the same requests
// whichever engine sends them.
const goUserAgent = "Go-http-client/1.1"

// fastEngineFor returns o's URL, parsed, when the fast engine can send
// o's requests, and why not when it cannot. A templated host or scheme
// needs no test of its own: url.Parse rejects `{` there.
func fastEngineFor(o Options) (u *url.URL, why string) {
	switch {
	case o.HTTP2:
		return nil, "HTTP/2"
	case o.GRPC:
		return nil, "gRPC"
	}
	switch o.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch:
	default:
		// net/http frames an empty body by the method (no
		// Content-Length on a DELETE), fasthttp by whether it reads one.
		return nil, "method " + o.Method
	}
	u, err := url.Parse(o.URL)
	if err != nil {
		return nil, "URL not parsed: " + err.Error()
	}
	switch {
	case u.Scheme != "http":
		return nil, "scheme " + u.Scheme
	case u.User != nil:
		return nil, "credentials in the URL"
	case u.Host == "":
		return nil, "empty host"
	case u.Host != strings.ToLower(u.Host):
		// fasthttp sends the Host header in lower case, net/http as given.
		return nil, "capitals in the host"
	}
	for k := range o.Header {
		if http.CanonicalHeaderKey(k) == "Host" {
			return nil, "a Host header"
		}
	}
	return u, ""
}

// fastEngine is the attack over fasthttp's request writer and response
// parser, on connections from its own pools.
type fastEngine struct {
	a    *Attack
	addr string // host:port dialled
	// tseq numbers templated requests across the workers.
	tseq atomic.Uint64
	// timeoutErr is a request's error when it ran out of time, the
	// net/http path's own (errRequestTimeout).
	timeoutErr error
	// lanes are the pools requests are spread over at random (see
	// laneTransport: one pool unless keep-alive uses several lanes).
	lanes []*connPool

	// Attack-wide state of one Run.
	began    time.Time
	seqMu    sync.Mutex
	seq      uint64
	stopped  atomic.Bool
	stopCh   chan struct{}
	stopOnce sync.Once

	// deliverMu makes the sink's Add see one result at a time, as the
	// net/http path's results loop does, without a channel hop.
	deliverMu sync.Mutex
	sink      Sink
	sum       *Summary
}

// newFastEngine sends a's requests to u, the URL fastEngineFor parsed.
func newFastEngine(a *Attack, u *url.URL) *fastEngine {
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	e := &fastEngine{a: a, addr: addr, timeoutErr: errRequestTimeout(a.opts.Timeout)}
	o := a.opts
	lanes, perLane := o.lanes()
	var idle time.Duration
	if o.Dial != nil {
		// As in Attack.pool: a tunnel does not pass a backend's close of
		// an idle connection on, so idle ones retire first.
		idle = 5 * time.Second
	}
	for range lanes {
		p := &connPool{e: e, idleTimeout: idle, ready: make(chan struct{}, 1), open: map[*fconn]struct{}{}}
		if perLane > 0 {
			p.sem = make(chan struct{}, perLane)
		}
		e.lanes = append(e.lanes, p)
	}
	return e
}

// fconn is one connection of the fast engine.
type fconn struct {
	net.Conn // a *trackedConn: closing it tells the sink
	id       uint64
	br       *bufio.Reader
	bw       *bufio.Writer
	lastUsed time.Time
	pool     *connPool
	// reused: taken from the idle connections, not dialled for this
	// request. keep: released for another request once the result is
	// delivered, else closed.
	reused, keep bool
}

// connPool holds the idle keep-alive connections of one lane and bounds
// its open connections (attack.maxConnections).
type connPool struct {
	e           *fastEngine
	idleTimeout time.Duration
	mu          sync.Mutex
	idle        []*fconn
	// open holds the lane's open connections (under mu), so that Abort
	// can cut the requests in flight short by setting their deadline in
	// the past: per lane, not under one lock for the whole attack.
	open map[*fconn]struct{}
	// sem holds a token per open connection; nil: no bound.
	sem chan struct{}
	// ready wakes a request waiting for a connection when one goes idle
	// or closes.
	ready chan struct{}
}

// acquire returns an idle connection or dials one, waiting until
// deadline when the lane has all the connections it may open.
func (p *connPool) acquire(deadline time.Time) (*fconn, error) {
	var timer *time.Timer
	// stop wakes a wait when the attack stops: an abort ends it, an
	// interruption lets it go on (the request is sent, as those in
	// flight are), without waking it again.
	stop := p.e.stopCh
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		p.mu.Lock()
		var c *fconn
		if n := len(p.idle); n > 0 {
			// The most recently used, as net/http does.
			c = p.idle[n-1]
			p.idle[n-1] = nil
			p.idle = p.idle[:n-1]
		}
		p.mu.Unlock()
		if c != nil {
			if p.idleTimeout > 0 && time.Since(c.lastUsed) > p.idleTimeout {
				p.e.closeConn(c)
				continue
			}
			c.reused, c.keep = true, true
			return c, nil
		}
		if p.sem == nil {
			return p.dial(deadline)
		}
		select {
		case p.sem <- struct{}{}:
			return p.dial(deadline)
		default:
		}
		if timer == nil {
			timer = time.NewTimer(time.Until(deadline))
		}
		select {
		case p.sem <- struct{}{}:
			return p.dial(deadline)
		case <-p.ready:
		case <-timer.C:
			return nil, errFastTimeout
		case <-stop:
			if p.e.aborted() {
				return nil, errAborted
			}
			stop = nil
		}
	}
}

func (p *connPool) dial(deadline time.Time) (*fconn, error) {
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	nc, err := p.e.a.tr.dialContext(ctx, "tcp", p.e.addr)
	if err != nil {
		p.freeToken()
		if ctx.Err() != nil {
			return nil, errFastTimeout
		}
		return nil, err
	}
	c := &fconn{Conn: nc, id: nc.(*trackedConn).id, pool: p, keep: true,
		br: bufio.NewReaderSize(nc, fastReadBuffer), bw: bufio.NewWriterSize(nc, fastWriteBuffer)}
	p.mu.Lock()
	p.open[c] = struct{}{}
	p.mu.Unlock()
	return c, nil
}

func (p *connPool) freeToken() {
	if p.sem != nil {
		<-p.sem
	}
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

// release returns a connection that may carry another request.
func (p *connPool) release(c *fconn) {
	c.lastUsed = time.Now()
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
	select {
	case p.ready <- struct{}{}:
	default:
	}
}

func (e *fastEngine) closeConn(c *fconn) {
	c.pool.mu.Lock()
	delete(c.pool.open, c)
	c.pool.mu.Unlock()
	c.Close()
	c.pool.freeToken()
}

// closeIdle closes every idle connection (the end of the attack).
func (e *fastEngine) closeIdle() {
	for _, p := range e.lanes {
		p.mu.Lock()
		idle := p.idle
		p.idle = nil
		p.mu.Unlock()
		for _, c := range idle {
			e.closeConn(c)
		}
	}
}

// cutShort makes every request in flight fail now (Abort).
func (e *fastEngine) cutShort() {
	past := time.Unix(1, 0)
	for _, p := range e.lanes {
		p.mu.Lock()
		for c := range p.open {
			c.SetDeadline(past)
		}
		p.mu.Unlock()
	}
}

func (e *fastEngine) stop() {
	e.stopped.Store(true)
	e.stopOnce.Do(func() { close(e.stopCh) })
}

func (e *fastEngine) aborted() bool {
	return e.a.opts.Abort != nil && e.a.opts.Abort.Err() != nil
}

// errFastTimeout marks a request that ran into its deadline; the
// result's error then names the timeout as the net/http path's does.
var errFastTimeout = errors.New("request deadline")

// run fires the attack, as Attack.Run does with vegeta's attacker: the
// same pacers, the same worker growth, the same sequence numbers and
// timestamps, each result handed to sink in turn.
func (e *fastEngine) run(ctx context.Context, sink Sink, sum *Summary) {
	e.sink, e.sum = sink, sum
	e.stopCh = make(chan struct{})
	e.began = time.Now()
	var interrupted atomic.Bool
	stopCtx := context.AfterFunc(ctx, func() { interrupted.Store(true); e.stop() })
	defer stopCtx()
	if ab := e.a.opts.Abort; ab != nil {
		stopAbort := context.AfterFunc(ab, func() {
			interrupted.Store(true)
			e.stop()
			e.cutShort()
		})
		defer stopAbort()
	}
	var wg sync.WaitGroup
	o := e.a.opts
	workers := min(e.a.workers, e.a.maxW)
	if o.Rate.Freq == 0 && o.Ramp == nil {
		// Closed loop: the pacer never waits, so each worker takes the
		// next hit itself instead of a tick handed over a channel.
		var hits atomic.Uint64
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				w := e.newWorker()
				for !e.stopped.Load() {
					el := time.Since(e.began)
					if o.Duration > 0 && el > o.Duration {
						return
					}
					if _, stop := e.a.pacer.Pace(el, hits.Add(1)-1); stop {
						return
					}
					w.hit()
				}
			}()
		}
	} else {
		e.paced(&wg, workers)
	}
	wg.Wait()
	e.closeIdle()
	sum.Interrupted = interrupted.Load()
}

// paced is vegeta's Attacker.Attack's pacing loop: ticks to workers,
// one more worker whenever all are busy, up to the maximum.
func (e *fastEngine) paced(wg *sync.WaitGroup, workers uint64) {
	ticks := make(chan struct{})
	start := func() {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := e.newWorker()
			for range ticks {
				w.hit()
			}
		}()
	}
	for range workers {
		start()
	}
	defer close(ticks)
	du, maxW := e.a.opts.Duration, e.a.maxW
	count := uint64(0)
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		elapsed := time.Since(e.began)
		if du > 0 && elapsed > du {
			return
		}
		wait, stop := e.a.pacer.Pace(elapsed, count)
		if stop {
			return
		}
		if wait > 0 {
			t.Reset(wait)
			select {
			case <-t.C:
			case <-e.stopCh:
				return
			}
		}
		if workers < maxW {
			select {
			case ticks <- struct{}{}:
				count++
				continue
			case <-e.stopCh:
				return
			default:
				workers++
				start()
			}
		}
		select {
		case ticks <- struct{}{}:
			count++
		case <-e.stopCh:
			return
		}
	}
}

// fastWorker is one worker's reusable request, response and buffers.
type fastWorker struct {
	e       *fastEngine
	req     fasthttp.Request
	resp    fasthttp.Response
	scratch []byte
	hbuf    []byte // the response header's values, concatenated
	num     [20]byte
	// tbuf is where a templated part is rendered.
	tbuf bytes.Buffer
}

var vegetaSeqHeader = []byte("X-Vegeta-Seq")

func (e *fastEngine) newWorker() *fastWorker {
	w := &fastWorker{e: e}
	rt := e.a.target
	w.req.Header.DisableNormalizing()
	w.setRequest(rt.method, rt.url, rt.body, rt.header)
	return w
}

// setRequest sets what a request carries but its id and sequence number.
func (w *fastWorker) setRequest(method, u string, body []byte, h http.Header) {
	r := &w.req
	r.Reset()
	r.Header.DisableNormalizing()
	// No Content-Type the scenario did not set (fasthttp would add a
	// form's to a body), as net/http sends none.
	r.Header.SetNoDefaultContentType(true)
	r.Header.SetMethod(method)
	r.SetRequestURI(u)
	// The path goes out as given, as net/http sends it, not cleaned
	// (after the URI is parsed: parsing resets the flag).
	r.URI().DisablePathNormalizing = true
	ua := false
	for k, vs := range h {
		if k == "User-Agent" {
			ua = true
		}
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	if !ua {
		r.Header.SetUserAgent(goUserAgent)
	}
	if len(body) > 0 {
		r.SetBodyRaw(body)
	}
	if !w.e.a.opts.KeepAlive {
		r.SetConnectionClose()
	}
}

// hit sends one request and hands its result to the sink.
func (w *fastWorker) hit() {
	e := w.e
	fr := &fastResult{}
	res := &fr.v
	e.seqMu.Lock()
	res.Timestamp = e.began.Add(time.Since(e.began))
	res.Seq = e.seq
	e.seq++
	e.seqMu.Unlock()
	out := &fr.r
	out.Result = res
	rt := e.a.target
	// A static request is built once (newWorker) but for its id and
	// sequence number.
	if rt.static() {
		res.Method, res.URL = rt.method, rt.url
		out.RequestID = ridFor(rt.runID, res.Seq)
		if len(rt.body) > 0 {
			res.BytesOut = uint64(len(rt.body))
		}
	} else if err := w.render(res, out); err != nil {
		// vegeta stops the attack on a targeter's error.
		e.stop()
		res.Error = err.Error()
		res.Latency = time.Since(res.Timestamp)
		e.deliver(out, nil)
		return
	}
	// The id is set here only: the fixed parts never carry it.
	w.req.Header.Set(rt.ridHeader, out.RequestID)
	// vegeta's own header, which the net/http path sends too.
	w.req.Header.SetCanonical(vegetaSeqHeader, strconv.AppendUint(w.num[:0], res.Seq, 10))
	c, err := w.do(out)
	res.Latency = time.Since(res.Timestamp)
	if err != nil {
		res.Error = err.Error()
	}
	e.deliver(out, c)
}

// render sets a templated request's templated parts on the worker's
// request, whose fixed parts newWorker set once: the URI only for a
// templated URL, the body only for a templated body, and only the
// templated headers. Requests are numbered as requestTemplate.targeter
// numbers them for the net/http engine, from 0 across the workers.
func (w *fastWorker) render(res *vegeta.Result, out *Result) error {
	rt := w.e.a.target
	n := w.e.tseq.Add(1) - 1
	d := TemplateData{RequestID: ridFor(rt.runID, n), Seq: n}
	res.Method, res.URL = rt.method, rt.url
	out.RequestID = d.RequestID
	buf := &w.tbuf
	if rt.urlT != nil {
		buf.Reset()
		if err := rt.urlT.Execute(buf, d); err != nil {
			return err
		}
		res.URL = buf.String()
		w.req.SetRequestURI(res.URL)
		// As setRequest: after the URI is parsed.
		w.req.URI().DisablePathNormalizing = true
	}
	res.BytesOut = uint64(len(rt.body))
	if rt.bodyT != nil {
		buf.Reset()
		if err := rt.bodyT.Execute(buf, d); err != nil {
			return err
		}
		// Copied into the request's own reused body buffer.
		w.req.SetBody(buf.Bytes())
		res.BytesOut = uint64(buf.Len())
	}
	for k, ht := range rt.headerT {
		buf.Reset()
		if err := ht.Execute(buf, d); err != nil {
			return err
		}
		// Replaced in place (a templated field has one value): the other
		// fields keep their order, which Del and Add would not.
		w.req.Header.Set(k, buf.String())
	}
	return nil
}

// deliver hands a result to the sink, then lets its connection go: a
// connection's close never reaches the sink before its results.
func (e *fastEngine) deliver(out *Result, c *fconn) {
	e.deliverMu.Lock()
	if aborted(e.a.opts.Abort, out.Result) {
		e.sum.Aborted++
	} else {
		e.sum.Requests++
		t0 := time.Now()
		e.sink.Add(out)
		e.sum.Attributing += time.Since(t0)
	}
	e.deliverMu.Unlock()
	if c == nil {
		return
	}
	if c.keep {
		c.pool.release(c)
	} else {
		e.closeConn(c)
	}
}

// fastResult holds a request's Result and vegeta's Result in one
// allocation.
type fastResult struct {
	r Result
	v vegeta.Result
}

// do sends the request and reads its response into out. The returned
// connection is to be released (c.reused true) or closed (false) once
// the result is delivered.
func (w *fastWorker) do(out *Result) (*fconn, error) {
	e := w.e
	res := out.Result
	if e.aborted() {
		return nil, errAborted
	}
	deadline := time.Now().Add(e.a.opts.Timeout)
	pool := e.lanes[0]
	if len(e.lanes) > 1 {
		pool = e.lanes[rand.IntN(len(e.lanes))]
	}
	for attempt := 0; ; attempt++ {
		c, err := pool.acquire(deadline)
		if err != nil {
			return nil, w.requestError(res, err)
		}
		out.ConnID = c.id
		c.SetDeadline(deadline)
		if e.aborted() {
			c.keep = false
			return c, errAborted
		}
		ph, err := w.exchange(c, out)
		if err == nil {
			c.keep = c.keep && e.a.opts.KeepAlive && !w.resp.ConnectionClose()
			return c, nil
		}
		c.keep = false
		// net/http sends a request again on a new connection when a
		// reused one failed before any answer and the request was not
		// written at all, or was closed by the server and may be repeated
		// (an idempotent method): a keep-alive connection the server
		// closed while it was idle.
		if c.reused && attempt == 0 && (ph == phaseNothingWritten || ph == phaseWritten && errors.Is(err, io.EOF) && idempotent(res.Method)) {
			e.closeConn(c)
			continue
		}
		return c, err
	}
}

// How far an exchange got before it failed.
const (
	phaseNothingWritten = iota
	phaseWritten
	phaseHeaderRead
)

func idempotent(m string) bool {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace:
		return true
	}
	return false
}

// requestError is a request's error worded as net/http's client words it
// (vegeta reports Client.Do's errors): `Get "URL": cause`.
func (w *fastWorker) requestError(res *vegeta.Result, err error) error {
	switch {
	case errors.Is(err, errAborted):
		return err
	case errors.Is(err, errFastTimeout):
		err = w.e.timeoutErr
	}
	m := res.Method
	if m == "" {
		m = http.MethodGet
	}
	return &url.Error{Op: m[:1] + strings.ToLower(m[1:]), URL: res.URL, Err: err}
}

// exchange writes the request and reads the response on c; phase says
// how far it got.
func (w *fastWorker) exchange(c *fconn, out *Result) (phase int, err error) {
	e := w.e
	res := out.Result
	if err := w.req.Write(c.bw); err != nil {
		return phaseNothingWritten, w.requestError(res, w.netError(err))
	}
	if err := c.bw.Flush(); err != nil {
		return phaseNothingWritten, w.requestError(res, w.netError(err))
	}
	r := &w.resp
	r.Reset()
	r.Header.SetNoDefaultContentType(true)
	r.StreamBody = true
	r.SkipBody = res.Method == http.MethodHead
	if err := w.readHeader(c); err != nil {
		if e.aborted() {
			return phaseWritten, errAborted
		}
		return phaseWritten, w.requestError(res, w.netError(err))
	}
	code := r.StatusCode()
	res.Headers = w.responseHeader(&r.Header)
	berr := w.readBody(c, res)
	r.CloseBodyStream() //nolint:errcheck // a stream over our own reader: nothing to report
	if berr != nil {
		// As vegeta: a body cut short reports its error alone, with what
		// was read, and neither the code nor the headers.
		res.Headers = nil
		if e.aborted() {
			return phaseHeaderRead, errAborted
		}
		return phaseHeaderRead, w.netError(berr)
	}
	res.BytesIn = uint64(len(res.Body))
	if res.Code = uint16(code); res.Code < 200 || res.Code >= 400 {
		// net/http's Response.Status: the code and the reason the
		// server gave.
		res.Error = strconv.Itoa(code) + " " + string(r.Header.StatusMessage())
	}
	return phaseHeaderRead, nil
}

// readHeader reads the response's header block, growing the reader's
// buffer for a block larger than it up to maxFastHeaderBytes.
func (w *fastWorker) readHeader(c *fconn) error {
	for {
		err := w.resp.Read(c.br)
		var small *fasthttp.ErrSmallBuffer
		if !errors.As(err, &small) {
			return err
		}
		size := 2 * c.br.Size()
		if size > maxFastHeaderBytes {
			return fmt.Errorf("response headers exceed %d bytes", maxFastHeaderBytes)
		}
		// The new reader reads first what the old one holds (what was
		// peeked: a fill into an empty buffer of twice the previous one
		// took all of the previous carry-over), then the connection, so
		// readers never nest and the old buffers are freed.
		held, _ := c.br.Peek(c.br.Buffered())
		c.br = bufio.NewReaderSize(io.MultiReader(bytes.NewReader(bytes.Clone(held)), c.Conn), size)
		w.resp.Reset()
		w.resp.Header.SetNoDefaultContentType(true)
		w.resp.StreamBody = true
	}
}

// netError turns a deadline that passed into the timeout's own error.
func (w *fastWorker) netError(err error) error {
	var ne net.Error
	if errors.Is(err, fasthttp.ErrTimeout) || errors.As(err, &ne) && ne.Timeout() {
		return w.e.timeoutErr
	}
	return err
}

// readBody reads up to maxBody bytes of the body into res.Body, then
// drains up to DrainLimit more as trackedBody does; a longer body is
// counted truncated and its connection is not reused.
func (w *fastWorker) readBody(c *fconn, res *vegeta.Result) error {
	r := &w.resp
	s := r.BodyStream()
	if s == nil {
		return nil
	}
	maxBody := w.e.a.opts.MaxBody
	n := r.Header.ContentLength()
	if n < 0 {
		// Chunked, or until the connection closes.
		if n == -2 {
			c.keep = false
		}
		n = -1
	}
	var body []byte
	switch {
	case n == 0:
	case n > 0 && n <= maxKnownBody && (maxBody < 0 || int64(n) <= maxBody):
		body = make([]byte, n)
		k, err := io.ReadFull(s, body)
		res.Body = body[:k]
		if err != nil {
			return unexpectedEOF(err)
		}
		return nil
	default:
		var rerr error
		for maxBody < 0 || int64(len(w.scratch)) < maxBody {
			if cap(w.scratch)-len(w.scratch) == 0 {
				w.scratch = append(w.scratch, make([]byte, fastBodyChunk)...)[:len(w.scratch)]
			}
			free := w.scratch[len(w.scratch):cap(w.scratch)]
			if maxBody >= 0 && int64(len(free)) > maxBody-int64(len(w.scratch)) {
				free = free[:maxBody-int64(len(w.scratch))]
			}
			var k int
			k, rerr = s.Read(free)
			w.scratch = w.scratch[:len(w.scratch)+k]
			if rerr != nil {
				break
			}
		}
		if len(w.scratch) > 0 {
			// An empty body stays nil (bytes.Clone would make it empty).
			res.Body = bytes.Clone(w.scratch)
		}
		w.scratch = w.scratch[:0]
		if cap(w.scratch) > maxKnownBody {
			w.scratch = nil // an unbounded body's buffer is not kept
		}
		switch {
		case rerr == io.EOF:
			return nil
		case rerr != nil:
			return rerr
		}
	}
	if maxBody < 0 {
		return nil
	}
	// At the cap: drain up to DrainLimit, as trackedBody does.
	truncated, err := w.e.a.tr.drain(s)
	if truncated {
		c.keep = false
	}
	return err
}

func unexpectedEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// responseHeader is the response's header as net/http's client hands it
// over (vegeta records it in each Result): every field but
// Transfer-Encoding and a closing Connection, and for a chunked body neither Content-Length nor
// Trailer; Pragma: no-cache implies Cache-Control: no-cache. Three
// allocations and the map's: one string holds every value, one slice
// every value list, and common field names are constants.
func (w *fastWorker) responseHeader(h *fasthttp.ResponseHeader) http.Header {
	chunked, closing := h.ContentLength() == -1, h.ConnectionClose()
	skip := func(k []byte) bool {
		switch string(k) {
		case "Transfer-Encoding":
			return true
		case "Connection":
			// net/http drops a Connection field that closes.
			return closing
		case "Content-Length", "Trailer":
			return chunked
		}
		return false
	}
	n := 0
	w.hbuf = w.hbuf[:0]
	for k, v := range h.All() {
		if !skip(k) {
			n++
			w.hbuf = append(w.hbuf, v...)
		}
	}
	if n == 0 {
		return http.Header{}
	}
	blob := string(w.hbuf)
	strs := make([]string, n)
	hdr := make(http.Header, n)
	i, off := 0, 0
	for k, v := range h.All() {
		if skip(k) {
			continue
		}
		strs[i] = blob[off : off+len(v)]
		off += len(v)
		key := headerKey(k)
		if vs, ok := hdr[key]; ok {
			hdr[key] = append(vs, strs[i])
		} else {
			hdr[key] = strs[i : i+1 : i+1]
		}
		i++
	}
	if p := hdr["Pragma"]; len(p) > 0 && p[0] == "no-cache" {
		if _, ok := hdr["Cache-Control"]; !ok {
			hdr["Cache-Control"] = []string{"no-cache"}
		}
	}
	return hdr
}

// headerKey is a response header's name as a string, without an
// allocation for the names answers commonly carry.
func headerKey(k []byte) string {
	switch string(k) {
	case "Content-Length":
		return "Content-Length"
	case "Content-Type":
		return "Content-Type"
	case "Content-Encoding":
		return "Content-Encoding"
	case "Server":
		return "Server"
	case "Date":
		return "Date"
	case "Connection":
		return "Connection"
	case "Keep-Alive":
		return "Keep-Alive"
	case "Cache-Control":
		return "Cache-Control"
	case "Etag":
		return "Etag"
	case "Last-Modified":
		return "Last-Modified"
	case "Accept-Ranges":
		return "Accept-Ranges"
	case "Vary":
		return "Vary"
	case "Set-Cookie":
		return "Set-Cookie"
	case "X-Request-Id":
		return "X-Request-Id"
	case "X-Envoy-Upstream-Service-Time":
		return "X-Envoy-Upstream-Service-Time"
	case "X-Content-Type-Options":
		return "X-Content-Type-Options"
	}
	return string(k)
}
