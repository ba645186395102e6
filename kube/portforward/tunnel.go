package portforward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/kube"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	clientportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// Tunnel defaults.
const (
	// DefaultConnectTimeout bounds resolving the pod and upgrading one
	// streaming connection.
	DefaultConnectTimeout = 15 * time.Second
	// DefaultDrainTimeout: a keep-alive connection to a deleted pod may sit
	// idle in a client's pool; without a bound, the next request on it
	// would wait for an answer that never comes (kwok keeps such streams
	// open), so in-flight work gets this long and the rest is reset.
	DefaultDrainTimeout = 2 * time.Second
	// errorStreamWait is how long a connection whose data stream ended
	// waits for the error stream: the forwarding end (cri-streaming's
	// portForward, kwok's PortForward) closes the data stream first and
	// writes the error (e.g. "connection refused") after, so the cause
	// arrives a moment later than the EOF.
	errorStreamWait = 500 * time.Millisecond
	// Reconnect backoff: during a gap dials fail fast with the last cause
	// instead of hammering the API server.
	minBackoff = 100 * time.Millisecond
	maxBackoff = 2 * time.Second
)

// ErrTunnelClosed is returned by DialContext after Close.
var ErrTunnelClosed = errors.New("tunnel closed")

// errSessionUnusable: the session retired or died after it was picked.
var errSessionUnusable = errors.New("streaming connection no longer in use")

// TunnelSpec says what a tunnel forwards to.
type TunnelSpec struct {
	Namespace string
	// Resource is pod/NAME, svc/NAME or deploy/NAME (service/, deployment/ too).
	Resource string
	// Port is a number or a port name (a Service port for svc/).
	Port string
	// Observed are the workloads the scenario attributes traffic to; a
	// target whose pod belongs to one gets a warning (see Warnings).
	Observed []kube.Workload
	// ConnectTimeout bounds one (re)connect; zero means DefaultConnectTimeout.
	ConnectTimeout time.Duration
	// DrainTimeout is how long connections on a streaming connection whose
	// pod was deleted or replaced may still finish before they are reset;
	// zero means DefaultDrainTimeout.
	DrainTimeout time.Duration
}

// PodRef names the pod a tunnel currently forwards to.
type PodRef struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	// Port is the container port (after Service targetPort translation).
	Port int32 `json:"port"`
}

func (p PodRef) String() string { return p.Namespace + "/" + p.Name + ":" + strconv.Itoa(int(p.Port)) }

// TunnelStats count what the tunnel did; all counters are cumulative.
type TunnelStats struct {
	// Dials are DialContext calls; DialErrors those that failed.
	Dials      int64 `json:"dials"`
	DialErrors int64 `json:"dialErrors"`
	// ForwardErrors are connections the forwarding end failed (the
	// backend refused, no forward for the port, ...) with a message on
	// the error stream.
	ForwardErrors int64 `json:"forwardErrors"`
	// Connects counts streaming connections established (the first one
	// included); Drops counts those lost or retired (pod replaced).
	Connects int64 `json:"connects"`
	Drops    int64 `json:"drops"`
	// Protocol is how the last streaming connection was upgraded:
	// "websocket" (SPDY tunnelled over WebSocket) or "spdy" (fallback).
	Protocol string `json:"protocol"`
}

// Tunnel is an in-process port-forward to one pod port. Unlike kubectl's
// forwarder it has no listener: DialContext opens one stream pair per
// connection on a shared streaming connection, so one failing connection
// fails one request; kubectl instead tears the whole tunnel down on any
// connection's error (ErrLostConnectionToPod, docs/architecture.md "Reaching the entry point"). When the
// streaming connection is lost, or its pod is deleted or replaced, the next
// dial re-resolves the target and connects again.
type Tunnel struct {
	cluster *kube.Cluster
	spec    TunnelSpec
	target  Target

	ctx    context.Context // tunnel lifetime; cancelled by Close
	cancel context.CancelFunc
	nextID atomic.Uint64 // requestID header, unique per stream pair

	dials, dialErrors, forwardErrors, connects, drops atomic.Int64

	mu       sync.Mutex
	cur      *session
	dialing  chan struct{} // non-nil while a connect runs; closed when it ends
	lastErr  error         // last connect failure, returned during the backoff gap
	retryAt  time.Time
	backoff  time.Duration
	closed   bool
	pod      PodRef
	proto    string
	warnings []string
	warned   map[string]bool
}

