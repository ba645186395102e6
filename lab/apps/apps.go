// Package apps runs the tutorial applications of the local lab: one real
// HTTP server on a loopback port per simulated pod, answering and logging
// byte for byte as the real apps do (docs/real-apps.md): callme-service and
// caller-service (Spring Boot 2.5), the Skupper tutorial's
// sample-spring-kotlin-microservice (Spring Boot 3.1), Istio's echo and
// helloworld apps, Kuma's test-server and Cilium's rebel-base (nginx
// 1.15.8). Each writes its own log lines, and only those, as CRI records
// to the pod's log file, which kwok's Logs objects serve to `kubectl logs`.
// No app logs a request id unless the real one does (only Istio's echo
// app, which logs the request headers).
package apps

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
	"github.com/mesh-verify/mesh-verify/lab/internal/gate"
	"github.com/mesh-verify/mesh-verify/lab/loopback"
)

// App kinds.
const (
	// KindCallme is piomin/sample-istio-services' callme-service: GET
	// /callme/ping answers "I'm callme-service v1".
	KindCallme = "callme"
	// KindCaller is its caller-service: GET /caller/ping calls
	// http://callme-service:8080/callme/ping (through its sidecar) and
	// answers "I'm caller-service v1. Calling... " and the callee's answer.
	KindCaller = "caller"
	// KindPersons is the Skupper tutorial's sample-spring-kotlin-microservice
	// (branch delayed): GET /persons, /persons/{id}, /persons/ages/{age}.
	KindPersons = "persons"
	// KindEcho is Istio's echo test app: Key=value lines.
	KindEcho = "echo"
	// KindHelloworld is Istio's helloworld sample: GET /hello.
	KindHelloworld = "helloworld"
	// KindTestServer is Kuma's test-server (`test-server echo`): JSON
	// naming its instance.
	KindTestServer = "test-server"
	// KindRebelBase is Cilium's rebel-base: nginx 1.15.8 serving a JSON
	// file naming its cluster.
	KindRebelBase = "rebel-base"
)

// Kinds lists the app kinds.
func Kinds() []string {
	return []string{KindCallme, KindCaller, KindPersons, KindEcho, KindHelloworld, KindTestServer, KindRebelBase}
}

// Echo variants (Spec.Variant for KindEcho).
const (
	// EchoCurrent is Istio 1.19 and later: Cluster=, IstioVersion= and
	// Namespace= lines only when set.
	EchoCurrent = ""
	// Echo118 is Istio 1.18 and earlier: Cluster=, IstioVersion= and Alpn=
	// always, empty when unset (what users see when the echo app was
	// started without --cluster), and no Namespace= line.
	Echo118 = "1.18"
)

// KubeletVersion is the Kubernetes minor version the lab's kubelet probes
// announce (kube-probe/1.36): the lab runs Kubernetes v1.36 (tools/lab/NOTES.md).
const KubeletVersion = "1.36"

// Limits that keep a stuck peer or a hostile request from pinning a
// goroutine or memory.
const (
	readHeaderTimeout = 10 * time.Second
	calleeTimeout     = 30 * time.Second
	maxCalleeBody     = 64 << 10
	// maxRequestDelay bounds the delays a request may ask for (Istio
	// echo's ?delay=, Kuma test-server's x-set-response-delay-ms); the
	// real apps have no bound, but a lab app must not hold a connection
	// for hours.
	maxRequestDelay = time.Minute
	maxDelay        = 10 * time.Second // Spec.Delay
)

// Probe is a kubelet HTTP probe the pod's manifest declares: GET Path
// every Period, answered and logged by the app like any request.
type Probe struct {
	Name   string // liveness, readiness
	Path   string
	Period time.Duration
}

// Spec describes one simulated pod's application.
type Spec struct {
	// Kind is one of Kinds().
	Kind string
	// Service is the app's name where it says it (the tutorial apps'
	// answers); defaults per kind.
	Service string
	// Version, e.g. "v1"; defaults to "v1".
	Version string
	// Pod is the pod name: the hostname the app sees (echo's Hostname=,
	// helloworld's and test-server's instance); defaults to Service.
	Pod string
	// Cluster and Namespace are where the pod runs.
	Cluster   string
	Namespace string
	// ClusterName is what the app says its cluster is: Istio echo's
	// --cluster (empty: no Cluster= line, or an empty one in Echo118),
	// rebel-base's "Cluster" value (required for that kind).
	ClusterName string
	// Variant selects a release of the real app where formats changed
	// (KindEcho: EchoCurrent or Echo118).
	Variant string
	// Port is the container port the app listens on in its pod: it shows
	// in Tomcat's thread names, echo's ServicePort= and startup lines.
	// Defaults per kind (8080; helloworld 5000; test-server 80; rebel-base 80).
	Port int32
	// LogFile is the CRI-format log file this pod's `kubectl logs` serves.
	// Empty means no log (for uses outside the lab).
	LogFile string
	// Callee is the base URL the caller calls, usually the data plane
	// playing the caller's sidecar. A URL without a path gets
	// "/callme/ping", the tutorial's call.
	Callee string
	// CalleeHost is the Host header of the caller's call; default
	// "callme-service:8080", the address the real app calls.
	CalleeHost string
	// Delay is an extra service time added to every answer (0..10s), on
	// top of what the real app takes (the persons app's own random delay,
	// helloworld's CPU loop).
	Delay time.Duration
	// Seed seeds the app's randomness (the persons app's data and delays,
	// echo's ?codes=): the same seed replays the same answers.
	Seed uint64
	// Probes are the kubelet probes the pod receives; nil means the kind's
	// manifest's probes (rebel-base: liveness every 1s, readiness every
	// 10s, both GET /), an empty non-nil slice none.
	Probes []Probe
	// Clock returns the time the app writes in its log lines; nil means
	// time.Now. Tests fix it to compare whole lines.
	Clock func() time.Time
}

