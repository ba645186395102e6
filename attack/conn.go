package attack

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// tracker numbers the connections the transport opens and remembers, per
// in-flight request, its request id and the connection that carried it, so
// results can be joined to connections even when the request failed.
type tracker struct {
	dial DialFunc
	next atomic.Uint64
	mu   sync.Mutex
	sink Sink
	// pending holds the requests in flight by vegeta seq, sharded so the
	// workers seldom share a lock; a plain map reuses its slots where
	// sync.Map allocates two objects per store.
	pending [pendingShards]pendingShard
	// truncated counts bodies abandoned beyond maxBody+DrainLimit.
	truncated atomic.Uint64
}

const pendingShards = 32

type pendingShard struct {
	mu sync.Mutex
	m  map[uint64]*inflight
}

type meta struct {
	rid  string
	conn uint64
	// trailer is set when the body is closed (recordingTransport.trailers).
	trailer http.Header
}

func newTracker(d DialFunc) *tracker {
	if d == nil {
		d = plainDial()
	}
	t := &tracker{dial: d}
	for i := range t.pending {
		t.pending[i].m = map[uint64]*inflight{}
	}
	return t
}

// plainDial is TCP with the dial timeout and keep-alive every attack
// connection gets unless a tunnel or connect-to dials instead.
func plainDial() DialFunc {
	d := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
	return d.DialContext
}

func (t *tracker) store(seq uint64, f *inflight) {
	sh := &t.pending[seq%pendingShards]
	sh.mu.Lock()
	sh.m[seq] = f
	sh.mu.Unlock()
}

func (t *tracker) setSink(s Sink) {
	t.mu.Lock()
	t.sink = s
	t.mu.Unlock()
}

func (t *tracker) opened() uint64 { return t.next.Load() }

func (t *tracker) dialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := t.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &trackedConn{Conn: c, id: t.next.Add(1), t: t}, nil
}

func (t *tracker) closed(id uint64) {
	t.mu.Lock()
	s := t.sink
	t.mu.Unlock()
	if s != nil {
		s.ConnClosed(id)
	}
}

// take removes the request seq from those in flight and returns it (nil
// when the transport never saw it). vegeta has closed its body by then:
// what the body's wrapper points to is let go, as the inflight lives on as
// the request's Result. The trace is left as it is: a dial net/http
// started for this request may still be running for its pool (it outlives
// the request) and reads the trace's hooks when it ends; the hooks point
// only to the inflight itself, so keeping them holds nothing else.
func (t *tracker) take(seq uint64) *inflight {
	sh := &t.pending[seq%pendingShards]
	sh.mu.Lock()
	f, ok := sh.m[seq]
	if ok {
		delete(sh.m, seq)
	}
	sh.mu.Unlock()
	if !ok {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.body = trackedBody{}
	return f
}

// trackedConn reports its close once so per-connection state can be folded.
type trackedConn struct {
	net.Conn
	id   uint64
	t    *tracker
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.t.closed(c.id) })
	return c.Conn.Close()
}

// recordingTransport notes which connection carried each request; vegeta
// stamps X-Vegeta-Seq on every request, which keys the note to the Result.
// It also bounds each request by the timeout: http.Client.Timeout around a
// RoundTripper it does not know costs a goroutine, a timer and a dozen
// allocations per request (net/http's setRequestCancel), a deadline on the
// request's own context does the same for a fraction.
type recordingTransport struct {
	next      http.RoundTripper
	tr        *tracker
	ridHeader string
	// runID prefixes the request ids the transport makes (ridFor).
	runID string
	// timeout bounds a request from sending it to closing its body, as
	// http.Client.Timeout does; timeoutCause (errRequestTimeout) is the
	// error it ends with, made once rather than per request.
	timeout      time.Duration
	timeoutCause error
	// maxBody caps what is read of each body (< 0: no cap).
	maxBody int64
	// abort, when done, ends the requests in flight (Options.Abort).
	abort context.Context
	// trailers keeps each response's trailers in its meta (Options.GRPC).
	trailers bool
}

// inflight is what the transport keeps of one request, in one allocation:
// the note its result is joined by, its trace hook and its body's wrapper.
type inflight struct {
	mu    sync.Mutex // the trace hook and the body's close write meta; take reads it
	meta  meta
	trace httptrace.ClientTrace
	body  trackedBody
	// ridValue is the request id header's value, when the transport
	// adds it (ridFor).
	ridValue [1]string
	// res is the request's Result once taken (Attack.result): one
	// allocation for both.
	res Result
}

func (f *inflight) gotConn(info httptrace.GotConnInfo) {
	c := info.Conn
	if tc, ok := c.(*tls.Conn); ok {
		c = tc.NetConn()
	}
	if tc, ok := c.(*trackedConn); ok {
		f.mu.Lock()
		f.meta.conn = tc.id
		f.mu.Unlock()
	}
}

// errRequestTimeout is the cause of a request that ran out of time, so
// the report names the limit rather than a bare "context deadline exceeded".
type errRequestTimeout time.Duration