// OpenTunnel resolves the target and establishes the first streaming
// connection, so setup errors (no such service, no running pod, RBAC,
// unreachable API server) surface here rather than as failed requests.
func OpenTunnel(ctx context.Context, c *kube.Cluster, spec TunnelSpec) (*Tunnel, error) {
	target, err := ParseTarget(spec.Resource, spec.Port)
	if err != nil {
		return nil, err
	}
	if spec.Namespace == "" {
		spec.Namespace = c.Namespace
		if spec.Namespace == "" {
			spec.Namespace = corev1.NamespaceDefault
		}
	}
	if spec.ConnectTimeout == 0 {
		spec.ConnectTimeout = DefaultConnectTimeout
	}
	if spec.DrainTimeout == 0 {
		spec.DrainTimeout = DefaultDrainTimeout
	}
	tctx, cancel := context.WithCancel(context.Background())
	t := &Tunnel{cluster: c, spec: spec, target: target, ctx: tctx, cancel: cancel, warned: map[string]bool{}}
	s, err := t.connect(ctx)
	if err != nil {
		cancel()
		return nil, err
	}
	t.mu.Lock()
	t.cur = s
	t.mu.Unlock()
	return t, nil
}

// Target is what the tunnel forwards to.
func (t *Tunnel) Target() Target { return t.target }

// Namespace is the target's namespace.
func (t *Tunnel) Namespace() string { return t.spec.Namespace }

// Cluster is the cluster the tunnel goes through.
func (t *Tunnel) Cluster() *kube.Cluster { return t.cluster }

// Pod is the pod the tunnel forwards to now (it changes after a reconnect
// to a replacement pod).
func (t *Tunnel) Pod() PodRef {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.pod
}

// Warnings are findings about the target worth showing the user, such as
// a target whose pod is one of the observed workload's own pods.
func (t *Tunnel) Warnings() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]string(nil), t.warnings...)
}

// Stats returns the tunnel's counters.
func (t *Tunnel) Stats() TunnelStats {
	t.mu.Lock()
	proto := t.proto
	t.mu.Unlock()
	return TunnelStats{
		Dials: t.dials.Load(), DialErrors: t.dialErrors.Load(), ForwardErrors: t.forwardErrors.Load(),
		Connects: t.connects.Load(), Drops: t.drops.Load(), Protocol: proto,
	}
}

// Close ends the tunnel and every connection dialed through it.
func (t *Tunnel) Close() error {
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil
	}
	t.closed = true
	s := t.cur
	t.cur = nil
	t.mu.Unlock()
	t.cancel()
	if s != nil {
		s.kill(ErrTunnelClosed)
	}
	return nil
}

func (t *Tunnel) errorf(format string, a ...any) error {
	return fmt.Errorf("port-forward to %s/%s in cluster %s: %w", t.spec.Namespace, t.target.Name, t.cluster.Name,
		fmt.Errorf(format, a...))
}

// DialContext opens one connection to the pod port through the tunnel;
// network and addr are ignored (the tunnel has one destination). It fits
// http.Transport.DialContext. A failed dial returns the cause, e.g. the
// reconnect error while the pod is being replaced.
func (t *Tunnel) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	t.dials.Add(1)
	var lastErr error
	// Two attempts: the session may retire or break between being picked
	// and opening the streams; the second attempt gets a fresh one.
	for range 2 {
		s, err := t.session(ctx)
		if err != nil {
			t.dialErrors.Add(1)
			return nil, err
		}
		c, err := s.open(ctx, t.nextID.Add(1))
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			t.dialErrors.Add(1)
			return nil, t.errorf("%w", ctx.Err())
		}
		lastErr = err
		if !errors.Is(err, errSessionUnusable) {
			// A stream pair that cannot be created means the shared streaming
			// connection is broken: drop it so the retry reconnects.
			s.kill(fmt.Errorf("create streams: %w", err))
		}
	}
	t.dialErrors.Add(1)
	return nil, t.errorf("create streams: %w", lastErr)
}

