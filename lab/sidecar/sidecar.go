// Package sidecar plays the inbound side of a mesh's sidecar proxy in a
// lab pod: a small reverse proxy in front of the app, as iptables'
// redirection puts Envoy in front of it on a real mesh. Every request the
// mesh sends to the pod goes through it: it keeps the request's
// x-request-id or makes one up (as Envoy does), forwards to the app, writes
// Envoy's access-log line to the sidecar container's log (Istio's TEXT or
// Kuma's default format, lab/envoylog) and counts the request in the
// Prometheus counters the real proxy exposes (istio_requests_total;
// Envoy's cluster stats for Kuma). The pod's outbound side is the lab's
// data plane (lab/meshsim), which records its requests here too, so the
// container's log and metrics hold both directions like a real proxy's.
// See docs/real-apps.md, "Envoy access logs" and "Sidecar metrics".
package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/envoylog"
	"github.com/mesh-verify/mesh-verify/lab/internal/gate"
	"github.com/mesh-verify/mesh-verify/lab/loopback"
)

// Flavors of sidecar.
const (
	Istio = "istio"
	Kuma  = "kuma"
)

// Flavors lists the known flavors.
func Flavors() []string { return []string{Istio, Kuma} }

// Container is the sidecar's container name in the pod: what
// `kubectl logs -c` takes.
func Container(flavor string) string {
	if flavor == Kuma {
		return "kuma-sidecar"
	}
	return "istio-proxy"
}

// MetricsPorts are the pod ports where the flavor's proxy serves its
// Prometheus metrics: Envoy's own (15090) and the agent's merged endpoint
// (15020) for Istio, kuma-dp's for Kuma.
func MetricsPorts(flavor string) []int32 {
	if flavor == Kuma {
		return []int32{5670}
	}
	return []int32{15090, 15020}
}

// MetricsPath is the path of the metrics on those ports.
func MetricsPath(flavor string) string {
	if flavor == Kuma {
		return "/metrics"
	}
	return "/stats/prometheus"
}

// Limits of the proxy, so a stuck peer cannot pin goroutines forever.
const (
	readHeaderTimeout = 10 * time.Second
	upstreamTimeout   = 60 * time.Second
)

// Writer is the sidecar container's log (a lab/crilog.Log).
type Writer interface {
	Line(msg string) error
}

// Spec describes the pod the sidecar runs in.
type Spec struct {
	Flavor string
	// Pod, Namespace and Cluster are where it runs.
	Pod, Namespace, Cluster string
	// Workload is the pod's Deployment, App its app label (Istio's
	// canonical service), Service the Service it serves, Version its
	// version label.
	Workload, App, Service, Version string
	// Port is the app's container port (inbound|8080||, localhost_8080);
	// ServicePort the port of its Service (Kuma's kuma.io/service tag),
	// Port when zero.
	Port, ServicePort int32
	// Mesh is Kuma's mesh; "" means "default".
	Mesh string
	// Log is the sidecar container's log; nil writes none.
	Log Writer
	// Clock stamps the access-log lines; nil means time.Now.
	Clock func() time.Time
}

// Destination is the pod an outbound request went to.
type Destination struct {
	Service, Namespace string
	Port               int32
	Workload, App      string
	Version, Cluster   string
	// Subset is the route's subset (a DestinationRule subset, like v1),
	// "" when the route names none: it is part of Envoy's cluster name.
	Subset string
}

// Sidecar is one pod's proxy. Its methods are safe for concurrent use.
type Sidecar struct {
	spec    Spec
	metrics *metrics
	logErrs atomic.Int64
	lines   atomic.Int64
	// noInbound stops the inbound access lines (SetInboundLog).
	noInbound atomic.Bool

	// Set by Start.
	app        string
	ln, mln    net.Listener
	srv, msrv  *http.Server
	transport  *http.Transport
	proxy      *httputil.ReverseProxy
	cancel     context.CancelFunc
	served     sync.WaitGroup
	gate       gate.Gate
	closeOnce  sync.Once
	closeError error
}

// New validates spec and readies the sidecar's log and counters, so the
// pod's outbound side can record requests before Start.
func New(spec Spec) (*Sidecar, error) {
	if !slices.Contains(Flavors(), spec.Flavor) {
		return nil, fmt.Errorf("sidecar for pod %s: unknown flavor %q (known: %v)", spec.Pod, spec.Flavor, Flavors())
	}
	if spec.Port < 1 || spec.Port > 65535 {
		return nil, fmt.Errorf("sidecar for pod %s: app port %d out of range", spec.Pod, spec.Port)
	}
	if spec.Mesh == "" {
		spec.Mesh = "default"
	}
	if spec.ServicePort == 0 {
		spec.ServicePort = spec.Port
	}
	return &Sidecar{spec: spec, metrics: newMetrics()}, nil
}

