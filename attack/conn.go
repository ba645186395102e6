package attack

import (
	"context"
	"crypto/tls"
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
}

type meta struct {
	rid  string
	conn uint64
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
	return rt.next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
}

// CloseIdleConnections lets http.Client.CloseIdleConnections reach the pools.
func (rt *recordingTransport) CloseIdleConnections() {
	if c, ok := rt.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}
