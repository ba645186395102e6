package meshsim

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/loopback"
)

// Limits that keep a slow or stuck peer from pinning goroutines or memory.
const (
	readHeaderTimeout = 10 * time.Second
	shutdownGrace     = 5 * time.Second
	mirrorTimeout     = 30 * time.Second
	maxMirrorBody     = 1 << 20 // larger bodies are forwarded but not mirrored
	maxMirrorDiscard  = 1 << 20 // mirror answers are read this far, then the connection is dropped
)

// NoHealthyUpstream is Envoy's answer (503) when a route has no ready
// endpoint; every lab data plane gives it.
const NoHealthyUpstream = "no healthy upstream"

// Envoy's answers, so clients and tests see what a real proxy says.
const (
	upstreamConnError = "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
)

type (
	connKey   struct{}
	scopeKey  struct{}
	targetKey struct{}
)

// scope is one Serve call: its base context (cancelled when Serve ends)
// and a gate that lets Serve wait for every handler and mirror copy it
// started before returning.
type scope struct {
	base    context.Context
	mu      sync.Mutex
	closing bool
	wg      sync.WaitGroup
}

func (sc *scope) enter() bool {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	if sc.closing {
		return false
	}
	sc.wg.Add(1)
	return true
}

func (sc *scope) closeAndWait() {
	sc.mu.Lock()
	sc.closing = true
	sc.mu.Unlock()
	sc.wg.Wait()
}

// Serve answers on ln until ctx is cancelled, then shuts down gracefully
// (bounded), aborts what is left, and returns once every handler and
// mirror copy it started has finished. A nil error means ctx ended it.
func (s *Sim) Serve(ctx context.Context, ln net.Listener) error {
	if err := loopback.CheckListener(ln.Addr()); err != nil {
		return fmt.Errorf("mesh simulator serve on %s: %w", ln.Addr(), err)
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	sc := &scope{base: base}
	base = context.WithValue(base, scopeKey{}, sc)
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
		ConnContext:       s.connContext,
		ConnState:         s.connState,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	var err error
	select {
	case err = <-errc:
		_ = srv.Close()
		err = fmt.Errorf("mesh simulator serve on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
		if serr := srv.Shutdown(sctx); serr != nil {
			_ = srv.Close()
		}
		scancel()
		<-errc
	}
	cancel() // aborts forwards still running after a forced close, and mirror copies
	sc.closeAndWait()
	s.transport.CloseIdleConnections()
	return err
}

// connContext runs in the accept loop, in accept order, before the
// connection's first byte is read: a per-connection policy picks here, as
// Skupper routes a TCP connection when it opens.
func (s *Sim) connContext(ctx context.Context, nc net.Conn) context.Context {
	c := &conn{}
	s.mu.Lock()
	s.conns[nc] = c
	s.st.Connections++
	if s.perConnection() {
		if b, ok := s.chooseLocked(s.rng.Uint64()); ok {
			s.pinLocked(c, b)
		}
		// else the first request re-tries, and answers 503 if still nothing
	}
	s.mu.Unlock()
	return context.WithValue(ctx, connKey{}, c)
}

// connState releases a connection's open-connection count when it closes.
func (s *Sim) connState(nc net.Conn, st http.ConnState) {
	if st != http.StateClosed && st != http.StateHijacked {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.conns[nc]; ok {
		s.unpinLocked(c)
		delete(s.conns, nc)
	}
}

// ServeHTTP routes one request. Outside Serve it works too, but then every
// request is its own "connection" (no stickiness, no open counts).
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sc, _ := r.Context().Value(scopeKey{}).(*scope)
	if sc != nil {
		if !sc.enter() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		defer sc.wg.Done()
	}
	c, _ := r.Context().Value(connKey{}).(*conn)
	b, streamID, ok := s.route(c)
	if !ok {
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, NoHealthyUpstream)
		return
	}
	out := r.Clone(context.WithValue(r.Context(), targetKey{}, b))
	// Envoy makes up an x-request-id when the client sent none, so every
	// hop's log line can be joined; the mirror copy carries the same id.
	if out.Header.Get("X-Request-Id") == "" {
		out.Header.Set("X-Request-Id", newRequestID())
	}
	s.mu.Lock()
	mb, mirror := s.mirrorLocked(streamID)
	s.mu.Unlock()
	if mirror {
		s.mirror(sc, out, mb)
	}
	s.proxy.ServeHTTP(w, out)
}

// mirror sends a copy of r to b in the background. Nothing here can touch
// the primary response: failures are only counted.
func (s *Sim) mirror(sc *scope, r *http.Request, b Backend) {
	body, ok := s.bufferBody(r)
	if !ok {
		s.countMirror(func(m *MirrorStats) { m.Dropped++ })
		return
	}
	select {
	case s.mirrorSem <- struct{}{}:
	default:
		s.countMirror(func(m *MirrorStats) { m.Dropped++ })
		return
	}
	var ctx context.Context
	if sc != nil {
		if !sc.enter() {
			<-s.mirrorSem
			s.countMirror(func(m *MirrorStats) { m.Dropped++ })
			return
		}
		ctx = sc.base
	} else {
		ctx = context.WithoutCancel(r.Context())
	}
	req, err := s.mirrorRequest(ctx, r, body, b)
	if err != nil {
		<-s.mirrorSem
		if sc != nil {
			sc.wg.Done()
		}
		s.countMirror(func(m *MirrorStats) { m.Failed++ })
		return
	}
	s.countMirror(func(m *MirrorStats) { m.InFlight++ })
	go func() {
		defer func() {
			<-s.mirrorSem
			if sc != nil {
				sc.wg.Done()
			}
		}()
		ctx, cancel := context.WithTimeout(req.Context(), mirrorTimeout)
		defer cancel()
		resp, err := s.transport.RoundTrip(req.WithContext(ctx))
		if err == nil {
			_, err = io.Copy(io.Discard, io.LimitReader(resp.Body, maxMirrorDiscard))
			resp.Body.Close()
		}
		s.countMirror(func(m *MirrorStats) {
			m.InFlight--
			if err != nil {
				m.Failed++
				return
			}
			m.Sent++
			m.ByCluster[b.Cluster]++
			m.ByPod[podKey(b)]++
		})
	}()
}

func (s *Sim) countMirror(f func(*MirrorStats)) {
	s.mu.Lock()
	f(&s.st.Mirror)
	s.mu.Unlock()
}

// bufferBody reads r's body (up to maxMirrorBody) so both the primary and
// the copy can send it; r keeps an equivalent body either way. It reports
// false when the body is too large to mirror.
func (s *Sim) bufferBody(r *http.Request) ([]byte, bool) {
	if r.Body == nil || r.Body == http.NoBody {
		return nil, true
	}
	buf, err := io.ReadAll(io.LimitReader(r.Body, maxMirrorBody+1))
	if err != nil || len(buf) > maxMirrorBody {
		// Forward what was read followed by the rest; the copy is dropped.
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(buf), errReader{err}, r.Body), r.Body}
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(buf))
	return buf, true
}

