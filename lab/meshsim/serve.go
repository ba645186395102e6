package meshsim

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"sync"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/envoylog"
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
const NoHealthyUpstream = envoylog.NoHealthyUpstream

// upstreamConnError is Envoy's answer when the endpoint refused.
const upstreamConnError = envoylog.UpstreamConnectError

type (
	connKey     struct{}
	scopeKey    struct{}
	targetKey   struct{}
	proxyingKey struct{}
)

// Proxying says what the simulator does to the requests it forwards
// beyond routing them, as the proxy it plays would.
type Proxying struct {
	// Envoy makes it behave as Envoy does (an Istio or Kuma sidecar or
	// gateway): it sets x-request-id, a random UUIDv4, on a request that
	// has none, and x-envoy-upstream-service-time on the response. Skupper's
	// router and Cilium's socket load balancer touch no header.
	Envoy bool
	// AccessLog, when set, gets one record per request the simulator
	// answered, as Envoy's connection manager logs it: the primary only —
	// Envoy sends a mirror copy through its async client, which the access
	// log does not record (the mirror target's inbound sidecar logs it).
	AccessLog func(Access)
	// Edge makes the Envoy an edge proxy: it replaces the client's
	// x-request-id with its own (Envoy's use_remote_address without
	// preserve_external_request_id, what Istio's ingress gateway does
	// since 1.25).
	Edge bool
}

// Access is one request as the data plane's access log records it.
type Access struct {
	Entry envoylog.Entry
	// Backend is the pod the request went to; zero when there was none
	// (no healthy upstream).
	Backend Backend
}

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

// Serve is ServeWith as Envoy proxies, without an access log: the
// simulator's behaviour before Proxying existed.
func (s *Sim) Serve(ctx context.Context, ln net.Listener) error {
	return s.ServeWith(ctx, ln, Proxying{Envoy: true})
}

// ServeWith answers on ln until ctx is cancelled, then shuts down
// gracefully (bounded), aborts what is left, and returns once every
// handler and mirror copy it started has finished. A nil error means ctx
// ended it.
func (s *Sim) ServeWith(ctx context.Context, ln net.Listener, p Proxying) error {
	if err := loopback.CheckListener(ln.Addr()); err != nil {
		return fmt.Errorf("mesh simulator serve on %s: %w", ln.Addr(), err)
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	sc := &scope{base: base}
	base = context.WithValue(base, scopeKey{}, sc)
	base = context.WithValue(base, proxyingKey{}, p)
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
// request is its own "connection" (no stickiness, no open counts) and it
// proxies as Envoy without an access log.
func (s *Sim) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sc, _ := r.Context().Value(scopeKey{}).(*scope)
	if sc != nil {
		if !sc.enter() {
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		defer sc.wg.Done()
	}
	px, ok := r.Context().Value(proxyingKey{}).(Proxying)
	if !ok {
		px = Proxying{Envoy: true}
	}
	start := time.Now()
	in := envoylog.CountBody(r)
	rec := &envoylog.Recorder{ResponseWriter: w}
	ex := envoylog.NewExchange()
	// A compiled matcher is never changed (SetPolicy swaps in another), so
	// its regexes run outside the simulator's lock every request takes.
	s.mu.Lock()
	m, none := s.match, s.p.NoRoute != ""
	s.mu.Unlock()
	if none || !m.takes(r) {
		s.mu.Lock()
		s.st.Requests++
		s.st.NoRoute++
		s.mu.Unlock()
		// Envoy's answer when no route matches: 404, an empty body,
		// response flag NR; no upstream is tried.
		rec.WriteHeader(http.StatusNotFound)
		ex.NoRoute()
		px.record(r, r.Header.Get("X-Request-Id"), start, in, rec, ex, Backend{})
		return
	}
	c, _ := r.Context().Value(connKey{}).(*conn)
	b, streamID, ok := s.route(c)
	if !ok {
		rec.Header().Set("Content-Type", "text/plain")
		rec.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(rec, NoHealthyUpstream)
		ex.NoUpstream()
		px.record(r, r.Header.Get("X-Request-Id"), start, in, rec, ex, Backend{})
		return
	}
	out := r.Clone(ex.Context(context.WithValue(r.Context(), targetKey{}, b)))
	// Envoy makes up an x-request-id when the client sent none, so every
	// hop's log line can be joined; the mirror copy carries the same id.
	if px.Envoy && (px.Edge || out.Header.Get("X-Request-Id") == "") {
		out.Header.Set("X-Request-Id", envoylog.NewRequestID())
	}
	s.mu.Lock()
	mb, mirror := s.mirrorLocked(streamID)
	s.mu.Unlock()
	if mirror {
		s.mirror(sc, out, mb)
	}
	s.proxy.ServeHTTP(rec, out)
	ex.Done(r, rec)
	px.record(out, out.Header.Get("X-Request-Id"), start, in, rec, ex, b)
}

// record hands one request to the access log, if there is one.
func (px Proxying) record(r *http.Request, requestID string, start time.Time, in *envoylog.BodyCounter, rec *envoylog.Recorder, ex *envoylog.Exchange, b Backend) {
	if px.AccessLog == nil {
		return
	}
	e := envoylog.Entry{
		Start: start, Method: r.Method, Path: r.URL.RequestURI(), Protocol: r.Proto, Code: rec.Code,
		Flags: ex.Flags, Details: ex.Details, BytesIn: in.N, BytesOut: rec.Bytes, Duration: time.Since(start),
		Upstream: ex.Upstream, XFF: r.Header.Get("X-Forwarded-For"), UserAgent: r.UserAgent(),
		RequestID: requestID, Authority: r.Host, UpstreamHost: b.Addr, UpstreamLocal: ex.UpstreamLocal,
		DownstreamRemote: r.RemoteAddr, TraceID: r.Header.Get("X-B3-Traceid"),
	}
	if local, ok := r.Context().Value(http.LocalAddrContextKey).(net.Addr); ok {
		e.DownstreamLocal = local.String()
	}
	px.AccessLog(Access{Entry: e, Backend: b})
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
	s.mu.Lock()
	if s.p.Mirror != nil && s.p.Mirror.KeepHost {
		req.Host = r.Host
	}
	s.mu.Unlock()
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
		Transport: retryTransport{s},
		ModifyResponse: func(resp *http.Response) error {
			ctx := resp.Request.Context()
			if ex := envoylog.ExchangeOf(ctx); ex != nil {
				px, ok := ctx.Value(proxyingKey{}).(Proxying)
				ex.Answered(resp, !ok || px.Envoy)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			gone := r.Context().Err() != nil
			if ex := envoylog.ExchangeOf(r.Context()); ex != nil {
				ex.Failed(gone)
			}
			if gone {
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
