package meshconfig

import (
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mesh-verify/mesh-verify/assert"
)

// Dimensions an expectation from the mesh may split by: the scenario's
// split.by values that a mesh object can determine.
const (
	ByVersion = "version"
	ByCluster = "cluster"
)

// DefaultVersionLabel is the pod label that names a version.
const DefaultVersionLabel = "version"

// Request is what mesh-verify knows of the attack's requests: the route
// rule they match is chosen by it, first match wins (Istio) or the most
// specific match wins (Kuma).
type Request struct {
	Method string `json:"method,omitempty"`
	// Path is the request's path with its query, as sent.
	Path   string `json:"path,omitempty"`
	Scheme string `json:"scheme,omitempty"`
	// Host is the Host (:authority) header.
	Host string `json:"host,omitempty"`
	// Headers are sent on every request; names are compared
	// case-insensitively.
	Headers map[string]string `json:"headers,omitempty"`
	// Gateway is the Istio gateway the requests enter through: "mesh"
	// (the default) for a sidecar, else the Gateway's namespace/name.
	Gateway string `json:"gateway,omitempty"`
}

func (r Request) method() string {
	if r.Method == "" {
		return "GET"
	}
	return strings.ToUpper(r.Method)
}

func (r Request) gateway() string {
	if r.Gateway == "" {
		return "mesh"
	}
	return r.Gateway
}

// pathOnly is the path without its query.
func (r Request) pathOnly() string {
	p, _, _ := strings.Cut(r.Path, "?")
	if p == "" {
		return "/"
	}
	return p
}

func (r Request) query() url.Values {
	_, q, _ := strings.Cut(r.Path, "?")
	v, _ := url.ParseQuery(q)
	return v
}

