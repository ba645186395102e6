// Package apps runs the tutorial applications of the local lab: one real
// HTTP server on a loopback port per simulated pod, answering like the apps
// of the multi-cluster tutorials (callme-service, caller-service, the Skupper
// sample-spring-kotlin-microservice, Istio's echo app) and appending one
// CRI-format line per request to the pod's log file, which kwok's
// ClusterLogs serves to `kubectl logs`. A user's
// `kubectl logs … | grep "I'm callme-service v2"` therefore counts exactly
// what it would count against the real tutorial.
package apps

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/loopback"
)

// App kinds.
const (
	// KindCallme answers "I'm callme-service v1" on /callme/ping.
	KindCallme = "callme"
	// KindCaller answers "I'm caller-service v1. Calling... " followed by
	// the answer of its callee's /callme/ping, on /caller/ping.
	KindCaller = "caller"
	// KindPersons is the Skupper tutorial's sample-spring-kotlin-microservice:
	// GET /persons, /persons/{id}, /persons/ages/{age} answer JSON.
	KindPersons = "persons"
	// KindEcho is Istio's echo test app: any path answers key=value lines
	// (ServiceVersion=, ServicePort=, Host=, Cluster=, RequestHeader=, Hostname=).
	KindEcho = "echo"
)

// Timeouts that keep a stuck peer from pinning a goroutine forever.
const (
	readHeaderTimeout = 10 * time.Second
	calleeTimeout     = 30 * time.Second
	maxCalleeBody     = 64 << 10
)

// Spec describes one simulated pod's application.
type Spec struct {
	// Kind is one of KindCallme, KindCaller, KindPersons, KindEcho.
	Kind string
	// Service is the app's name in its answers; defaults per kind
	// ("callme-service", "caller-service", "sample-spring-kotlin-microservice", "echo").
	Service string
	// Version, e.g. "v1"; defaults to "v1".
	Version string
	// Pod is the pod name (Istio echo's Hostname=); defaults to Service.
	Pod string
	// Cluster and Namespace are reported by the echo app and the startup line.
	Cluster   string
	Namespace string
	// LogFile is the CRI-format log file this pod's `kubectl logs` serves.
	// Empty means no log (for uses outside the lab).
	LogFile string
	// Callee is the base URL the caller calls, usually the mesh simulator
	// playing the caller's sidecar. A URL without a path gets
	// "/callme/ping", the tutorial's call.
	Callee string
	// CalleeHost, when set, is the Host header of the caller's call (e.g.
	// "callme-service:8080"): the real app addresses its callee by Service
	// name, and that is the authority a sidecar sees and mirrors with a
	// "-shadow" suffix.
	CalleeHost string
	// Delay is an optional service time added to every answer.
	Delay time.Duration
}

// Server is one running app.
type Server struct {
	spec      Spec
	ln        net.Listener
	srv       *http.Server
	log       *CRILog // nil when Spec.LogFile is empty
	callee    *url.URL
	transport *http.Transport // caller only
	people    []person        // persons only; never mutated

	hits     atomic.Int64
	logErrs  atomic.Int64
	notReady atomic.Bool  // zero value means ready, as a fresh pod that passed its probe
	findSeq  atomic.Int64 // the persons app numbers its calls in its log lines

	// gate keeps handlers from starting once Close began, so Close can wait
	// for every handler (and its log write) before closing the log file.
	gateMu   sync.Mutex
	closing  bool
	inflight sync.WaitGroup
	active   atomic.Int64 // handlers running; WaitGroup has no counter to read

	cancelBase context.CancelFunc // cancels every request context, aborting Delay and callee calls
	stopWatch  func() bool        // stops the context.AfterFunc watching Start's ctx
	served     chan struct{}      // closed when http.Server.Serve returned
	stopOnce   sync.Once
	stopErr    error
}

