package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScrapeAccept asks for the classic Prometheus text format, which every
// exporter serves (the pod proxy passes the header through to the pod).
const ScrapeAccept = `text/plain;version=0.0.4;q=0.9,application/openmetrics-text;version=1.0.0;q=0.5,*/*;q=0.1`

// Sample is one flattened series: counters and gauges by their name;
// summaries and histograms as NAME_count, NAME_sum (and NAME_bucket /
// quantiles), so `http_server_requests_seconds_count` is found by that name.
type Sample struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
	Value  float64           `json:"value"`
}

// Metrics is one scrape of one pod.
type Metrics struct {
	Cluster   string    `json:"cluster"`
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	Time      time.Time `json:"time"`
	Samples   []Sample  `json:"samples"`
}

// Sum adds the samples called name whose labels include every pair in match.
func (m *Metrics) Sum(name string, match map[string]string) float64 {
	var sum float64
	for _, s := range m.Samples {
		if s.Name == name && labelsMatch(s.Labels, match) {
			sum += s.Value
		}
	}
	return sum
}

func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// podProxyPath is the API server's pod proxy path for a pod port: PORT is a
// number or a port name; PATH is the path on the pod ("/metrics").
func podProxyPath(namespace, pod, port, path string) string {
	p := "/api/v1/namespaces/" + url.PathEscape(namespace) + "/pods/" + url.PathEscape(pod+":"+port) + "/proxy"
	if path == "" {
		path = "/metrics"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	return p + path
}

// KwokNodeAnnotation marks a node simulated by kwok: its pods have made-up
// IPs (10.0.0.x) and no network.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

// Ways to reach a pod's metrics port (scenario metrics.via).
const (
	// ViaProxy GETs the metrics through the API server's pod proxy
	// (RBAC: get pods/proxy). The API server connects to the pod IP
	// itself, so it needs a route to the pod network, and it refuses a pod
	// IP that is not global unicast (loopback, link-local).
	ViaProxy = "proxy"
	// ViaPortForward GETs them through a port-forward to the pod, as
	// `kubectl port-forward` does (RBAC: create pods/portforward): the
	// kubelet connects inside the pod, so no route from the API server to
	// the pod network is needed. The lab's pods are reachable this way only.
	ViaPortForward = "portForward"
)

// Vias lists the ways to reach a pod's metrics.
func Vias() []string { return []string{ViaProxy, ViaPortForward} }

// Scrape reads a pod's Prometheus endpoint through the API server's pod
// proxy (GET /api/v1/namespaces/NS/pods/NAME:PORT/proxy/PATH), so no
// network path to the pod is needed beyond the API server's own. port is
// a container port number or name; path defaults to /metrics.
//
// It first gets the pod and its node, and refuses a pod on a kwok
// simulated node: the API server would dial the pod's made-up IP, an
// address off this machine.
func Scrape(ctx context.Context, c *Cluster, namespace, pod, port, path string) (*Metrics, error) {
	if err := checkScrapable(ctx, c, namespace, pod); err != nil {
		return nil, err
	}
	abs := podProxyPath(namespace, pod, port, path)
	samples, err := ScrapePath(ctx, c, abs)
	if err != nil {
		return nil, c.wrap(fmt.Sprintf("scrape pod %s/%s port %s (GET %s)", namespace, pod, port, abs), err)
	}
	return &Metrics{Cluster: c.Name, Namespace: namespace, Pod: pod, Time: time.Now().UTC(), Samples: samples}, nil
}

// checkScrapable refuses a pod that is not scheduled or that runs on a kwok
// simulated node.
func checkScrapable(ctx context.Context, c *Cluster, namespace, pod string) error {
	p, err := c.Client.CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return c.wrap(fmt.Sprintf("get pod %s/%s to scrape it", namespace, pod), err)
	}
	if p.Spec.NodeName == "" {
		return fmt.Errorf("pod %s/%s in cluster %s is not scheduled on a node: it has no network to scrape", namespace, pod, c.Name)
	}
	n, err := c.Client.CoreV1().Nodes().Get(ctx, p.Spec.NodeName, metav1.GetOptions{})
	if err != nil {
		return c.wrap(fmt.Sprintf("get node %s of pod %s/%s (to check it is not a kwok simulated node before scraping)", p.Spec.NodeName, namespace, pod), err)
	}
	if _, ok := n.Annotations[KwokNodeAnnotation]; ok {
		return fmt.Errorf("pod %s/%s in cluster %s runs on a kwok simulated node %s (annotation %s): it has no network the API server's pod proxy can reach; scrape it through a port-forward (metrics.via: %s)",
			namespace, pod, c.Name, n.Name, KwokNodeAnnotation, ViaPortForward)
	}
	return nil
}

