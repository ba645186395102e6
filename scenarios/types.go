// Package scenarios defines the scenario file (what to attack, how to tell
// who served a request, what split to expect) and loads it strictly: every
// error names the file, the line and the field.
package scenarios

// APIVersion is the only scenario schema version this build reads.
const APIVersion = "mesh-verify.io/v1alpha1"

// Kind is the kind every scenario document declares.
const Kind = "Scenario"

// Scenario is one verification: an attack on an entry point and the
// expectations its outcome is judged against.
type Scenario struct {
	APIVersion  string      `yaml:"apiVersion"`
	Kind        string      `yaml:"kind"`
	Metadata    Metadata    `yaml:"metadata"`
	Clusters    []Cluster   `yaml:"clusters"`
	Target      Target      `yaml:"target"`
	Attack      Attack      `yaml:"attack"`
	Attribution Attribution `yaml:"attribution"`
	// Observe lists the workloads whose pods are inventoried, and whose
	// logs and metrics are read, in every cluster they name (the
	// Kubernetes path).
	Observe    []Workload    `yaml:"observe"`
	Statistics Statistics    `yaml:"statistics"`
	Expect     []Expectation `yaml:"expect"`

	// File is the path the scenario was loaded from ("" for built-ins).
	File string `yaml:"-"`
}

// Metadata names a scenario.
type Metadata struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
}

// Cluster maps a bucket name used in expectations to a kubeconfig context.
// Context is optional while the target is a plain URL.
type Cluster struct {
	Name    string `yaml:"name"`
	Context string `yaml:"context"`
	// Cost is the link cost from the entry cluster (Skupper); 0 = local.
	Cost *float64 `yaml:"cost"`
}

// Target is the entry point of the mesh.
type Target struct {
	// URL is a plain http(s) URL. Exactly one of URL or Forward is set.
	URL string `yaml:"url"`
	// Forward reaches the entry point through the API server like
	// `kubectl port-forward` (the Kubernetes path).
	Forward *Forward `yaml:"portForward"`
	// Path is appended to the forwarded address (Forward only).
	Path string `yaml:"path"`
	// TLS says how an https target's certificate is checked: against the
	// system roots by default.
	TLS *TLS `yaml:"tls"`
}

// TLS relaxes or pins the verification of an https target's certificate.
type TLS struct {
	// CA is a PEM file of the authorities to trust instead of the
	// system's (relative to the scenario file).
	CA string `yaml:"ca"`
	// ServerName is the name the certificate must carry (default: the
	// URL's host; through a port-forward, svc.namespace).
	ServerName string `yaml:"serverName"`
	// InsecureSkipVerify accepts any certificate; the report says so.
	InsecureSkipVerify bool `yaml:"insecureSkipVerify"`
}

// Forward is a port-forward target: resource is pod/NAME, svc/NAME or deploy/NAME.
type Forward struct {
	Cluster   string `yaml:"cluster"`
	Namespace string `yaml:"namespace"`
	Resource  string `yaml:"resource"`
	Port      string `yaml:"port"`
	Scheme    string `yaml:"scheme"`
	// namespaceDefaulted records that ApplyDefaults chose Namespace.
	namespaceDefaulted bool
}

// NamespaceDefaulted reports whether the scenario left the namespace unset
// (ApplyDefaults filled in "default"): the namespace -n replaces.
func (f *Forward) NamespaceDefaulted() bool {
	return f.namespaceDefaulted && f.Namespace == DefaultNamespace
}

