package attack

import (
	"context"
	"crypto/tls"
	"errors"
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
	dial    DialFunc
	next    atomic.Uint64
	mu      sync.Mutex
	sink    Sink
	pending sync.Map // vegeta seq -> meta; entries live only while a request is in flight
	// truncated counts bodies abandoned beyond maxBody+DrainLimit.
	truncated atomic.Uint64
}

type meta struct {
	rid  string
	conn uint64
	// trailer is set when the body is closed (recordingTransport.trailers).
	trailer *http.Header
}

func newTracker(d DialFunc) *tracker {
	if d == nil {
		nd := &net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}
		d = nd.DialContext
	}
	return &tracker{dial: d}
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

func (t *tracker) take(seq uint64) (meta, bool) {
	v, ok := t.pending.LoadAndDelete(seq)
	if !ok {
		return meta{}, false
	}
	return *v.(*meta), true
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
type recordingTransport struct {
	next      http.RoundTripper
	tr        *tracker
	ridHeader string
	// maxBody caps what is read of each body (< 0: no cap).
	maxBody int64
	// abort, when done, ends the requests in flight (Options.Abort).
	abort context.Context
	// trailers keeps each response's trailers in its meta (Options.GRPC).
	trailers bool
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	seq, err := strconv.ParseUint(req.Header.Get("X-Vegeta-Seq"), 10, 64)
	if err != nil {
		return rt.next.RoundTrip(req)
	}
	m := &meta{rid: req.Header.Get(rt.ridHeader)}
	rt.tr.pending.Store(seq, m)
	trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
		c := info.Conn
		if tc, ok := c.(*tls.Conn); ok {
			c = tc.NetConn()
		}
		if tc, ok := c.(*trackedConn); ok {
			m.conn = tc.id
		}
	}}
	ctx := httptrace.WithClientTrace(req.Context(), trace)
	release := func() {}
	if ab := rt.abort; ab != nil {
		// A second Ctrl-C aborts what is in flight instead of waiting for
		// the request timeout: the request's context ends with Abort's.
		if ab.Err() != nil {
			return nil, errAborted
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		stop := context.AfterFunc(ab, cancel)
		release = func() { stop(); cancel() }
	}
	resp, err := rt.next.RoundTrip(req.WithContext(ctx))
	if err != nil {
		release()
		return resp, err
	}
	if rt.trailers && resp.Body != nil {
		// Trailers are known once the body has been read to its end,
		// which vegeta does before it closes it.
		resp.Body = &releasingBody{ReadCloser: resp.Body, release: func() {
			t := resp.Trailer.Clone()
			m.trailer = &t
		}}
	}
	if rt.maxBody >= 0 && resp.Body != nil {
		resp.Body = &cappedBody{ReadCloser: resp.Body, left: rt.maxBody, tr: rt.tr}
	}
	if rt.abort != nil && resp.Body != nil {
		resp.Body = &releasingBody{ReadCloser: resp.Body, release: release}
	} else {
		release()
	}
	return resp, nil
}

// errAborted is the error of a request not sent because the attack was
// aborted.
var errAborted = errors.New("attack aborted")

// releasingBody frees the request's abort hook when vegeta closes the body.
type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	err := b.ReadCloser.Close()
	b.release()
	return err
}

// DrainLimit is how much of a body beyond maxBody is read (and thrown
// away) so that its connection can carry the next request; a longer body
// is abandoned and its connection closed. vegeta reads maxBody bytes and
// then drains the rest to EOF, which for a 1 GiB answer transfers 1 GiB
// per request.
const DrainLimit = 256 << 10

// cappedBody ends a response body after maxBody bytes for its reader.
// At the cap it drains up to DrainLimit more: a body that ends there
// keeps its keep-alive connection (per-connection balancing sees the same
// connections as without a cap); one that does not is counted truncated
// and its connection is closed when vegeta closes the body unread.
type cappedBody struct {
	io.ReadCloser
	left int64
	tr   *tracker
	done bool
}

func (b *cappedBody) Read(p []byte) (int, error) {
	if b.done {
		return 0, io.EOF
	}
	if b.left <= 0 {
		b.done = true
		n, err := io.Copy(io.Discard, io.LimitReader(b.ReadCloser, DrainLimit+1))
		if err == nil && n > DrainLimit {
			b.tr.truncated.Add(1)
		}
		return 0, io.EOF
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pools.
func (rt *recordingTransport) CloseIdleConnections() {
	if c, ok := rt.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