// session returns a usable streaming connection, (re)connecting when there
// is none. One connect runs at a time; concurrent dials wait for it (or for
// their ctx). After a failed connect, dials fail fast with its cause until
// the backoff passes.
func (t *Tunnel) session(ctx context.Context) (*session, error) {
	for {
		t.mu.Lock()
		if t.closed {
			t.mu.Unlock()
			return nil, t.errorf("%w", ErrTunnelClosed)
		}
		if s := t.cur; s != nil && s.usable() {
			t.mu.Unlock()
			return s, nil
		}
		ch := t.dialing
		if ch == nil {
			if time.Now().Before(t.retryAt) {
				err := t.lastErr
				t.mu.Unlock()
				return nil, err
			}
			ch = make(chan struct{})
			t.dialing = ch
			go t.reconnect(ch)
		}
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, t.errorf("waiting for reconnect: %w", ctx.Err())
		}
		t.mu.Lock()
		s, err := t.cur, t.lastErr
		t.mu.Unlock()
		if (s == nil || !s.usable()) && err != nil {
			return nil, err
		}
	}
}

// reconnect runs one connect on the tunnel's own context (not a request's:
// one request giving up must not abort the reconnect others wait for).
func (t *Tunnel) reconnect(done chan struct{}) {
	s, err := t.connect(t.ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	defer close(done)
	t.dialing = nil
	if t.closed {
		if s != nil {
			go s.kill(ErrTunnelClosed)
		}
		return
	}
	if err != nil {
		t.backoff = min(max(2*t.backoff, minBackoff), maxBackoff)
		t.retryAt = time.Now().Add(t.backoff)
		t.lastErr = err
		return
	}
	t.backoff, t.lastErr, t.retryAt = 0, nil, time.Time{}
	t.cur = s
}

// connect resolves the target (again: the pod may have been replaced) and
// upgrades one streaming connection to the pod's portforward subresource.
func (t *Tunnel) connect(ctx context.Context) (*session, error) {
	ctx, cancel := context.WithTimeout(ctx, t.spec.ConnectTimeout)
	defer cancel()
	r, err := resolve(ctx, t.cluster, t.spec.Namespace, t.target)
	if err != nil {
		return nil, t.errorf("resolve %s: %w", t.target, err)
	}
	// The session's pod watch starts here, not in the background: a denied
	// watch is a setup error naming it, not a session that never notices
	// its pod being replaced (README.md, RBAC).
	mctx, mcancel := context.WithCancel(t.ctx)
	w, err := t.cluster.Client.CoreV1().Pods(r.pod.Namespace).Watch(mctx, podWatchOptions(r.pod.Name, r.pod.ResourceVersion))
	if err != nil {
		if kube.IsDenied(err) {
			mcancel()
			return nil, t.errorf("watch pod %s: %w", r.pod.Name, t.cluster.Wrap("watch pods in namespace "+r.pod.Namespace, err))
		}
		w = nil // a transient failure: watchPod retries
	}
	conn, proto, err := t.upgrade(ctx, r.pod.Name)
	if err != nil {
		if w != nil {
			w.Stop()
		}
		mcancel()
		if kube.IsDenied(err) {
			// client-go keeps a refused upgrade's status as text only.
			err = t.cluster.Wrap(fmt.Sprintf("create pods/portforward for pod %s/%s", r.pod.Namespace, r.pod.Name), kube.DeniedUpgrade(err))
		}
		return nil, t.errorf("connect to pod %s: %w", r.pod.Name, err)
	}
	ref := PodRef{Cluster: t.cluster.Name, Namespace: r.pod.Namespace, Name: r.pod.Name, UID: string(r.pod.UID), Port: r.port}
	s := &session{t: t, conn: conn, pod: ref, done: make(chan struct{})}
	t.connects.Add(1)
	t.mu.Lock()
	t.pod = ref
	t.proto = proto
	t.addWarnings(r)
	t.mu.Unlock()
	go s.monitor(mctx, mcancel, r.pod.ResourceVersion, w)
	return s, nil
}

// upgrade dials like kubectl port-forward (docs/architecture.md "Reaching the entry point"): SPDY tunnelled
// over WebSocket first, falling back to plain SPDY when the server refuses
// the WebSocket upgrade. client-go v0.37 marks the apimachinery httpstream
// compatibility types deprecated, so the k8s.io/streaming "ForStreaming"
// variants kubectl itself uses are used here.
func (t *Tunnel) upgrade(ctx context.Context, pod string) (streamhttp.Connection, string, error) {
	cfg := t.cluster.REST
	u := t.cluster.Client.CoreV1().RESTClient().Post().
		Resource("pods").Namespace(t.spec.Namespace).Name(pod).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, "", err
	}
	var used atomic.Value
	spdyDialer := &namedDialer{d: spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: rt}, http.MethodPost, u), name: "spdy", used: &used}
	ws, err := newWSDialer(u, cfg) // SPDY over WebSocket with mesh-verify's SPDY end (wsdial.go)
	if err != nil {
		return nil, "", err
	}
	wsDialer := &namedDialer{d: ws, name: "websocket", used: &used}
	dialer := clientportforward.NewFallbackDialerForStreaming(wsDialer, spdyDialer, func(err error) bool {
		return streamhttp.IsUpgradeFailure(err) || streamhttp.IsHTTPSProxyError(err)
	})
	type result struct {
		conn  streamhttp.Connection
		proto string
		err   error
	}
	ch := make(chan result, 1)
	// Dial takes no context: run it aside and abandon (then close) it if
	// ctx ends first.
	go func() {
		conn, proto, err := dialer.Dial(clientportforward.PortForwardProtocolV1Name)
		ch <- result{conn, proto, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			return nil, "", r.err
		}
		if r.proto != clientportforward.PortForwardProtocolV1Name {
			r.conn.Close()
			return nil, "", fmt.Errorf("unable to negotiate protocol: client supports %q, server returned %q", clientportforward.PortForwardProtocolV1Name, r.proto)
		}
		name, _ := used.Load().(string)
		return r.conn, name, nil
	case <-ctx.Done():
		go func() {
			if r := <-ch; r.conn != nil {
				r.conn.Close()
			}
		}()
		return nil, "", ctx.Err()
	}
}

