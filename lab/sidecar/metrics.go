package sidecar

import (
	"cmp"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/mesh-verify/mesh-verify/lab/envoylog"
)

// metrics are the proxy's counters: per metric name, per label set.
type metrics struct {
	mu     sync.Mutex
	series map[string]*series // by name + labels
}

type series struct {
	name   string
	labels [][2]string
	value  float64
}

func newMetrics() *metrics { return &metrics{series: map[string]*series{}} }

func (m *metrics) add(name string, labels [][2]string) {
	var b strings.Builder
	b.WriteString(name)
	for _, l := range labels {
		b.WriteString("\x00" + l[0] + "\x00" + l[1])
	}
	key := b.String()
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.series[key]
	if !ok {
		s = &series{name: name, labels: labels}
		m.series[key] = s
	}
	s.value++
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

// istioLabels are istio_requests_total's standard labels, in name order.
func istioLabels(reporter string, src, dst Destination, srcNS, dstNS string, e envoylog.Entry, security string) [][2]string {
	fqdn := "unknown"
	if dst.Service != "" {
		fqdn = dst.Service + "." + dstNS + ".svc.cluster.local"
	}
	flags := e.Flags
	if flags == "" {
		flags = "-"
	}
	return [][2]string{
		{"connection_security_policy", security},
		{"destination_app", orUnknown(dst.App)},
		{"destination_canonical_revision", orLatest(dst.Version)},
		{"destination_canonical_service", orUnknown(dst.App)},
		{"destination_cluster", orUnknown(dst.Cluster)},
		{"destination_principal", "unknown"},
		{"destination_service", fqdn},
		{"destination_service_name", orUnknown(dst.Service)},
		{"destination_service_namespace", orUnknown(dstNS)},
		{"destination_version", orUnknown(dst.Version)},
		{"destination_workload", orUnknown(dst.Workload)},
		{"destination_workload_namespace", orUnknown(dstNS)},
		{"grpc_response_status", ""},
		{"reporter", reporter},
		{"request_protocol", "http"},
		{"response_code", strconv.Itoa(e.Code)},
		{"response_flags", flags},
		{"source_app", orUnknown(src.App)},
		{"source_canonical_revision", orLatest(src.Version)},
		{"source_canonical_service", orUnknown(src.App)},
		{"source_cluster", orUnknown(src.Cluster)},
		{"source_principal", "unknown"},
		{"source_version", orUnknown(src.Version)},
		{"source_workload", orUnknown(src.Workload)},
		{"source_workload_namespace", orUnknown(srcNS)},
	}
}

func orLatest(s string) string {
	if s == "" {
		return "latest"
	}
	return s
}

// self is the pod as a Destination.
func (spec Spec) self() Destination {
	return Destination{Service: spec.Service, Namespace: spec.Namespace, Port: spec.ServicePort,
		Workload: spec.Workload, App: spec.App, Version: spec.Version, Cluster: spec.Cluster}
}

// inbound counts a request the pod served. The lab plays no peer-metadata
// exchange, so Istio's source labels are "unknown", as for a client
// outside the mesh.
func (m *metrics) inbound(spec Spec, e envoylog.Entry) {
	switch spec.Flavor {
	case Istio:
		m.add("istio_requests_total", istioLabels("destination", Destination{}, spec.self(), "", spec.Namespace, e, "none"))
	case Kuma:
		if e.Flags == envoylog.FlagNone {
			m.envoyCluster("localhost_"+strconv.Itoa(int(spec.Port)), e.Code)
		}
	}
}

// outbound counts a request the pod sent.
func (m *metrics) outbound(spec Spec, d Destination, e envoylog.Entry) {
	switch spec.Flavor {
	case Istio:
		m.add("istio_requests_total", istioLabels("source", spec.self(), d, spec.Namespace, d.Namespace, e, "unknown"))
	case Kuma:
		if e.Flags == envoylog.FlagNone {
			m.envoyCluster(kumaService(d.Service, d.Namespace, d.Port), e.Code)
		}
	}
}

// envoyCluster counts an upstream request of an Envoy cluster in the
// stats Kuma's dataplane exposes.
func (m *metrics) envoyCluster(cluster string, code int) {
	m.add("envoy_cluster_upstream_rq_total", [][2]string{{"envoy_cluster_name", cluster}})
	m.add("envoy_cluster_upstream_rq", [][2]string{{"envoy_response_code", strconv.Itoa(code)}, {"envoy_cluster_name", cluster}})
	m.add("envoy_cluster_upstream_rq_xx", [][2]string{{"envoy_response_code_class", strconv.Itoa(code / 100)}, {"envoy_cluster_name", cluster}})
}

// families renders the counters as Prometheus metric families, sorted by
// name, series in label order.
func (m *metrics) families() []*dto.MetricFamily {
	m.mu.Lock()
	defer m.mu.Unlock()
	byName := map[string]*dto.MetricFamily{}
	for _, s := range m.series {
		mf, ok := byName[s.name]
		if !ok {
			mf = &dto.MetricFamily{Name: ptr(s.name), Type: dto.MetricType_COUNTER.Enum()}
			byName[s.name] = mf
		}
		met := &dto.Metric{Counter: &dto.Counter{Value: ptr(s.value)}}
		for _, l := range s.labels {
			met.Label = append(met.Label, &dto.LabelPair{Name: ptr(l[0]), Value: ptr(l[1])})
		}
		mf.Metric = append(mf.Metric, met)
	}
	out := make([]*dto.MetricFamily, 0, len(byName))
	for _, mf := range byName {
		slices.SortFunc(mf.Metric, func(a, b *dto.Metric) int { return cmp.Compare(labelKey(a), labelKey(b)) })
		out = append(out, mf)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out
}

func labelKey(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.Label {
		b.WriteString(l.GetName() + "=" + l.GetValue() + ",")
	}
	return b.String()
}

func ptr[T any](v T) *T { return &v }

// serveMetrics writes the counters in Prometheus' text format, as Envoy's
// /stats/prometheus does (no HELP lines).
func (s *Sidecar) serveMetrics(w http.ResponseWriter, _ *http.Request) {
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	enc := expfmt.NewEncoder(w, format)
	for _, mf := range s.metrics.families() {
		if err := enc.Encode(mf); err != nil {
			return // the scraper went away
		}
	}
}