// kind is what one app kind does.
type kind interface {
	// start writes the app's startup lines.
	start(s *Server) error
	serve(s *Server, w http.ResponseWriter, r *http.Request)
}

// Server is one running app.
type Server struct {
	spec   Spec
	kind   kind
	ln     net.Listener
	srv    *http.Server
	log    *crilog.Log // nil when Spec.LogFile is empty
	start  time.Time
	client *http.Client // caller's calls and kubelet probes

	rngMu sync.Mutex
	rng   *rand.Rand

	hits     atomic.Int64
	logErrs  atomic.Int64
	notReady atomic.Bool // zero value means ready, as a fresh pod that passed its probe

	// gate keeps handlers from starting once Close began, so Close can wait
	// for every handler (and its log write) before closing the log file.
	gate gate.Gate

	cancelBase context.CancelFunc // cancels every request context and the probes
	stopWatch  func() bool        // stops the context.AfterFunc watching Start's ctx
	served     chan struct{}      // closed when http.Server.Serve returned
	probes     sync.WaitGroup
	stopOnce   sync.Once
	stopErr    error
}

// Start validates s, listens on addr (a loopback address such as
// "127.0.0.1:0") and serves until ctx is cancelled or Shutdown/Close is
// called. The app's startup lines are in the log before Start returns.
func Start(ctx context.Context, s Spec, addr string) (*Server, error) {
	s, err := s.withDefaults()
	if err != nil {
		return nil, err
	}
	what := fmt.Sprintf("%s app for pod %s", s.Kind, s.Pod)
	if err := checkLoopbackAddr(addr); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	srv := &Server{spec: s, served: make(chan struct{}), rng: rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))}
	srv.start = srv.now()
	tr := loopback.Transport(64, 64)
	// Neither Java's HttpURLConnection nor the kubelet's prober asks for
	// gzip; Go's client would add Accept-Encoding on its own.
	tr.DisableCompression = true
	srv.client = &http.Client{Transport: tr, Timeout: calleeTimeout}
	if srv.kind, err = newKind(srv); err != nil {
		return nil, fmt.Errorf("start %s: %w", what, err)
	}
	if s.LogFile != "" {
		if srv.log, err = crilog.Open(s.LogFile); err != nil {
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
	if err := srv.kind.start(srv); err != nil {
		cancel()
		_ = ln.Close()
		_ = srv.closeLog()
		return nil, fmt.Errorf("start %s: write startup lines: %w", what, err)
	}
	go func() {
		defer close(srv.served)
		// Serve only returns http.ErrServerClosed after Close/Shutdown, or a
		// listener error that Close then reports nothing more about.
		_ = srv.srv.Serve(ln)
	}()
	for _, p := range s.Probes {
		srv.probes.Add(1)
		go srv.probe(base, p)
	}
	srv.stopWatch = context.AfterFunc(ctx, func() { _ = srv.Close() })
	return srv, nil
}

func newKind(s *Server) (kind, error) {
	switch s.spec.Kind {
	case KindCallme:
		return newCallme(s), nil
	case KindCaller:
		return newCaller(s)
	case KindPersons:
		return newPersons(s), nil
	case KindEcho:
		return &echo{}, nil
	case KindHelloworld:
		return &helloworld{}, nil
	case KindTestServer:
		return testServer{}, nil
	case KindRebelBase:
		return newRebelBase(s), nil
	}
	return nil, fmt.Errorf("unknown kind %q", s.spec.Kind)
}

// Addr is the listening address, e.g. "127.0.0.1:40123".
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL is "http://" + Addr().
func (s *Server) URL() string { return "http://" + s.Addr() }

// Spec is the app's spec with defaults filled in.
func (s *Server) Spec() Spec { return s.spec }

// Hits counts the requests the app's own code handled (the controller
// method ran, the file was served): what the real app would count. Not-ready
// 503s, 404s and health checks are not hits.
func (s *Server) Hits() int64 { return s.hits.Load() }

// LogErrors counts log lines that could not be written (disk full, file
// closed by a racing Close). A real app keeps answering when logging fails,
// so this does too, and tests check this counter instead.
func (s *Server) LogErrors() int64 { return s.logErrs.Load() }

// SetReady(false) makes the app answer 503 to everything, like a pod
// failing its readiness probe that still gets traffic — the failover tests'
// broken pod. SetReady(true) restores it.
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

// finish force-closes the http.Server, cancels request contexts and
// probes, waits for every handler, probe and the serve goroutine, then
// releases connections and the log file.
func (s *Server) finish() error {
	_ = s.srv.Close()
	s.cancelBase()
	s.gate.Close()
	s.probes.Wait()
	<-s.served
	s.client.CloseIdleConnections()
	return s.closeLog()
}

func (s *Server) closeLog() error {
	if s.log == nil {
		return nil
	}
	return s.log.Close()
}

func (s *Server) now() time.Time {
	if s.spec.Clock != nil {
		return s.spec.Clock()
	}
	return time.Now()
}

// write appends one line to the pod log, if the pod has one; a failed
// write is counted, and the app goes on as a real one does.
func (s *Server) write(stream, msg string) {
	if s.log == nil {
		return
	}
	if err := s.log.Write(stream, msg); err != nil {
		s.logErrs.Add(1)
	}
}

// startupLine writes a startup line; unlike request lines, a failed one
// fails Start.
func (s *Server) startupLine(stream, msg string) error {
	if s.log == nil {
		return nil
	}
	return s.log.Write(stream, msg)
}

// randN is a seeded uniform draw in [0, n).
func (s *Server) randN(n int64) int64 {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.Int64N(n)
}

// sleep waits d or until the request is abandoned; false means abandoned.
func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return true
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// ServeHTTP admits the request and hands it to the app's kind.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.gate.Enter() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.gate.Leave()
	if !s.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if !sleep(r.Context(), s.spec.Delay) {
		return
	}
	s.kind.serve(s, w, r)
}

