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

// NamespaceDefaulted reports whether the scenario left the namespace unset
// (ApplyDefaults filled in "default"): the namespace -n replaces.
func (w *Workload) NamespaceDefaulted() bool {
	return w.namespaceDefaulted && w.Namespace == DefaultNamespace
}