type namedDialer struct {
	d    streamhttp.Dialer
	name string
	used *atomic.Value
}

func (n *namedDialer) Dial(protocols ...string) (streamhttp.Connection, string, error) {
	c, p, err := n.d.Dial(protocols...)
	if err == nil {
		n.used.Store(n.name)
	}
	return c, p, err
}

// addWarnings records, once each, findings about the resolved target.
// Callers hold t.mu.
func (t *Tunnel) addWarnings(r *resolved) {
	add := func(w string) {
		if !t.warned[w] {
			t.warned[w] = true
			t.warnings = append(t.warnings, w)
		}
	}
	if !kube.PodReady(r.pod) {
		add(fmt.Sprintf("port-forward target %s in cluster %s: pod %s/%s is not ready", t.target, t.cluster.Name, r.pod.Namespace, r.pod.Name))
	}
	for _, w := range t.spec.Observed {
		if w.Namespace != r.pod.Namespace {
			continue
		}
		sel, err := labels.Parse(w.Selector)
		if err != nil || !sel.Matches(labels.Set(r.pod.Labels)) {
			continue
		}
		// docs/architecture.md "Reaching the entry point": port-forward resolves to ONE pod, so forwarding to the
		// observed app itself bypasses the mesh's balancing entirely.
		how := "forwards to"
		if t.target.Kind != KindPod {
			how = "resolves (like kubectl port-forward) to ONE pod,"
		}
		add(fmt.Sprintf("port-forward target %s in cluster %s %s %s/%s, a pod of the observed workload %s: "+
			"every request reaches that pod and bypasses the mesh's balancing; "+
			"forward to the mesh's entry instead (an ingress/east-west gateway, a Skupper router, or a caller pod with a sidecar)",
			t.target, t.cluster.Name, how, r.pod.Namespace, r.pod.Name, w.Label()))
		break
	}
}