// Attack says how load is generated. Open loop: Rate with Duration and/or
// Requests, or Ramp. Closed loop (like `siege -c C -r R`): Concurrency with
// Repetitions (C*R requests) or Duration.
type Attack struct {
	Rate        *Rate             `yaml:"rate"`
	Ramp        *Ramp             `yaml:"ramp"`
	Duration    Duration          `yaml:"duration"`
	Requests    uint64            `yaml:"requests"`
	Concurrency int               `yaml:"concurrency"`
	Repetitions int               `yaml:"repetitions"`
	Method      string            `yaml:"method"`
	Headers     map[string]string `yaml:"headers"`
	Body        string            `yaml:"body"`
	Timeout     Duration          `yaml:"timeout"`
	// KeepAlive defaults to true (what siege, vegeta and browsers do).
	KeepAlive *bool `yaml:"keepAlive"`
	// Connections is how many keep-alive connections requests are spread
	// over at random (default 10 for open loop; closed loop: one per worker).
	Connections    int    `yaml:"connections"`
	MaxConnections int    `yaml:"maxConnections"`
	HTTP2          bool   `yaml:"http2"`
	MaxBody        Size   `yaml:"maxBody"`
	RequestID      string `yaml:"requestIdHeader"`
	MaxWorkers     uint64 `yaml:"maxWorkers"`
	// GRPC sends gRPC unary calls instead of plain HTTP requests.
	GRPC *GRPC `yaml:"grpc"`
	// SuccessCodes are the HTTP statuses that count as answered: codes
	// (200), classes ("2xx") and ranges ("200-299"). Default 2xx.
	SuccessCodes StatusCodes `yaml:"successCodes"`
	// Workers runs the attack from this many worker pods, an Indexed Job
	// of `mesh-verify worker` in cluster From (docs/distributed.md), each
	// sending its share of the rate, concurrency, requests and
	// connections to the target's in-cluster address. 0 (the default)
	// attacks from this process.
	Workers int `yaml:"workers"`
	// From is the scenario cluster the workers run in (default: the
	// cluster of target.portForward, or the only declared cluster).
	From string `yaml:"from"`
	// Image is the workers' container image (default:
	// ghcr.io/mesh-verify/mesh-verify at this binary's version).
	Image string `yaml:"image"`
	// ServiceAccount the worker pods run as (default mesh-verify-worker).
	ServiceAccount string `yaml:"serviceAccount"`
	// Pod shapes the worker pods so that they live in a mesh like any
	// client (docs/distributed.md, Worker pods in a mesh): labels and
	// annotations (sidecar injection), scheduling, resources, pull
	// secrets, and the sidecar whose lifecycle the worker follows.
	Pod *WorkerPod `yaml:"pod"`
	// Sources run workers in several clusters at once (docs/distributed.md,
	// Several sources): each names its cluster and how many workers run
	// there, and the attack is shared over all of them. attack.workers is
	// then their sum (it may be left out) and attack.from is left out.
	// Expectations with from: judge one source's requests only.
	Sources []Source `yaml:"sources"`
}

// WorkerPod is what a scenario may add to the worker pods' template.
// The worker's own labels, security context, command and volumes stay
// mesh-verify's.
type WorkerPod struct {
	// Labels and Annotations are added to the pod template's, e.g.
	// sidecar.istio.io/inject: "true" or kuma.io/sidecar-injection: enabled.
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
	// NodeSelector and Tolerations place the pods, as in a PodSpec.
	NodeSelector map[string]string `yaml:"nodeSelector"`
	Tolerations  []Toleration      `yaml:"tolerations"`
	// Resources replace the worker container's defaults per resource
	// named (cpu: a request or limit given for cpu replaces both of the
	// defaults' cpu values).
	Resources *Resources `yaml:"resources"`
	// ImagePullSecrets name Secrets of the workers' namespace that pull
	// attack.image from a private registry.
	ImagePullSecrets []string `yaml:"imagePullSecrets"`
	// Sidecar is the mesh proxy injected next to the worker: istio or
	// kuma (the worker waits until it is ready and stops it at the end,
	// so that the Job completes), none, or left out: istio or kuma when
	// the annotations ask for injection, else none.
	Sidecar string `yaml:"sidecar"`
}

// Toleration is a PodSpec toleration.
type Toleration struct {
	Key               string `yaml:"key"`
	Operator          string `yaml:"operator"`
	Value             string `yaml:"value"`
	Effect            string `yaml:"effect"`
	TolerationSeconds *int64 `yaml:"tolerationSeconds"`
}

