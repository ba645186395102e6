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
	APIVersion  string        `yaml:"apiVersion"`
	Kind        string        `yaml:"kind"`
	Metadata    Metadata      `yaml:"metadata"`
	Clusters    []Cluster     `yaml:"clusters"`
	Target      Target        `yaml:"target"`
	Attack      Attack        `yaml:"attack"`
	Attribution Attribution   `yaml:"attribution"`
	Statistics  Statistics    `yaml:"statistics"`
	Expect      []Expectation `yaml:"expect"`

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
}

// Forward is a port-forward target: resource is pod/NAME, svc/NAME or deploy/NAME.
type Forward struct {
	Cluster   string `yaml:"cluster"`
	Namespace string `yaml:"namespace"`
	Resource  string `yaml:"resource"`
	Port      string `yaml:"port"`
	Scheme    string `yaml:"scheme"`
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
}

// Ramp increases the rate linearly from From to To over Duration.
type Ramp struct {
	From     Rate     `yaml:"from"`
	To       Rate     `yaml:"to"`
	Duration Duration `yaml:"duration"`
}

// Attribution turns a response into an identity {cluster, pod, version}.
type Attribution struct {
	// Preset names a ready-made rule set: tutorial, istio-echo,
	// kuma-test-server, cilium-rebel-base.
	Preset string `yaml:"preset"`
	Rules  []Rule `yaml:"rules"`
	// Map derives one identity field from another, e.g.
	// {from: version, to: cluster, values: {v1: c1, v2: c2}}.
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
	// Interval is wilson (default) or clopper-pearson.
	Interval string `yaml:"interval"`
	// Inconclusive says how a gate treats INCONCLUSIVE: fail (default) or pass.
	Inconclusive string `yaml:"inconclusive"`
	// Stop is "end" (default) or "early" for sequential looks.
	Stop  string `yaml:"stop"`
	Looks int    `yaml:"looks"`
}

// Expectation is one judged statement. Exactly one of the kinds is set.
type Expectation struct {
	Name        string       `yaml:"name"`
	Split       *Split       `yaml:"split"`
	Reached     *BucketSet   `yaml:"reached"`
	Only        *BucketSet   `yaml:"only"`
	Never       *BucketSet   `yaml:"never"`
	SuccessRate *SuccessRate `yaml:"successRate"`
	Latency     *Latency     `yaml:"latency"`
}

// Split expects the share of requests per bucket to follow a model.
type Split struct {
	// By is cluster, pod or version.
	By string `yaml:"by"`
	// Model: weights, equal, equal-per-pod, link-cost-inverse, link-cost-balanced.
	Model   string             `yaml:"model"`
	Weights map[string]float64 `yaml:"weights"`
	// Buckets lists the buckets for equal (default: every declared cluster).
	Buckets []string `yaml:"buckets"`
	// Pods gives ready pods per cluster for equal-per-pod and link-cost
	// models when no inventory is available.
	Pods map[string]int `yaml:"pods"`
	// Connections is the concurrency the balanced model assumes (default:
	// attack concurrency or max connections).
	Connections int      `yaml:"connections"`
	Margin      *Percent `yaml:"margin"`
	Relative    *bool    `yaml:"relative"`
	Confidence  float64  `yaml:"confidence"`
}

// BucketSet names buckets of one dimension.
type BucketSet struct {
	By      string   `yaml:"by"`
	Buckets []string `yaml:"buckets"`
	// Margin tolerates a share outside the set (only/never); 0 = none.
	Margin *Percent `yaml:"margin"`
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