func (e errRequestTimeout) Error() string {
	return fmt.Sprintf("request timeout (%s) exceeded", time.Duration(e))
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	seq, err := strconv.ParseUint(req.Header.Get("X-Vegeta-Seq"), 10, 64)
	if err != nil {
		return rt.next.RoundTrip(req)
	}
	ab := rt.abort
	if ab != nil && ab.Err() != nil {
		// A second Ctrl-C aborts what is in flight instead of waiting for
		// the request timeout; what comes after it is not sent.
		return nil, errAborted
	}
	f := &inflight{meta: meta{rid: req.Header.Get(rt.ridHeader)}}
	if f.meta.rid == "" {
		// The targeter renders no template, and left the id to be made
		// here from vegeta's sequence number. The request is vegeta's
		// own, built for this hit and read by no one else (http.Client
		// copied its header for redirects before calling us), so the
		// header is set on it rather than on a copy of it.
		f.meta.rid = ridFor(rt.runID, seq)
		f.ridValue[0] = f.meta.rid
		req.Header[rt.ridHeader] = f.ridValue[:]
	}
	f.trace.GotConn = f.gotConn
	rt.tr.store(seq, f)
	parent, release := req.Context(), context.CancelFunc(nil)
	switch {
	case ab == nil:
	case parent == context.Background():
		// vegeta's requests carry no context of their own, so Abort can
		// be the parent: one context per request, no callback.
		parent = ab
	default:
		// A request with a context of its own: Abort reaches it through
		// a callback, undone with the request.
		var cancelParent context.CancelFunc
		parent, cancelParent = context.WithCancel(parent)
		stop := context.AfterFunc(ab, cancelParent)
		release = func() { stop(); cancelParent() }
	}
	ctx, cancel := context.WithTimeoutCause(parent, rt.timeout, rt.timeoutCause)
	if release != nil {
		cancelTimeout := cancel
		cancel = func() { cancelTimeout(); release() }
	}
	ctx = httptrace.WithClientTrace(ctx, &f.trace)
	resp, err := rt.next.RoundTrip(req.WithContext(ctx))
	if err != nil || resp.Body == nil {
		cancel()
		return resp, err
	}
	// The deadline and Abort go on until vegeta has read and closed the
	// body, as http.Client.Timeout's do.
	f.body = trackedBody{ReadCloser: resp.Body, f: f, left: rt.maxBody, tr: rt.tr, cancel: cancel}
	if rt.trailers {
		f.body.resp = resp
	}
	resp.Body = &f.body
	return resp, nil
}

// ridFor is the request id of request seq of run runID: RUNID-SEQ, as
// podlogs.ParseRequestID reads it back.
func ridFor(runID string, seq uint64) string {
	var b [64]byte
	return string(strconv.AppendUint(append(append(b[:0], runID...), '-'), seq, 10))
}

// errAborted is the error of a request not sent because the attack was
// aborted.
var errAborted = errors.New("attack aborted")

// DrainLimit is how much of a body beyond maxBody is read (and thrown
// away) so that its connection can carry the next request; a longer body
// is abandoned and its connection closed. vegeta reads maxBody bytes and
// then drains the rest to EOF, which for a 1 GiB answer transfers 1 GiB
// per request.
const DrainLimit = 256 << 10

// drain reads and discards up to DrainLimit bytes of a body past its
// cap, both engines' way (see DrainLimit); it reports a body longer than
// that, which it counts truncated.
func (tr *tracker) drain(body io.Reader) (truncated bool, err error) {
	n, err := io.Copy(io.Discard, io.LimitReader(body, DrainLimit+1))
	if err == nil && n > DrainLimit {
		tr.truncated.Add(1)
		return true, nil
	}
	return false, err
}

// trackedBody ends a response body after maxBody bytes for its reader and,
// when vegeta closes it, keeps its trailers and releases its deadline.
// At the cap it drains up to DrainLimit more: a body that ends there
// keeps its keep-alive connection (per-connection balancing sees the same
// connections as without a cap); one that does not is counted truncated
// and its connection is closed when vegeta closes the body unread.
type trackedBody struct {
	io.ReadCloser
	f *inflight
	// left is what may still be read; < 0: no cap.
	left int64
	tr   *tracker
	done bool
	// resp is set when trailers are kept: they are known once the body
	// has been read to its end, which vegeta does before it closes it.
	resp   *http.Response
	cancel context.CancelFunc
}

func (b *trackedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return b.ReadCloser.Read(p)
	}
	if b.done {
		return 0, io.EOF
	}
	if b.left == 0 {
		b.done = true
		// An error is not the request's: net/http closes the connection
		// of a body not read to its end.
		_, _ = b.tr.drain(b.ReadCloser)
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

func (b *trackedBody) Close() error {
	err := b.ReadCloser.Close()
	if b.resp != nil {
		t := b.resp.Trailer.Clone()
		b.f.mu.Lock()
		b.f.meta.trailer = t
		b.f.mu.Unlock()
	}
	b.cancel()
	return err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pools.
func (rt *recordingTransport) CloseIdleConnections() {
	if c, ok := rt.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