// Resources are a container's requests and limits, quantities as
// Kubernetes writes them (100m, 64Mi).
type Resources struct {
	Requests map[string]string `yaml:"requests"`
	Limits   map[string]string `yaml:"limits"`
}

// Source is one cluster a distributed run's workers attack from.
type Source struct {
	Cluster string `yaml:"cluster"`
	Workers int    `yaml:"workers"`
}

// GRPC is a unary call: the method's full path and a message whose
// field 1 is a string, which is the shape of gRPC's health check
// (HealthCheckRequest.service) and of Istio's echo test app
// (EchoRequest.message). A call succeeds when its grpc-status is 0.
type GRPC struct {
	// Method is /package.Service/Method, e.g. /grpc.health.v1.Health/Check.
	Method string `yaml:"method"`
	// Message is field 1 of the request message (empty: an empty message).
	Message string `yaml:"message"`
}

// Ramp increases the rate linearly from From to To over Duration.
type Ramp struct {
	From     Rate     `yaml:"from"`
	To       Rate     `yaml:"to"`
	Duration Duration `yaml:"duration"`
}

// Attribution turns a response into an identity {cluster, pod, version}.
// It may be left empty when an observe workload has logs or metrics: the
// requests are then counted where they are served (expectation source).
type Attribution struct {
	// Preset names a ready-made rule set (PresetNames).
	Preset string `yaml:"preset"`
	Rules  []Rule `yaml:"rules"`
	// Map derives one identity field from another, e.g.
	// {from: version, to: cluster, values: {v1: c1, v2: c2}}, or renames
	// a field's values when from and to are the same field, e.g.
	// {from: cluster, to: cluster, values: {Cluster-1: c1}}.
	Map []ValueMap `yaml:"map"`
}

// Rule extracts identity fields from one place in a response.
type Rule struct {
	// Body regex with named groups cluster, pod, version, service.
	Body string `yaml:"body"`
	// Header is a response header name; its value is captured whole, or
	// through Regex when set.
	Header string `yaml:"header"`
	// JSON is a dotted field path into a JSON body (a.b.0.c).
	JSON string `yaml:"json"`
	// Regex applies to the header or JSON value; named groups as for Body.
	Regex string `yaml:"regex"`
	// Field is the identity field a whole captured value fills
	// (cluster, pod, version) when there are no named groups.
	Field string `yaml:"field"`
	// Match picks which match wins when the text holds several: first
	// (default) or last, e.g. a caller that embeds its callee's answer.
	Match string `yaml:"match"`
}

// ValueMap derives the To field from the From field's value.
type ValueMap struct {
	From   string            `yaml:"from"`
	To     string            `yaml:"to"`
	Values map[string]string `yaml:"values"`
}

// Statistics are the defaults every expectation inherits.
type Statistics struct {
	Confidence float64 `yaml:"confidence"`
	Power      float64 `yaml:"power"`
	// Margin is absolute percentage points ("5%" or 0.05) unless Relative.
	Margin   Percent `yaml:"margin"`
	Relative bool    `yaml:"relative"`
	// Interval is clopper-pearson (default) or wilson.
	Interval string `yaml:"interval"`
	// Inconclusive says how a gate treats INCONCLUSIVE: fail (default) or pass.
	Inconclusive string `yaml:"inconclusive"`
	// Stop is "end" (default) or "early" for sequential looks.
	Stop  string `yaml:"stop"`
	Looks int    `yaml:"looks"`
	// Balancing says how the mesh's entry picks a backend, which decides
	// what one independent draw is (docs/statistics.md §3): "request"
	// (per request: Envoy, weighted clusters) or "connection" (every
	// request on a keep-alive connection goes where the connection went:
	// Skupper, L4). ApplyDefaults resolves it: connection when a cluster
	// declares a cost or a split uses a link-cost model, else request.
	Balancing string `yaml:"balancing"`
	// BalancingReason says why Balancing has its value, for the report.
	BalancingReason string `yaml:"-"`
}