// ScrapePath GETs an API server path and parses it as Prometheus exposition
// (a pod proxy path as Scrape builds, without Scrape's check of the pod's node,
// or the API server's own /metrics).
func ScrapePath(ctx context.Context, c *Cluster, abs string) ([]Sample, error) {
	var (
		contentType string
		code        int
	)
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath(abs).SetHeader("Accept", ScrapeAccept).
		Do(ctx).ContentType(&contentType).StatusCode(&code).Raw()
	if err != nil {
		return nil, proxyError(err, code, body)
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("status %d", code)
	}
	h := http.Header{}
	h.Set("Content-Type", contentType)
	return ParseMetrics(bytes.NewReader(body), expfmt.ResponseFormat(h))
}

// maxErrorBody bounds how much of an error answer goes into a message.
const maxErrorBody = 200

// proxyError says what the API server's proxy answered: client-go, asked
// for Prometheus text, does not decode the Status the API server sends
// with a refusal ("the server rejected our request for an unknown
// reason"), so its message (e.g. "address not allowed" for a pod IP the
// proxy refuses) is read here.
func proxyError(err error, code int, body []byte) error {
	if code < 400 || len(body) == 0 {
		return err
	}
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
		return fmt.Errorf("%w: %s %d: %s", err, st.Reason, code, st.Message)
	}
	if len(body) > maxErrorBody {
		body = body[:maxErrorBody]
	}
	return fmt.Errorf("%w: status %d: %q", err, code, body)
}

// ParseMetrics decodes Prometheus text, OpenMetrics or delimited protobuf
// (format from expfmt.ResponseFormat; unknown falls back to text) into
// flattened samples.
func ParseMetrics(r io.Reader, format expfmt.Format) ([]Sample, error) {
	dec := expfmt.NewDecoder(r, format)
	var fams []*dto.MetricFamily
	for {
		mf := &dto.MetricFamily{}
		if err := dec.Decode(mf); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("parse metrics (%s): %w", format, err)
		}
		fams = append(fams, mf)
	}
	vec, err := expfmt.ExtractSamples(&expfmt.DecodeOptions{Timestamp: model.Now()}, fams...)
	if err != nil {
		return nil, fmt.Errorf("parse metrics: %w", err)
	}
	out := make([]Sample, 0, len(vec))
	for _, s := range vec {
		labels := make(map[string]string, len(s.Metric))
		for k, v := range s.Metric {
			if k != model.MetricNameLabel {
				labels[string(k)] = string(v)
			}
		}
		if len(labels) == 0 {
			labels = nil
		}
		out = append(out, Sample{Name: string(s.Metric[model.MetricNameLabel]), Labels: labels, Value: float64(s.Value)})
	}
	return out, nil
}

// PodDelta is the growth of a counter on one pod between two scrapes.
type PodDelta struct {
	Cluster   string  `json:"cluster"`
	Namespace string  `json:"namespace"`
	Pod       string  `json:"pod"`
	Delta     float64 `json:"delta"`
	// Reset is set when the counter went down (the process restarted):
	// Delta is then the value after, a lower bound.
	Reset bool `json:"reset,omitempty"`
	// New is set when the pod had no scrape before (it appeared meanwhile):
	// Delta is the value after.
	New bool `json:"new,omitempty"`
}

// Delta is the per-pod growth of counter name (summed over the series whose
// labels include match, e.g. istio_requests_total{response_code="200"})
// between the before and after scrapes, in the order of after. Pods
// scraped before but not after are left out: nothing is known of them.
func Delta(before, after []*Metrics, name string, match map[string]string) []PodDelta {
	key := func(m *Metrics) string { return m.Cluster + "/" + m.Namespace + "/" + m.Pod }
	prev := make(map[string]*Metrics, len(before))
	for _, m := range before {
		prev[key(m)] = m
	}
	out := make([]PodDelta, 0, len(after))
	for _, m := range after {
		d := PodDelta{Cluster: m.Cluster, Namespace: m.Namespace, Pod: m.Pod}
		v := m.Sum(name, match)
		if b, ok := prev[key(m)]; ok {
			bv := b.Sum(name, match)
			if v >= bv {
				d.Delta = v - bv
			} else {
				d.Delta, d.Reset = v, true
			}
		} else {
			d.Delta, d.New = v, true
		}
		out = append(out, d)
	}
	return out
}

// Names lists the distinct sample names (for "no such metric" messages).
func (m *Metrics) Names() []string {
	set := map[string]bool{}
	for _, s := range m.Samples {
		set[s.Name] = true
	}
	return slices.Sorted(maps.Keys(set))
}