// header is the value of a header and whether it is sent.
func (r Request) header(name string) (string, bool) {
	for k, v := range r.Headers {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}

// String is "GET /path host h, headers a, b" for messages.
func (r Request) String() string {
	s := r.method() + " " + r.pathOnly()
	if r.Host != "" {
		s += " (host " + r.Host + ")"
	}
	if len(r.Headers) > 0 {
		s += " with headers " + strings.Join(slices.Sorted(maps.Keys(r.Headers)), ", ")
	}
	return s
}

// Query is one expected split to derive.
type Query struct {
	Ref Ref
	// By is ByVersion or ByCluster.
	By string
	// VersionLabel is the pod label naming a version (default "version").
	VersionLabel string
	// Clusters are the scenario's clusters, in order; Ref.Cluster
	// defaults to the first.
	Clusters []string
	Request  Request
	// Connections is the number of concurrent connections (Skupper's
	// balanced routing depends on it); 0 means 1, sequential traffic.
	Connections int
	// Selector is a label selector in kubectl syntax for the pods that
	// serve a Skupper address in each cluster (Skupper's connectors name
	// no Service mesh-verify could read).
	Selector string
}

// cluster is the cluster the Ref's object is read from.
func (q Query) cluster() string {
	if q.Ref.Cluster != "" {
		return q.Ref.Cluster
	}
	if len(q.Clusters) > 0 {
		return q.Clusters[0]
	}
	return ""
}

func (q Query) versionLabel() string {
	if q.VersionLabel == "" {
		return DefaultVersionLabel
	}
	return q.VersionLabel
}

// Source is one object an expectation was derived from.
type Source struct {
	Cluster         string `json:"cluster"`
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
	// Fields are the field paths read, like spec.http[0].route[1].weight.
	Fields []string `json:"fields,omitempty"`
}

// String is "VirtualService demo/reviews@c1 (resourceVersion 812)".
func (s Source) String() string {
	obj := s.Kind + " " + s.Name
	if s.Namespace != "" {
		obj = s.Kind + " " + s.Namespace + "/" + s.Name
	}
	return fmt.Sprintf("%s in cluster %s (resourceVersion %s)", obj, s.Cluster, s.ResourceVersion)
}

// Mirror is a share of the matched requests copied to a bucket: a
// separate expectation, since the copies are not served requests.
type Mirror struct {
	Bucket  string  `json:"bucket"`
	Percent float64 `json:"percent"`
	// Field is where the percentage was read ("" when defaulted to 100).
	Field string `json:"field,omitempty"`
}

// Expected is an expected split as the mesh's objects define it.
type Expected struct {
	Ref Ref    `json:"ref"`
	By  string `json:"by"`
	// Shares are normalised: they sum to 1 over the buckets.
	Shares map[string]float64 `json:"shares"`
	// Weights are the objects' own numbers per bucket (relative), for
	// kinds that have weights.
	Weights map[string]float64 `json:"weights,omitempty"`
	// Model is the assert model the shares come from.
	Model       string   `json:"model"`
	Explanation []string `json:"explanation"`
	// Rule is the field path of the route rule the requests match.
	Rule    string   `json:"rule,omitempty"`
	Mirrors []Mirror `json:"mirrors,omitempty"`
	Sources []Source `json:"sources"`
	// Backends are, per cluster, the ready pods the resolution counted
	// behind the object (Cilium: the Service's selector in each cluster;
	// Skupper: the selector's pods at each site), for kinds whose shares
	// follow them. Pods are no Sources: a scale changes the shares at the
	// same resourceVersions, which is how a run tells a failover from an
	// edit of the object (judge.FollowChange).
	Backends map[string]int `json:"backends,omitempty"`
	// BackendsOf names what Backends count, like "Service default/rebel-base".
	BackendsOf string `json:"backendsOf,omitempty"`
}

// Resolve derives the expected split from objects already read (Fetch
// reads them). Every error names the object and field.
func Resolve(q Query, objs Objects) (Expected, error) {
	if err := q.Ref.Validate(); err != nil {
		return Expected{}, fmt.Errorf("mesh object reference %s: %w", q.Ref, err)
	}
	if q.cluster() == "" {
		return Expected{}, fmt.Errorf("%s: no cluster to read it from", q.Ref.Object())
	}
	if q.Ref.Cluster != "" && len(q.Clusters) > 0 && !slices.Contains(q.Clusters, q.Ref.Cluster) {
		return Expected{}, fmt.Errorf("%s: cluster %q is not one of the scenario's (%s)", q.Ref, q.Ref.Cluster, strings.Join(q.Clusters, ", "))
	}
	var e Expected
	var err error
	switch q.Ref.Kind {
	case KindVirtualService:
		e, err = resolveIstio(q, objs)
	case KindMeshHTTPRoute:
		e, err = resolveMeshHTTPRoute(q, objs)
	case KindTrafficRoute:
		e, err = resolveTrafficRoute(q, objs)
	case KindSkupper:
		e, err = resolveSkupper(q, objs)
	case KindService:
		e, err = resolveCilium(q, objs)
	case KindRollout:
		e, err = resolveRollout(q, objs)
	}
	if err != nil {
		return Expected{}, err
	}
	e.Ref, e.By = q.Ref, q.By
	return e, nil
}

// Dimensions are the split.by values a kind of reference determines.
func Dimensions(kind string) []string {
	switch kind {
	case KindVirtualService, KindRollout:
		return []string{ByVersion}
	case KindMeshHTTPRoute, KindTrafficRoute:
		return []string{ByVersion, ByCluster}
	case KindSkupper, KindService:
		return []string{ByCluster}
	}
	return nil
}

// needBy checks that the kind can split by q.By.
func needBy(q Query, allowed ...string) error {
	if slices.Contains(allowed, q.By) {
		return nil
	}
	return fmt.Errorf("%s: split by %q cannot be read from a %s; it determines a split by %s", q.Ref.Object(), q.By, q.Ref.Kind, strings.Join(allowed, " or "))
}

// notFound is the error for a referenced object missing from objs.
func notFound(q Query) error {
	return &ObjectError{Cluster: q.cluster(), Kind: q.Ref.Kind, Namespace: q.Ref.Namespace, Name: q.Ref.Name, Msg: "not found"}
}

// weighted turns weights per bucket into the expectation's shares.
func weighted(e *Expected, weights map[string]float64) error {
	s, err := assert.WeightsModel(weights)
	if err != nil {
		return err
	}
	e.Weights, e.Shares, e.Model = weights, s.Shares, s.Model
	e.Explanation = append(e.Explanation, "weights are relative, as the mesh treats them: each bucket's share is its weight over the sum")
	e.Explanation = append(e.Explanation, s.Explanation...)
	return nil
}

// readyPods lists the ready, not terminating pods of namespace ns in
// cluster that sel selects.
func readyPods(objs Objects, cluster, ns string, sel labels.Selector) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, p := range objs.all(cluster, "Pod", ns) {
		if p.GetDeletionTimestamp() != nil || !sel.Matches(labels.Set(p.GetLabels())) {
			continue
		}
		conds, _, _ := unstructured.NestedSlice(p.Object, "status", "conditions")
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				out = append(out, p)
				break
			}
		}
	}
	return out
}

