package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Defaults for Options.
const (
	// DefaultQPS and DefaultBurst are raised from client-go's 5/10: podlogs
	// opens one log stream per observed pod in every cluster at attack
	// start, and the client-side rate limiter would otherwise delay the
	// first lines by seconds.
	DefaultQPS   = 50
	DefaultBurst = 100
	// DefaultProbeTimeout bounds the /version call that tells an unreachable
	// API server from a slow one before anything else is attempted.
	DefaultProbeTimeout = 5 * time.Second
)

// Options say where the kubeconfig comes from and how clients behave.
type Options struct {
	// Kubeconfig lists kubeconfig files merged like kubectl's KUBECONFIG
	// (first file wins per key). Each entry may itself be a
	// PathListSeparator-joined list. Empty means kubectl's rules: the
	// KUBECONFIG environment variable, else ~/.kube/config.
	Kubeconfig []string
	// QPS and Burst of every client; zero means DefaultQPS/DefaultBurst.
	QPS   float32
	Burst int
	// ProbeTimeout bounds the reachability probe; zero means DefaultProbeTimeout.
	ProbeTimeout time.Duration
	// UserAgent sent to the API servers; empty means "mesh-verify".
	UserAgent string

	// The rest are kubectl's connection flags (README.md "Connecting to
	// clusters").

	// Contexts overrides the kubeconfig context of clusters by their
	// ClusterRef.Name (--context CLUSTER=CONTEXT). An override is
	// explicit: in a pod without a kubeconfig it is an error, never
	// silently replaced by the in-cluster config.
	Contexts map[string]string
	// Namespace replaces the namespace a scenario leaves unset (-n); kube
	// only carries it, the runner applies it (runner.Options.Kube).
	Namespace string
	// Impersonate and ImpersonateGroups act as another user (--as,
	// --as-group), like kubectl.
	Impersonate       string
	ImpersonateGroups []string
	// Token is a bearer token used instead of the kubeconfig user's
	// (--token). It is a credential: never printed.
	Token string
	// RequestTimeout bounds every API call (rest.Config.Timeout), log
	// streams and watches included, as kubectl's --request-timeout does;
	// zero means none.
	RequestTimeout time.Duration
	// ExecTimeout bounds one run of a kubeconfig exec credential plugin;
	// zero means DefaultExecTimeout.
	ExecTimeout time.Duration
	// ExecWrapper is the executable client-go runs in place of an exec
	// plugin, to bound its refreshes by ExecTimeout (execwrap.go): the
	// mesh-verify binary (ExecWrapper()). Empty: client-go runs the
	// plugin itself, unbounded.
	ExecWrapper string
}

// ParseRequestTimeout reads kubectl's --request-timeout: "0" for none, a
// duration with a unit ("30s", "1m"), or a bare integer of seconds.
func ParseRequestTimeout(s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "0" {
		return 0, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 || n > math.MaxInt64/int64(time.Second) {
			return 0, fmt.Errorf("%q: want 0 (no timeout), whole seconds or a duration like 30s", s)
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q: want 0 (no timeout), whole seconds or a duration like 30s", s)
	}
	return d, nil
}

// Config is a loaded (merged) kubeconfig. It only reads files: client-go's
// migration of ~/.kube/.kubeconfig to ~/.kube/config is switched off.
type Config struct {
	opts  Options
	rules *clientcmd.ClientConfigLoadingRules
	raw   clientcmdapi.Config
	// inCluster: no kubeconfig was named or found and the process runs in
	// a pod (see inClusterPossible); clusters then connect with the pod's
	// ServiceAccount (connectInCluster).
	inCluster bool
}

// LoadConfig loads the kubeconfig like kubectl does.
func LoadConfig(opts Options) (*Config, error) {
	if opts.QPS == 0 {
		opts.QPS = DefaultQPS
	}
	if opts.Burst == 0 {
		opts.Burst = DefaultBurst
	}
	if opts.ProbeTimeout == 0 {
		opts.ProbeTimeout = DefaultProbeTimeout
	}
	if opts.UserAgent == "" {
		opts.UserAgent = "mesh-verify"
	}
	if opts.ExecTimeout == 0 {
		opts.ExecTimeout = DefaultExecTimeout
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	// Migration copies a legacy file into ~/.kube/config: a write. Never.
	rules.MigrationRules = nil
	var paths []string
	for _, p := range opts.Kubeconfig {
		for _, q := range filepath.SplitList(p) {
			if q != "" {
				paths = append(paths, q)
			}
		}
	}
	if len(paths) > 0 {
		// Files named explicitly must exist (kubectl --kubeconfig fails on a
		// missing file; KUBECONFIG entries are silently skipped).
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("load kubeconfig %s: %w", p, err)
			}
		}
		rules.Precedence = paths
		rules.WarnIfAllMissing = false
	}
	raw, err := rules.Load()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig %s: %w", strings.Join(rules.GetLoadingPrecedence(), string(filepath.ListSeparator)), err)
	}
	// clientcmd's deferred loading falls back to the in-cluster config the
	// same way: nothing named, nothing found, and the pod's environment.
	inCluster := len(paths) == 0 && len(raw.Contexts) == 0 && inClusterPossible()
	return &Config{opts: opts, rules: rules, raw: *raw, inCluster: inCluster}, nil
}