// Start listens on inboundAddr and metricsAddr (loopback addresses such as
// "127.0.0.1:0") and forwards inbound requests to the app at appAddr.
func (s *Sidecar) Start(ctx context.Context, appAddr, inboundAddr, metricsAddr string) error {
	what := fmt.Sprintf("%s sidecar of pod %s", s.spec.Flavor, s.spec.Pod)
	s.app = appAddr
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", inboundAddr)
	if err != nil {
		return fmt.Errorf("start %s: listen on %s: %w", what, inboundAddr, err)
	}
	mln, err := lc.Listen(ctx, "tcp", metricsAddr)
	if err != nil {
		ln.Close()
		return fmt.Errorf("start %s: listen on %s: %w", what, metricsAddr, err)
	}
	for _, l := range []net.Listener{ln, mln} {
		if err := loopback.CheckListener(l.Addr()); err != nil {
			ln.Close()
			mln.Close()
			return fmt.Errorf("start %s: %w", what, err)
		}
	}
	s.ln, s.mln = ln, mln
	s.transport = loopback.Transport(128, 64)
	s.transport.DisableCompression = true
	s.transport.ResponseHeaderTimeout = upstreamTimeout
	s.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = s.app
			pr.Out.Host = pr.In.Host // the authority passes unchanged
			// Rewrite drops X-Forwarded-*: a sidecar passes a client's
			// X-Forwarded-For on (it appends only at the edge) and sets
			// X-Forwarded-Proto.
			if xff := pr.In.Header.Values("X-Forwarded-For"); len(xff) > 0 {
				pr.Out.Header["X-Forwarded-For"] = xff
			}
			pr.Out.Header.Set("X-Forwarded-Proto", "http")
		},
		Transport:      s.transport,
		ModifyResponse: s.upstreamAnswered,
		ErrorHandler:   s.upstreamFailed,
	}
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.srv = &http.Server{Handler: http.HandlerFunc(s.inbound), ReadHeaderTimeout: readHeaderTimeout,
		BaseContext: func(net.Listener) context.Context { return base }}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+MetricsPath(s.spec.Flavor), s.serveMetrics)
	s.msrv = &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout}
	s.served.Add(2)
	go func() { defer s.served.Done(); _ = s.srv.Serve(ln) }()
	go func() { defer s.served.Done(); _ = s.msrv.Serve(mln) }()
	return nil
}

// Addr is where the mesh sends the pod's inbound traffic.
func (s *Sidecar) Addr() string { return s.ln.Addr().String() }

// MetricsAddr serves the proxy's Prometheus metrics.
func (s *Sidecar) MetricsAddr() string { return s.mln.Addr().String() }

// Lines counts the access-log lines written; LogErrors those that failed.
func (s *Sidecar) Lines() int64     { return s.lines.Load() }
func (s *Sidecar) LogErrors() int64 { return s.logErrs.Load() }

// Close stops both listeners at once, waits for the requests in flight to
// finish their log lines, and releases connections. The log itself belongs
// to the caller.
func (s *Sidecar) Close() error {
	s.closeOnce.Do(func() {
		if s.srv == nil {
			return // never started
		}
		err := errors.Join(s.srv.Close(), s.msrv.Close())
		s.cancel()
		s.gate.Close()
		s.served.Wait()
		s.transport.CloseIdleConnections()
		if err != nil {
			s.closeError = fmt.Errorf("close %s sidecar of pod %s: %w", s.spec.Flavor, s.spec.Pod, err)
		}
	})
	return s.closeError
}

func (s *Sidecar) now() time.Time {
	if s.spec.Clock != nil {
		return s.spec.Clock()
	}
	return time.Now()
}