// session is one streaming connection to one pod.
type session struct {
	t    *Tunnel
	conn streamhttp.Connection
	pod  PodRef

	mu      sync.Mutex
	dead    bool  // no new streams; closed
	retired bool  // no new streams; closed when the last one ends
	cause   error // why it died or retired
	active  int   // open stream pairs
	done    chan struct{}
}

func (s *session) usable() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.dead && !s.retired
}

// kill closes the streaming connection (resetting its streams) for cause.
func (s *session) kill(cause error) {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return
	}
	first := !s.retired
	s.dead = true
	if s.cause == nil {
		s.cause = cause
	}
	close(s.done)
	s.mu.Unlock()
	if first {
		s.t.drops.Add(1)
	}
	s.conn.Close()
}

// retire stops new streams on the session; open ones may finish on it
// within the drain timeout (their pod is going away, but what is in flight
// may still complete); then the session is closed.
func (s *session) retire(cause error) {
	s.mu.Lock()
	if s.dead || s.retired {
		s.mu.Unlock()
		return
	}
	s.retired = true
	s.cause = cause
	idle := s.active == 0
	s.mu.Unlock()
	s.t.drops.Add(1)
	if idle {
		s.kill(cause)
		return
	}
	timer := time.AfterFunc(s.t.spec.DrainTimeout, func() { s.kill(cause) })
	go func() {
		<-s.done
		timer.Stop()
	}()
}

// monitor ends the session when its streaming connection closes, and
// retires it when its pod is deleted or is being deleted, so the next dial
// re-resolves the target.
func (s *session) monitor(ctx context.Context, cancel context.CancelFunc, resourceVersion string, w watch.Interface) {
	defer cancel()
	go s.watchPod(ctx, resourceVersion, w)
	select {
	case <-s.conn.CloseChan():
		s.kill(fmt.Errorf("streaming connection to pod %s closed by the API server or the kubelet", s.pod.Name))
	case <-s.done:
	case <-s.t.ctx.Done():
		s.kill(ErrTunnelClosed)
	}
}

// podWatchOptions watch one pod from a resource version.
func podWatchOptions(name, rv string) metav1.ListOptions {
	return metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: rv, AllowWatchBookmarks: true}
}

// watchPod retires the session when its pod goes; first is the watch
// connect started, nil when it failed.
func (s *session) watchPod(ctx context.Context, rv string, first watch.Interface) {
	pods := s.t.cluster.Client.CoreV1().Pods(s.pod.Namespace)
	for ctx.Err() == nil {
		w, err := first, error(nil)
		first = nil
		if w == nil {
			w, err = pods.Watch(ctx, podWatchOptions(s.pod.Name, rv))
		}
		if err != nil {
			// Expired resource version or a transient failure: look the pod
			// up directly and watch again from now.
			p, gerr := pods.Get(ctx, s.pod.Name, metav1.GetOptions{})
			if gone := s.podGone(p, gerr); gone != nil {
				s.retire(gone)
				return
			}
			if gerr == nil {
				rv = p.ResourceVersion
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Deleted:
				s.retire(fmt.Errorf("pod %s/%s was deleted", s.pod.Namespace, s.pod.Name))
				w.Stop()
				return
			case watch.Added, watch.Modified, watch.Bookmark:
				p, ok := ev.Object.(*corev1.Pod)
				if !ok {
					continue
				}
				rv = p.ResourceVersion
				if ev.Type == watch.Bookmark {
					continue
				}
				if gone := s.podGone(p, nil); gone != nil {
					s.retire(gone)
					w.Stop()
					return
				}
			case watch.Error:
				rv = "" // resource version expired: restart from the current state
			}
		}
		w.Stop()
	}
}

// podGone says why the pod can no longer serve this session, or nil.
func (s *session) podGone(p *corev1.Pod, err error) error {
	name := s.pod.Namespace + "/" + s.pod.Name
	switch {
	case err != nil && apierrors.IsNotFound(err):
		return fmt.Errorf("pod %s was deleted", name)
	case err != nil:
		return nil
	case string(p.UID) != s.pod.UID:
		return fmt.Errorf("pod %s was replaced (new uid %s)", name, p.UID)
	case p.DeletionTimestamp != nil:
		return fmt.Errorf("pod %s is terminating", name)
	case p.Status.Phase != corev1.PodRunning && p.Status.Phase != "":
		return fmt.Errorf("pod %s is no longer running (phase %s)", name, p.Status.Phase)
	}
	return nil
}