// probe plays one kubelet probe until ctx ends: GET with the kubelet's
// headers and no keep-alive, from outside the app, so the app answers and
// logs it like any request.
func (s *Server) probe(ctx context.Context, p Probe) {
	defer s.probes.Done()
	t := time.NewTicker(p.Period)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL()+p.Path, nil)
		if err != nil {
			return
		}
		req.Header.Set("User-Agent", "kube-probe/"+KubeletVersion)
		req.Header.Set("Accept", "*/*")
		req.Close = true
		if resp, err := s.client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

func (s Spec) withDefaults() (Spec, error) {
	port := int32(8080)
	switch s.Kind {
	case KindCallme:
		s.Service = orDefault(s.Service, "callme-service")
	case KindCaller:
		s.Service = orDefault(s.Service, "caller-service")
		s.CalleeHost = orDefault(s.CalleeHost, "callme-service:8080")
		if s.Callee == "" {
			return s, fmt.Errorf("start caller app for pod %q: Callee is required", s.Pod)
		}
	case KindPersons:
		s.Service = orDefault(s.Service, "sample-spring-kotlin-microservice")
	case KindEcho:
		s.Service = orDefault(s.Service, "echo")
		if s.Variant != EchoCurrent && s.Variant != Echo118 {
			return s, fmt.Errorf("start echo app for pod %q: unknown variant %q (known: %q, %q)", s.Pod, s.Variant, EchoCurrent, Echo118)
		}
	case KindHelloworld:
		s.Service = orDefault(s.Service, "helloworld")
		port = 5000
	case KindTestServer:
		s.Service = orDefault(s.Service, "test-server")
		port = 80
	case KindRebelBase:
		s.Service = orDefault(s.Service, "rebel-base")
		port = 80
		if s.ClusterName == "" {
			return s, fmt.Errorf("start rebel-base app for pod %q: ClusterName is required (the \"Cluster\" value of its ConfigMap, like Cluster-1)", s.Pod)
		}
		if s.Probes == nil {
			s.Probes = []Probe{{"liveness", "/", time.Second}, {"readiness", "/", 10 * time.Second}}
		}
	default:
		return s, fmt.Errorf("start app for pod %q: unknown kind %q (known: %v)", s.Pod, s.Kind, Kinds())
	}
	if s.Variant != "" && s.Kind != KindEcho {
		return s, fmt.Errorf("start %s app for pod %q: variants exist for kind %s only", s.Kind, s.Pod, KindEcho)
	}
	s.Version = orDefault(s.Version, "v1")
	s.Pod = orDefault(s.Pod, s.Service)
	if s.Port == 0 {
		s.Port = port
	}
	if s.Port < 1 {
		return s, fmt.Errorf("start %s app for pod %s: container port %d out of range", s.Kind, s.Pod, s.Port)
	}
	if s.Delay < 0 || s.Delay > maxDelay {
		return s, fmt.Errorf("start %s app for pod %s: Delay %v out of range 0..%v", s.Kind, s.Pod, s.Delay, maxDelay)
	}
	s.Probes = slices.Clone(s.Probes)
	for i, p := range s.Probes {
		if p.Period < 100*time.Millisecond || p.Path == "" || p.Path[0] != '/' {
			return s, fmt.Errorf("start %s app for pod %s: probe %d (%s): want a path starting with / and a period of at least 100ms, got %q every %v",
				s.Kind, s.Pod, i, p.Name, p.Path, p.Period)
		}
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