// Expectation is one judged statement. Exactly one of the kinds is set.
type Expectation struct {
	Name string `yaml:"name"`
	// From judges only the requests the workers in this cluster sent
	// (one of attack.sources): locality, seen from each source.
	From        string        `yaml:"from"`
	Split       *Split        `yaml:"split"`
	Reached     *BucketSet    `yaml:"reached"`
	Only        *BucketSet    `yaml:"only"`
	Never       *BucketSet    `yaml:"never"`
	SuccessRate *SuccessRate  `yaml:"successRate"`
	Latency     *Latency      `yaml:"latency"`
	Mirror      *MirrorExpect `yaml:"mirror"`
}

// Workload is a set of pods mesh-verify inventories, and whose logs and
// metrics it reads, in every listed cluster.
type Workload struct {
	// Name is required and unique; expectations (mirror.to) and reports
	// refer to the workload by it.
	Name string `yaml:"name"`
	// Namespace defaults to "default".
	Namespace string `yaml:"namespace"`
	// namespaceDefaulted records that ApplyDefaults chose Namespace.
	namespaceDefaulted bool
	// Selector is a label selector in kubectl syntax, e.g.
	// "app=callme-service,version in (v1,v2)". Required.
	Selector string `yaml:"selector"`
	// Clusters are declared clusters with a context; ApplyDefaults fills in
	// every declared cluster when the list is left out.
	Clusters []string `yaml:"clusters"`
	// Container is the container whose logs are read; "" means the pod's
	// only (or first) container.
	Container string `yaml:"container"`
	// VersionLabel is the pod label that names the version; defaults to
	// "version" (the runner falls back to app.kubernetes.io/version).
	VersionLabel string         `yaml:"versionLabel"`
	Logs         *LogSource     `yaml:"logs"`
	Metrics      *MetricsSource `yaml:"metrics"`

	// allClusters records that Clusters was defaulted, so that errors about
	// a cluster the file never named can say why it is observed.
	allClusters bool
}

// LogSource attributes requests by the lines the workload's pods log.
type LogSource struct {
	// Preset names a ready-made rule for a real app's or proxy's log
	// (LogPresetNames): it fills in Match, Exclude and the workload's
	// container when they are left out.
	Preset string `yaml:"preset"`
	// Match is a regex; a line that matches is one served request. Named
	// groups are among LogGroups.
	Match string `yaml:"match"`
	// Exclude is a regex: matching lines it also matches do not count,
	// e.g. the kubelet's probes in an access log.
	Exclude string `yaml:"exclude"`
	// Background: lines without this run's request id count inside the
	// attack window, less each pod's usual rate of them, measured over
	// this long before it. Default 30s; 0s turns it off.
	Background *Duration `yaml:"background"`
	// Settle: after the attack, logs are read until the counts have not
	// grown for this long. Default 3s.
	Settle Duration `yaml:"settle"`
	// Skew: logs are read from the attack start minus Skew (clock skew
	// between clusters). Default 2s.
	Skew Duration `yaml:"skew"`
}

// MetricsSource attributes requests by the delta of a per-pod Prometheus
// counter, scraped before and after the attack through the API server's
// pod proxy or a port-forward (Via).
type MetricsSource struct {
	// Port is the pod's metrics port: a number or a named container port.
	Port string `yaml:"port"`
	// Path defaults to /metrics.
	Path string `yaml:"path"`
	// Counter is a Prometheus counter name, e.g. istio_requests_total or
	// http_server_requests_seconds_count.
	Counter string `yaml:"counter"`
	// Labels keep only the series whose labels equal these values.
	Labels map[string]string `yaml:"labels"`
	// Via is how the metrics port is reached: proxy (default; the API
	// server's pod proxy, RBAC get pods/proxy, needs a route from the API
	// server to the pod network) or portForward (RBAC create
	// pods/portforward, as kubectl port-forward).
	Via string `yaml:"via"`
}