// inbound forwards one request to the app and records it.
func (s *Sidecar) inbound(w http.ResponseWriter, r *http.Request) {
	if !s.gate.Enter() {
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	defer s.gate.Leave()
	start := s.now()
	t0 := time.Now()
	// A sidecar keeps an x-request-id it is given and makes one up
	// otherwise (use_remote_address is false on sidecars).
	if r.Header.Get("X-Request-Id") == "" {
		r.Header.Set("X-Request-Id", envoylog.NewRequestID())
	}
	ex := envoylog.NewExchange()
	in := envoylog.CountBody(r)
	cw := &envoylog.Recorder{ResponseWriter: w}
	s.proxy.ServeHTTP(cw, r.WithContext(ex.Context(r.Context())))
	ex.Done(r, cw)
	local, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	e := envoylog.Entry{
		Start: start, Method: r.Method, Path: r.URL.RequestURI(), Protocol: r.Proto, Code: cw.Code,
		Flags: ex.Flags, Details: ex.Details, BytesIn: in.N, BytesOut: cw.Bytes,
		Duration: time.Since(t0), Upstream: ex.Upstream, XFF: r.Header.Get("X-Forwarded-For"),
		UserAgent: r.UserAgent(), RequestID: r.Header.Get("X-Request-Id"), Authority: r.Host,
		UpstreamHost: s.app, UpstreamLocal: ex.UpstreamLocal, DownstreamRemote: r.RemoteAddr,
		UpstreamCluster: "inbound|" + strconv.Itoa(int(s.spec.Port)) + "||", Route: "default",
		Mesh: s.spec.Mesh, TraceID: r.Header.Get("X-B3-Traceid"), SourceService: "unknown",
		DestService: kumaService(s.spec.Service, s.spec.Namespace, s.spec.ServicePort),
	}
	if local != nil {
		e.DownstreamLocal = local.String()
		e.SourceAddress, _, _ = net.SplitHostPort(local.String())
	}
	if !s.noInbound.Load() {
		s.write(e)
	}
	s.metrics.inbound(s.spec, e)
}

// upstreamAnswered notes when the app's response headers arrived and
// passes the time on as Envoy's router does.
func (s *Sidecar) upstreamAnswered(resp *http.Response) error {
	envoylog.ExchangeOf(resp.Request.Context()).Answered(resp, true)
	return nil
}

// upstreamFailed answers as Envoy does when the app cannot be reached.
func (s *Sidecar) upstreamFailed(w http.ResponseWriter, r *http.Request, err error) {
	gone := r.Context().Err() != nil
	envoylog.ExchangeOf(r.Context()).Failed(gone)
	if gone {
		return // the client went away; nobody reads an answer
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusServiceUnavailable)
	_, _ = io.WriteString(w, envoylog.UpstreamConnectError)
}

// Outbound records a request the pod's outbound side (the data plane the
// app calls through) proxied: its access-log line, and Istio's
// reporter="source" count.
func (s *Sidecar) Outbound(e envoylog.Entry, d Destination) {
	e = OutboundEntry(s.spec.Flavor, e, d)
	e.Mesh = s.spec.Mesh
	if s.spec.Flavor == Kuma {
		e.SourceService = kumaService(s.spec.Service, s.spec.Namespace, s.spec.ServicePort)
	}
	s.write(e)
	s.metrics.outbound(s.spec, d, e)
}

// OutboundEntry fills in what the flavor's proxy writes about the
// destination of an outbound request: Istio's upstream cluster and route,
// Kuma's destination service and source address. Gateways write it too.
func OutboundEntry(flavor string, e envoylog.Entry, d Destination) envoylog.Entry {
	switch flavor {
	case Istio:
		if e.UpstreamCluster == "" && d.Service != "" {
			e.UpstreamCluster = "outbound|" + strconv.Itoa(int(d.Port)) + "|" + d.Subset + "|" + d.Service + "." + d.Namespace + ".svc.cluster.local"
			e.Route = "default"
		}
	case Kuma:
		if e.Mesh == "" {
			e.Mesh = "default"
		}
		e.DestService = kumaService(d.Service, d.Namespace, d.Port)
		e.SourceAddress, _, _ = net.SplitHostPort(e.DownstreamRemote)
	}
	return e
}

func (s *Sidecar) write(e envoylog.Entry) {
	if s.spec.Log == nil {
		return
	}
	line, err := envoylog.Format(s.spec.Flavor, e)
	if err == nil {
		err = s.spec.Log.Line(line)
	}
	if err != nil {
		s.logErrs.Add(1)
		return
	}
	s.lines.Add(1)
}

// kumaService is Kuma's kuma.io/service tag of a Kubernetes Service port.
func kumaService(svc, ns string, port int32) string {
	return svc + "_" + ns + "_svc_" + strconv.Itoa(int(port))
}

// SetInboundLog turns the access lines of the requests the sidecar
// receives on or off (a Kuma MeshAccessLog with only `to:` logs the
// outbound side alone); its metrics count them either way.
func (s *Sidecar) SetInboundLog(on bool) { s.noInbound.Store(!on) }