// open creates the error and data streams of one connection, with the
// headers kubectl's handleConnection sends (streamType, port, requestID).
func (s *session) open(ctx context.Context, id uint64) (net.Conn, error) {
	s.mu.Lock()
	if s.dead || s.retired {
		cause := s.cause
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: %w", errSessionUnusable, cause)
	}
	s.active++
	s.mu.Unlock()

	type result struct {
		c   *tunnelConn
		err error
	}
	ch := make(chan result, 1)
	go func() {
		c, err := s.createStreams(id)
		ch <- result{c, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			s.release()
		}
		return r.c, r.err
	case <-ctx.Done():
		// CreateStream takes no context; clean up whatever it yields later.
		go func() {
			if r := <-ch; r.c != nil {
				r.c.Close()
			} else {
				s.release()
			}
		}()
		return nil, ctx.Err()
	}
}

func (s *session) createStreams(id uint64) (*tunnelConn, error) {
	h := http.Header{}
	h.Set(corev1.StreamType, corev1.StreamTypeError)
	h.Set(corev1.PortHeader, strconv.Itoa(int(s.pod.Port)))
	h.Set(corev1.PortForwardRequestIDHeader, strconv.FormatUint(id, 10))
	errStream, err := s.conn.CreateStream(h)
	if err != nil {
		return nil, fmt.Errorf("error stream: %w", err)
	}
	// We never write to the error stream.
	errStream.Close()
	h.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := s.conn.CreateStream(h)
	if err != nil {
		errStream.Reset()
		s.conn.RemoveStreams(errStream)
		return nil, fmt.Errorf("data stream: %w", err)
	}
	c := &tunnelConn{s: s, id: id, data: data, errStream: errStream, errDone: make(chan struct{}), closed: make(chan struct{})}
	go c.readErrorStream()
	return c, nil
}

// release is called once per stream pair when it ends.
func (s *session) release() {
	s.mu.Lock()
	s.active--
	last := s.retired && s.active == 0
	cause := s.cause
	s.mu.Unlock()
	if last {
		s.kill(cause)
	}
}

// ForwardError is a connection the forwarding end (kubelet) failed, with
// the message it sent on the error stream, e.g. the backend refused the
// connection or the pod has no such port.
type ForwardError struct {
	Pod     PodRef
	Message string
}

func (e *ForwardError) Error() string {
	return fmt.Sprintf("forwarding to pod %s failed: %s", e.Pod, e.Message)
}

// tunnelConn is one forwarded connection: a net.Conn over a data stream,
// with its error stream read aside.
type tunnelConn struct {
	s         *session
	id        uint64
	data      streamhttp.Stream
	errStream streamhttp.Stream

	errDone chan struct{} // closed when the error stream ended
	errMsg  string
	errRead error

	closeOnce sync.Once
	closed    chan struct{}

	dlMu       sync.Mutex
	dlTimer    *time.Timer
	dlExceeded atomic.Bool
}

func (c *tunnelConn) readErrorStream() {
	defer close(c.errDone)
	msg, err := io.ReadAll(io.LimitReader(c.errStream, 64<<10))
	c.errMsg, c.errRead = string(msg), err
	if len(msg) > 0 {
		c.s.t.forwardErrors.Add(1)
	}
}

// cause turns the end of the data stream into the reason the connection
// ended: the forwarding end's message, the lost streaming connection, or
// err itself (io.EOF when the backend simply closed the connection).
func (c *tunnelConn) cause(err error) error {
	if c.dlExceeded.Load() {
		return os.ErrDeadlineExceeded
	}
	select {
	case <-c.closed:
		return net.ErrClosed
	default:
	}
	t := time.NewTimer(errorStreamWait)
	defer t.Stop()
	select {
	case <-c.errDone:
	case <-c.s.done:
	case <-c.closed:
	case <-t.C:
	}
	select {
	case <-c.errDone:
		if c.errMsg != "" {
			return c.s.t.errorf("%w", &ForwardError{Pod: c.s.pod, Message: c.errMsg})
		}
	default:
	}
	c.s.mu.Lock()
	dead, cause := c.s.dead, c.s.cause
	c.s.mu.Unlock()
	if dead && cause != nil && !errors.Is(cause, ErrTunnelClosed) {
		return c.s.t.errorf("connection lost: %w", cause)
	}
	return err
}