// podVersions lists, sorted, the values of label key on the ready pods
// sel picks in namespace ns of the clusters ("" for a pod without it),
// and how many pods there are: the version(s) a destination reaches.
func podVersions(objs Objects, clusters []string, ns string, sel labels.Selector, key string) ([]string, int) {
	var vs []string
	count := 0
	for _, c := range clusters {
		for _, p := range readyPods(objs, c, ns, sel) {
			count++
			if v := p.GetLabels()[key]; !slices.Contains(vs, v) {
				vs = append(vs, v)
			}
		}
	}
	slices.Sort(vs)
	return vs, count
}

// stringMatch evaluates an Istio StringMatch ({exact|prefix|regex}); an
// empty one matches any value that is there.
func stringMatch(n node, value string, foldCase bool) (bool, error) {
	if _, err := n.object(); err != nil {
		return false, err
	}
	for _, k := range n.keys() {
		s, err := n.get(k).str()
		if err != nil {
			return false, err
		}
		switch k {
		case "exact":
			if foldCase {
				return strings.EqualFold(value, s), nil
			}
			return value == s, nil
		case "prefix":
			if foldCase {
				return strings.HasPrefix(strings.ToLower(value), strings.ToLower(s)), nil
			}
			return strings.HasPrefix(value, s), nil
		case "regex":
			return fullMatch(n.get(k), s, value)
		default:
			return false, n.get(k).errf("unknown string match %q: want exact, prefix or regex", k)
		}
	}
	return true, nil
}

// fullMatch matches value against the RE2 pattern as Envoy does: the whole
// value.
func fullMatch(n node, pattern, value string) (bool, error) {
	re, err := regexp.Compile(`^(?:` + pattern + `)$`)
	if err != nil {
		return false, n.errf("invalid regex: %v", err)
	}
	return re.MatchString(value), nil
}

// Provenance is the expectation's origin in lines for a report's
// explanation and the run's output: each object read with its
// resourceVersion and the fields used, the matched rule, the objects'
// own weights and the mirrors, so that a report says which version of
// the mesh's configuration it judged against.
func (e Expected) Provenance() []string {
	out := []string{"expected shares read from the mesh: " + e.Ref.Object()}
	for _, s := range e.Sources {
		line := "source " + s.APIVersion + " " + s.String()
		if len(s.Fields) > 0 {
			line += ", fields " + strings.Join(s.Fields, ", ")
		}
		out = append(out, line)
	}
	if e.Rule != "" {
		out = append(out, "the attack's requests match the rule at "+e.Rule)
	}
	if len(e.Weights) > 0 {
		var ws []string
		for _, b := range slices.Sorted(maps.Keys(e.Weights)) {
			ws = append(ws, fmt.Sprintf("%s=%g", b, e.Weights[b]))
		}
		out = append(out, "weights "+strings.Join(ws, ", "))
	}
	for _, m := range e.Mirrors {
		line := fmt.Sprintf("mirror %g%% to %s", m.Percent, m.Bucket)
		if m.Field != "" {
			line += " (" + m.Field + ")"
		}
		out = append(out, line)
	}
	return out
}