// errReader replays a read error after the buffered prefix, or is a no-op.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	return 0, io.EOF
}

// mirrorRequest builds Envoy's shadow copy: same method, URI, headers and
// body, Host with "-shadow".
func (s *Sim) mirrorRequest(ctx context.Context, r *http.Request, body []byte, b Backend) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, r.Method, "http://"+b.Addr+r.URL.RequestURI(), bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("build mirror copy of %s %s for pod %s: %w", r.Method, r.URL, podKey(b), err)
	}
	if body == nil {
		req.Body = http.NoBody
	}
	req.Header = r.Header.Clone()
	removeHopByHop(req.Header)
	req.Host = shadowHost(r.Host)
	return req, nil
}

// shadowHost is Envoy's shadowAppendedHost: "-shadow" goes before the
// port ("callme-service:8080" → "callme-service-shadow:8080"), at the end
// when there is no port.
func shadowHost(host string) string {
	if host == "" {
		return host
	}
	i := strings.LastIndexByte(host, ':')
	if i < 0 || strings.LastIndexByte(host, ']') > i {
		return host + "-shadow"
	}
	return host[:i] + "-shadow" + host[i:]
}

func removeHopByHop(h http.Header) {
	for _, f := range h.Values("Connection") {
		for _, name := range strings.Split(f, ",") {
			h.Del(strings.TrimSpace(name))
		}
	}
	for _, name := range []string{"Connection", "Proxy-Connection", "Keep-Alive", "Proxy-Authenticate",
		"Proxy-Authorization", "Te", "Trailer", "Transfer-Encoding", "Upgrade"} {
		h.Del(name)
	}
}

// newProxy forwards to the backend route() chose, keeping the inbound Host
// (a sidecar keeps the authority) and answering like Envoy on failure.
func (s *Sim) newProxy() *httputil.ReverseProxy {
	return &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			b := pr.In.Context().Value(targetKey{}).(Backend)
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = b.Addr
			pr.Out.Host = pr.In.Host
		},
		Transport: s.transport,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil {
				return // the client went away; nobody reads an answer
			}
			s.mu.Lock()
			s.st.UpstreamErrors++
			s.mu.Unlock()
			w.Header().Set("Content-Type", "text/plain")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, upstreamConnError)
		},
	}
}

// newRequestID makes a random UUID (version 4), the form Envoy uses.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // since Go 1.24 crypto/rand.Read never returns an error
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