func (c *tunnelConn) Read(p []byte) (int, error) {
	n, err := c.data.Read(p)
	if err != nil {
		err = c.cause(err)
	}
	return n, err
}

// WriteTo copies the connection's data to w, ending like Read: nil where
// Read would end with io.EOF, else the cause. On the WebSocket path the
// stream writes to w from the connection's reader (spdyStream.WriteTo),
// sparing a goroutine hand-off per received frame; Serve's copy to the
// local socket goes through here.
func (c *tunnelConn) WriteTo(w io.Writer) (int64, error) {
	wt, ok := c.data.(io.WriterTo)
	if !ok {
		return io.Copy(w, struct{ io.Reader }{c})
	}
	n, err := wt.WriteTo(w)
	if err != nil {
		return n, err // w failed
	}
	if err := c.cause(io.EOF); err != io.EOF {
		return n, err
	}
	return n, nil
}

func (c *tunnelConn) Write(p []byte) (int, error) {
	if c.dlExceeded.Load() {
		return 0, os.ErrDeadlineExceeded
	}
	n, err := c.data.Write(p)
	if err != nil {
		err = c.cause(err)
	}
	return n, err
}

// CloseWrite half-closes the connection (FIN on the data stream), as
// kubectl does when the local side stops sending.
func (c *tunnelConn) CloseWrite() error { return c.data.Close() }

// Close resets both streams: the connection is done with, and any unsent
// data is discarded (kubectl resets the data stream for the same reason:
// blocked data would otherwise hold up the error stream).
func (c *tunnelConn) Close() error {
	c.closeOnce.Do(func() {
		close(c.closed)
		c.dlMu.Lock()
		if c.dlTimer != nil {
			c.dlTimer.Stop()
		}
		c.dlMu.Unlock()
		c.data.Reset()
		c.errStream.Reset()
		c.s.conn.RemoveStreams(c.data, c.errStream)
		c.s.release()
	})
	return nil
}

// tunnelAddr names one end of a forwarded connection.
type tunnelAddr string

func (a tunnelAddr) Network() string { return "kube-portforward" }
func (a tunnelAddr) String() string  { return string(a) }

// LocalAddr is unique per connection ("portforward/<cluster>/<id>"), so a
// caller recording which connection carried a request can key on it.
func (c *tunnelConn) LocalAddr() net.Addr {
	return tunnelAddr("portforward/" + c.s.pod.Cluster + "/" + strconv.FormatUint(c.id, 10))
}

// RemoteAddr is "cluster/namespace/pod:port".
func (c *tunnelConn) RemoteAddr() net.Addr {
	return tunnelAddr(c.s.pod.Cluster + "/" + c.s.pod.String())
}

// SetDeadline arms a timer that resets the streams when it fires: SPDY
// streams have no deadlines of their own, and callers set a deadline to
// abandon a connection (crypto/tls and http.Transport do), so a passed
// deadline ends the connection with os.ErrDeadlineExceeded.
func (c *tunnelConn) SetDeadline(t time.Time) error {
	c.dlMu.Lock()
	defer c.dlMu.Unlock()
	if c.dlTimer != nil {
		c.dlTimer.Stop()
		c.dlTimer = nil
	}
	if t.IsZero() {
		return nil
	}
	c.dlTimer = time.AfterFunc(time.Until(t), func() {
		c.dlExceeded.Store(true)
		c.data.Reset()
	})
	return nil
}

func (c *tunnelConn) SetReadDeadline(t time.Time) error  { return c.SetDeadline(t) }
func (c *tunnelConn) SetWriteDeadline(t time.Time) error { return c.SetDeadline(t) }