// Start validates s, listens on addr (a loopback address such as
// "127.0.0.1:0") and serves until ctx is cancelled or Shutdown/Close is
// called. The log file gets a startup line before Start returns.
func Start(ctx context.Context, s Spec, addr string) (*Server, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%s app for pod %s", s.Kind, s.Pod)
	if err := checkLoopbackAddr(addr); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	srv := &Server{spec: s, served: make(chan struct{})}
	if s.Kind == KindCaller {
		if srv.callee, err = calleeURL(s.Callee); err != nil {
			return nil, fmt.Errorf("start %s: %w", what, err)
		}
		srv.transport = loopback.Transport(64, 64)
	}
	if s.Kind == KindPersons {
		srv.people = samplePeople()
	}
	if s.LogFile != "" {
		if srv.log, err = OpenCRILog(s.LogFile); err != nil {
			return nil, fmt.Errorf("start %s: %w", what, err)
		}
	}
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", addr)
	if err != nil {
		_ = srv.closeLog()
		return nil, fmt.Errorf("start %s: listen on %s: %w", what, addr, err)
	}
	// A name ("localhost") is resolved by Listen: check what it bound.
	if err := loopback.CheckListener(ln.Addr()); err != nil {
		_ = ln.Close()
		_ = srv.closeLog()
		return nil, fmt.Errorf("start %s: listen on %s: %w", what, addr, err)
	}
	srv.ln = ln
	// Request contexts outlive Start's ctx only until Close: a cancelled
	// ctx closes the server, which cancels them through cancelBase.
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	srv.cancelBase = cancel
	srv.srv = &http.Server{
		Handler:           srv,
		ReadHeaderTimeout: readHeaderTimeout,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	if err := srv.logLine(fmt.Sprintf("Started %s %s pod=%s cluster=%s namespace=%s addr=%s",
		s.Service, s.Version, s.Pod, s.Cluster, s.Namespace, ln.Addr())); err != nil {
		cancel()
		_ = ln.Close()
		_ = srv.closeLog()
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	go func() {
		defer close(srv.served)
		// Serve only returns http.ErrServerClosed after Close/Shutdown, or a
		// listener error that Close then reports nothing more about.
		_ = srv.srv.Serve(ln)
	}()
	srv.stopWatch = context.AfterFunc(ctx, func() { _ = srv.Close() })
	return srv, nil
}

// Addr is the listening address, e.g. "127.0.0.1:40123".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "http://" + Addr().
func (s *Server) URL() string { return "http://" + s.Addr() }

// Spec is the app's spec with defaults filled in.
func (s *Server) Spec() Spec { return s.spec }

// Hits counts the requests the app answered in its own words; each one
// appended exactly one log line. Not-ready 503s, 404s and health checks
// are not hits.
func (s *Server) Hits() int64 { return s.hits.Load() }

// LogErrors counts log lines that could not be written (disk full, file
// closed by a racing Close). A real app keeps answering when logging fails,
// so this does too, and tests check this counter instead.
func (s *Server) LogErrors() int64 { return s.logErrs.Load() }

// SetReady(false) makes the app answer 503 to everything but its health
// check's own 503, like a pod failing its readiness probe that still gets
// traffic — the failover tests' broken pod. SetReady(true) restores it.
func (s *Server) SetReady(ready bool) { s.notReady.Store(!ready) }

// Ready reports the state SetReady last set (true initially).
func (s *Server) Ready() bool { return !s.notReady.Load() }

// Shutdown stops accepting, waits for in-flight requests until ctx ends,
// then closes whatever is left. The log file is closed after every handler
// returned, so no line is lost or half-written.
func (s *Server) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		s.stopWatch()
		var errs []error
		if err := s.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("shut down %s app for pod %s: %w", s.spec.Kind, s.spec.Pod, err))
		}
		if err := s.finish(); err != nil {
			errs = append(errs, err)
		}
		s.stopErr = errors.Join(errs...)
	})
	return s.stopErr
}

// Close stops the server at once, aborting in-flight requests.
func (s *Server) Close() error {
	s.stopOnce.Do(func() {
		s.stopWatch()
		s.stopErr = s.finish()
	})
	return s.stopErr
}

// finish force-closes the http.Server, cancels request contexts, waits for
// every handler and the serve goroutine, then releases connections and the
// log file.
func (s *Server) finish() error {
	_ = s.srv.Close()
	s.cancelBase()
	s.gateMu.Lock()
	s.closing = true
	s.gateMu.Unlock()
	s.inflight.Wait()
	<-s.served
	if s.transport != nil {
		s.transport.CloseIdleConnections()
	}
	return s.closeLog()
}

func (s *Server) closeLog() error {
	if s.log == nil {
		return nil
	}
	return s.log.Close()
}

// enter admits a handler unless Close began.
func (s *Server) enter() bool {
	s.gateMu.Lock()
	defer s.gateMu.Unlock()
	if s.closing {
		return false
	}
	s.inflight.Add(1)
	s.active.Add(1)
	return true
}

// leave ends a handler admitted by enter.
func (s *Server) leave() {
	s.active.Add(-1)
	s.inflight.Done()
}

// logLine appends one line to the pod log, if the pod has one.
func (s *Server) logLine(msg string) error {
	if s.log == nil {
		return nil
	}
	return s.log.Line(msg)
}

// hit records an answered request: the line is written before the answer
// so that a client holding its response can already find the line in the
// log (the log-follow tests compare counts right after the attack).
func (s *Server) hit(msg string) {
	s.hits.Add(1)
	if err := s.logLine(msg); err != nil {
		s.logErrs.Add(1)
	}
}

func (s Spec) withDefaults() (Spec, error) {
	switch s.Kind {
	case KindCallme:
		s.Service = orDefault(s.Service, "callme-service")
	case KindCaller:
		s.Service = orDefault(s.Service, "caller-service")
		if s.Callee == "" {
			return s, fmt.Errorf("start caller app for pod %q: Callee is required", s.Pod)
		}
	case KindPersons:
		s.Service = orDefault(s.Service, "sample-spring-kotlin-microservice")
	case KindEcho:
		s.Service = orDefault(s.Service, "echo")
	default:
		return s, fmt.Errorf("start app for pod %q: unknown kind %q (known: %s, %s, %s, %s)",
			s.Pod, s.Kind, KindCallme, KindCaller, KindPersons, KindEcho)
	}
	s.Version = orDefault(s.Version, "v1")
	s.Pod = orDefault(s.Pod, s.Service)
	if s.Delay < 0 {
		return s, fmt.Errorf("start %s app for pod %s: negative Delay %v", s.Kind, s.Pod, s.Delay)
	}
	return s, nil
}

func orDefault(v, d string) string {
	if v == "" {
		return d
	}
	return v
}

// calleeURL parses the caller's callee; it must be plain HTTP on loopback
// because all lab traffic stays on 127.0.0.0/8.
func calleeURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("parse Callee %q: %w", raw, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("callee %q: want http://127.0.0.1:port", raw)
	}
	if err := checkLoopbackHost(u.Hostname()); err != nil {
		return nil, fmt.Errorf("callee %q: %w", raw, err)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/callme/ping"
	}
	return u, nil
}

func checkLoopbackAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("parse listen address %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("listen address %q: bad port: %w", addr, err)
	}
	return checkLoopbackHost(host)
}

func checkLoopbackHost(host string) error {
	if host == "localhost" {
		return nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("host %q is not a loopback IP: the lab stays on 127.0.0.0/8", host)
	}
	return nil
}