// Split expects the share of requests per bucket to follow a model.
type Split struct {
	// By is cluster, pod or version.
	By string `yaml:"by"`
	// Model: weights, equal, equal-per-pod, link-cost-inverse, link-cost-balanced.
	Model   string             `yaml:"model"`
	Weights map[string]float64 `yaml:"weights"`
	// FromMesh reads the expected shares from the mesh's own object
	// instead of weights (model mesh; docs/expect-from-mesh.md).
	FromMesh *MeshSource `yaml:"fromMesh"`
	// Buckets lists the buckets for equal (default: every declared cluster).
	Buckets []string `yaml:"buckets"`
	// Pods gives ready pods per cluster for equal-per-pod and link-cost
	// models, for the clusters no observe workload lists (the inventory
	// counts the ready pods of the others).
	Pods map[string]int `yaml:"pods"`
	// Connections is the concurrency the balanced model assumes (default:
	// attack concurrency or max connections).
	Connections int      `yaml:"connections"`
	Margin      *Percent `yaml:"margin"`
	Relative    *bool    `yaml:"relative"`
	Confidence  float64  `yaml:"confidence"`
	// Source is where requests are attributed: body, logs or metrics.
	// ApplyDefaults resolves it: body when attribution has rules or a
	// preset, else logs when some workload has logs, else metrics.
	Source string `yaml:"source"`
	// Balancing overrides statistics.balancing for this split.
	Balancing string `yaml:"balancing"`
}

// BucketSet names buckets of one dimension.
type BucketSet struct {
	By      string   `yaml:"by"`
	Buckets []string `yaml:"buckets"`
	// Margin tolerates a share outside the set (only/never); 0 = none.
	Margin *Percent `yaml:"margin"`
	// MinShare (reached only) is the share below which a bucket that got
	// nothing is called missing. Left out: the smallest expected share of
	// these buckets in a split of the same by and source, else half an
	// equal share, 1/(2k) (docs/statistics.md §4).
	MinShare *Percent `yaml:"minShare"`
	// Source is as for Split.
	Source string `yaml:"source"`
}

// SuccessRate expects at least AtLeast of requests to succeed.
type SuccessRate struct {
	AtLeast Percent `yaml:"atLeast"`
}

// Latency expects a percentile to stay below a bound.
type Latency struct {
	Percentile float64  `yaml:"percentile"`
	Below      Duration `yaml:"below"`
}

// MirrorExpect expects a share of the primary requests to be mirrored to
// a workload. A mirrored copy's response is discarded by the proxy, so the
// copies are counted in the mirror target's logs: joined to the primaries
// by request id, or counted in the attack window (README.md, mirroring).
// Envoy decides per request whether to mirror, so the statistics always
// take requests as independent draws here (docs/statistics.md §3).
type MirrorExpect struct {
	// To is the observe workload (with logs) that receives the copies.
	To string `yaml:"to"`
	// Percent is the expected share of primary requests mirrored.
	Percent Percent  `yaml:"percent"`
	Margin  *Percent `yaml:"margin"`
	// Shadow counts only lines whose host (or authority) group ends in
	// -shadow (Envoy up to Istio 1.27 appends it to the copy's Host), else
	// every line of the target's pods. ApplyDefaults sets it to whether the
	// match regex has such a group.
	Shadow *bool `yaml:"shadow"`

	// shadowDefaulted records that ApplyDefaults chose Shadow.
	shadowDefaulted bool
}

// ShadowDefaulted reports whether Shadow was left out of the file: a
// proxy that marks no copy then calls for a hint, not a silent zero.
func (m *MirrorExpect) ShadowDefaulted() bool { return m.shadowDefaulted }

// NamespaceDefaulted reports whether the scenario left the namespace unset
// (ApplyDefaults filled in "default"): the namespace -n replaces.
func (w *Workload) NamespaceDefaulted() bool {
	return w.namespaceDefaulted && w.Namespace == DefaultNamespace
}