// InCluster reports whether clusters connect with the in-cluster config.
func (c *Config) InCluster() bool { return c.inCluster }

// Files are the kubeconfig files in loading order (for messages).
func (c *Config) Files() []string { return c.rules.GetLoadingPrecedence() }

// Contexts lists the context names, sorted.
func (c *Config) Contexts() []string {
	names := make([]string, 0, len(c.raw.Contexts))
	for n := range c.raw.Contexts {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// CurrentContext is the kubeconfig's current-context ("" when unset).
func (c *Config) CurrentContext() string { return c.raw.CurrentContext }

// ContextNamespace is the default namespace of a context ("" when unset).
func (c *Config) ContextNamespace(kubeContext string) string {
	if kubeContext == "" {
		kubeContext = c.raw.CurrentContext
	}
	if ctx := c.raw.Contexts[kubeContext]; ctx != nil {
		return ctx.Namespace
	}
	return ""
}

// ClusterRef maps a scenario cluster name to a kubeconfig context.
type ClusterRef struct {
	// OfSeveral says the cluster is one of several the scenario declares
	// (used or not): in a pod it then never maps to the in-cluster config
	// by default.
	OfSeveral bool
	Name      string
	// Context is the kubeconfig context; empty means the current-context.
	Context string
}

// Cluster is one scenario cluster with its clients. Client is an interface
// so tests and callers can substitute a fake clientset.
type Cluster struct {
	Name    string
	Context string
	// Server is the API server URL of the context (for messages).
	Server string
	// Namespace is the context's default namespace ("" when unset).
	Namespace string
	// InCluster: connected with the pod's ServiceAccount (Context is
	// InClusterContext).
	InCluster bool
	REST      *rest.Config
	Client    kclient.Interface
}

func (c *Cluster) String() string {
	return fmt.Sprintf("cluster %s (context %s)", c.Name, c.Context)
}

// Connect builds the clients of one cluster and probes its API server with
// a short /version call, so an unreachable server is reported here, once,
// instead of as a slow failure of the first real call.
func (c *Config) Connect(ctx context.Context, ref ClusterRef) (*Cluster, error) {
	return c.connect(ctx, ref, true)
}

// connect is Connect; only says ref is the one cluster connected, which
// in a pod maps it to the in-cluster config whatever context it names.
func (c *Config) connect(ctx context.Context, ref ClusterRef, only bool) (*Cluster, error) {
	kctx, explicit := ref.Context, false
	if o := c.opts.Contexts[ref.Name]; o != "" {
		kctx, explicit = o, true
	}
	if c.inCluster {
		return c.connectInCluster(ctx, ref, kctx, explicit, only)
	}
	if kctx == "" {
		kctx = c.raw.CurrentContext
		if kctx == "" {
			return nil, &ClusterError{Cluster: ref.Name, Call: "select kubeconfig context", Reason: ReasonContextNotFound,
				Err: fmt.Errorf("no context given and the kubeconfig (%s) has no current-context", strings.Join(c.Files(), ", "))}
		}
	}
	kc, ok := c.raw.Contexts[kctx]
	if !ok {
		return nil, &ClusterError{Cluster: ref.Name, Context: kctx, Call: "select kubeconfig context", Reason: ReasonContextNotFound,
			Err: &contextNotFoundError{context: kctx, have: c.Contexts()}}
	}
	cfg, err := c.RESTConfig(kctx)
	if err != nil {
		return nil, &ClusterError{Cluster: ref.Name, Context: kctx, Call: "build client config", Reason: ReasonOther, Err: err}
	}
	// The preflight runs the plugin as the kubeconfig names it; every
	// later run is client-go's, through the wrapper.
	plain := cfg
	cfg = wrapExec(cfg, c.opts.ExecWrapper, c.opts.ExecTimeout)
	client, err := kclient.NewForConfig(cfg)
	if err != nil {
		return nil, &ClusterError{Cluster: ref.Name, Context: kctx, Call: "build client", Reason: ReasonOther, Err: err}
	}
	cl := &Cluster{Name: ref.Name, Context: kctx, Server: cfg.Host, Namespace: kc.Namespace, REST: cfg, Client: client}
	// A bearer token (--token, or the kubeconfig's) is sent instead of
	// the plugin's credential: client-go then never runs the plugin, and
	// neither does the preflight (it may not even be installed).
	if cfg.ExecProvider != nil && cfg.BearerToken == "" && cfg.BearerTokenFile == "" {
		err = c.probeWithExec(ctx, cl, plain, kc.AuthInfo)
	} else {
		err = cl.Probe(ctx, c.opts.ProbeTimeout)
	}
	if err != nil {
		return nil, err
	}
	return cl, nil
}

// probeWithExec probes a cluster whose kubeconfig user is an exec
// credential plugin: see the comment on exec plugins in exec.go.
func (c *Config) probeWithExec(ctx context.Context, cl *Cluster, plain *rest.Config, user string) error {
	if err := preflightExec(ctx, plain, user, c.opts.ExecTimeout); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &ClusterError{Cluster: cl.Name, Context: cl.Context, Server: cl.Server, Call: "run the kubeconfig's exec credential plugin", Reason: ReasonExecPlugin, Err: err}
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1) // buffered: an abandoned probe still ends
	go func() {
		_, err := cl.Client.CoreV1().RESTClient().Get().AbsPath("/version").Do(pctx).Raw()
		done <- err
	}()
	// client-go runs the plugin again before the request: it gets its
	// timeout again, the API server the probe's.
	bound := c.opts.ExecTimeout + c.opts.ProbeTimeout
	timer := time.NewTimer(bound)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return cl.wrap("GET /version", err)
		}
		return nil
	case <-timer.C:
		return cl.wrap("GET /version", fmt.Errorf("no answer within %s (--exec-timeout and the probe's %s): the exec credential plugin answered once, then client-go's run of it or the API server hung: %w",
			bound, c.opts.ProbeTimeout, context.DeadlineExceeded))
	case <-ctx.Done():
		return ctx.Err()
	}
}

// RESTConfig is the client config of one context, with this Config's
// QPS, burst and user agent.
func (c *Config) RESTConfig(kctx string) (*rest.Config, error) {
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(c.rules, c.overrides(kctx))
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("context %s in %s: %w", kctx, strings.Join(c.Files(), ", "), err)
	}
	// client-go caches transports by CA and client-cert file *path* when
	// the kubeconfig names files, so a process that meets a cluster
	// recreated at the same paths (a lab torn down and brought up again)
	// would keep trusting the old CA. A run is minutes long, far shorter
	// than any CA rotation: read the files once and key by content.
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, fmt.Errorf("context %s: read the kubeconfig's TLS files: %w", kctx, err)
	}
	c.tune(cfg)
	return cfg, nil
}

// overrides are kubectl's connection flags as clientcmd applies them to
// a kubeconfig context (the same code path as kubectl's own flags).
func (c *Config) overrides(kctx string) *clientcmd.ConfigOverrides {
	o := &clientcmd.ConfigOverrides{CurrentContext: kctx}
	o.AuthInfo.Token = c.opts.Token
	o.AuthInfo.Impersonate = c.opts.Impersonate
	o.AuthInfo.ImpersonateGroups = c.opts.ImpersonateGroups
	return o
}

// tune sets what every client config shares.
func (c *Config) tune(cfg *rest.Config) {
	cfg.QPS = c.opts.QPS
	cfg.Burst = c.opts.Burst
	cfg.UserAgent = c.opts.UserAgent
	cfg.Timeout = c.opts.RequestTimeout
}

// ConnectAll connects every cluster concurrently. The clusters come back
// in the order of refs; errors are joined in that order.
func (c *Config) ConnectAll(ctx context.Context, refs []ClusterRef) ([]*Cluster, error) {
	seen := map[string]bool{}
	for _, r := range refs {
		if seen[r.Name] {
			return nil, fmt.Errorf("cluster %s is listed twice", r.Name)
		}
		seen[r.Name] = true
	}
	out := make([]*Cluster, len(refs))
	errs := make([]error, len(refs))
	var wg sync.WaitGroup
	for i, r := range refs {
		wg.Go(func() { out[i], errs[i] = c.connect(ctx, r, len(refs) == 1 && !r.OfSeveral) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// Probe checks that the API server answers GET /version within timeout.
func (c *Cluster) Probe(ctx context.Context, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultProbeTimeout
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/version").Do(pctx).Raw()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return c.wrap("GET /version", err)
	}
	return nil
}

// CheckNamespace reports a missing namespace. Listing pods in a missing
// namespace answers an empty list, which would read as "no pods", so the
// namespace is looked up first. When reading namespaces is forbidden (a
// namespace-scoped role) the check is skipped: the pod calls that follow
// report their own denial.
func (c *Cluster) CheckNamespace(ctx context.Context, ns string) error {
	_, err := c.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err == nil || apierrors.IsForbidden(err) {
		return nil
	}
	return c.wrap("get namespace "+ns, err)
}

// Wrap turns a client error into a *ClusterError naming this cluster and
// the call that failed (kube/portforward and kube/access name theirs).
func (c *Cluster) Wrap(call string, err error) error { return c.wrap(call, err) }

// wrap turns a client error into a *ClusterError naming this cluster.
func (c *Cluster) wrap(call string, err error) error {
	if err == nil {
		return nil
	}
	var ce *ClusterError
	if errors.As(err, &ce) {
		return err
	}
	return &ClusterError{Cluster: c.Name, Context: c.Context, Server: c.Server, Call: call, Reason: reasonOf(err), Err: err}
}

// Reason classifies a ClusterError.
type Reason string

// Reasons of a ClusterError.
const (
	ReasonContextNotFound Reason = "ContextNotFound"
	ReasonUnreachable     Reason = "Unreachable"
	ReasonUntrusted       Reason = "Untrusted"
	ReasonUnauthorized    Reason = "Unauthorized"
	ReasonForbidden       Reason = "Forbidden"
	ReasonNotFound        Reason = "NotFound"
	// ReasonExecPlugin: the kubeconfig's exec credential plugin failed,
	// hung or printed no credential (an *ExecPluginError).
	ReasonExecPlugin Reason = "ExecPlugin"
	ReasonOther      Reason = "Error"
)

// ClusterError is a setup failure against one cluster: it names the
// scenario cluster, the kubeconfig context and the call (e.g. "list pods in
// namespace demo"). The CLI maps it to its setup exit code.
type ClusterError struct {
	Cluster string
	Context string
	// Server is the API server URL, when known.
	Server string
	Call   string
	Reason Reason
	Err    error
}

func (e *ClusterError) Error() string {
	where := "cluster " + e.Cluster
	if e.Reason == ReasonContextNotFound {
		return fmt.Sprintf("%s: %v", where, e.Err)
	}
	if e.Context != "" {
		where += " (context " + e.Context + ")"
	}
	if e.Reason == ReasonExecPlugin {
		return fmt.Sprintf("%s: %v", where, e.Err)
	}
	switch e.Reason {
	case ReasonUnreachable:
		return fmt.Sprintf("%s: API server %s unreachable: %v", where, e.Server, e.Err)
	case ReasonUntrusted:
		return fmt.Sprintf("%s: API server %s answered with a certificate the kubeconfig's certificate-authority does not verify (a cluster recreated since the kubeconfig was written, or the wrong kubeconfig?): %v", where, e.Server, e.Err)
	case ReasonForbidden:
		return fmt.Sprintf("%s: forbidden to %s: %v", where, e.Call, e.Err)
	case ReasonUnauthorized:
		return fmt.Sprintf("%s: unauthorized to %s (the API server rejected the context's credentials): %v", where, e.Call, e.Err)
	}
	return fmt.Sprintf("%s: %s: %v", where, e.Call, e.Err)
}

func (e *ClusterError) Unwrap() error { return e.Err }

type contextNotFoundError struct {
	context string
	have    []string
}

func (e *contextNotFoundError) Error() string {
	have := "none"
	if len(e.have) > 0 {
		have = strings.Join(e.have, ", ")
	}
	return fmt.Sprintf("context %s not found in kubeconfig (contexts: %s)", e.context, have)
}

func reasonOf(err error) Reason {
	switch {
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	case apierrors.IsUnauthorized(err):
		return ReasonUnauthorized
	case apierrors.IsNotFound(err):
		return ReasonNotFound
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return ReasonOther // the server answered
	}
	var verifyErr *tls.CertificateVerificationError
	var unknownCA x509.UnknownAuthorityError
	var hostErr x509.HostnameError
	var invalidErr x509.CertificateInvalidError
	if errors.As(err, &verifyErr) || errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalidErr) {
		return ReasonUntrusted
	}
	var netErr net.Error
	var urlErr *url.Error
	if errors.As(err, &netErr) || errors.As(err, &urlErr) || errors.Is(err, context.DeadlineExceeded) {
		return ReasonUnreachable
	}
	return ReasonOther
}
