package portforward

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/prometheus/common/expfmt"
)

// maxScrapeBody bounds one scrape through a port-forward: Envoy's full
// stats are a few MB.
const maxScrapeBody = 64 << 20

// ScrapeVia reads a pod's Prometheus endpoint through the API server's pod
// proxy (kube.ViaProxy, or "": kube.Scrape) or a port-forward
// (kube.ViaPortForward). port is a
// container port number or name; path defaults to /metrics.
func ScrapeVia(ctx context.Context, c *kube.Cluster, via, namespace, pod, port, path string) (*kube.Metrics, error) {
	switch via {
	case "", kube.ViaProxy:
		return kube.Scrape(ctx, c, namespace, pod, port, path)
	case kube.ViaPortForward:
		return scrapeForward(ctx, c, namespace, pod, port, path)
	}
	return nil, fmt.Errorf("scrape pod %s/%s: unknown way %q (known: %s)", namespace, pod, via, strings.Join(kube.Vias(), ", "))
}

// scrapeForward GETs the metrics through a port-forward to the pod's port:
// one streaming connection for this scrape, closed after it.
func scrapeForward(ctx context.Context, c *kube.Cluster, namespace, pod, port, path string) (*kube.Metrics, error) {
	if path == "" {
		path = "/metrics"
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	what := fmt.Sprintf("scrape pod %s/%s port %s through a port-forward (GET %s)", namespace, pod, port, path)
	tun, err := OpenTunnel(ctx, c, TunnelSpec{Namespace: namespace, Resource: "pod/" + pod, Port: port})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer tun.Close()
	tr := &http.Transport{Proxy: nil, DialContext: tun.DialContext, DisableKeepAlives: true, DisableCompression: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pod+path, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	req.Header.Set("Accept", kube.ScrapeAccept)
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: status %d", what, resp.StatusCode)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxScrapeBody+1))
	if err != nil {
		return nil, fmt.Errorf("%s: read: %w", what, err)
	}
	if len(body) > maxScrapeBody {
		return nil, fmt.Errorf("%s: more than %d bytes of metrics", what, maxScrapeBody)
	}
	samples, err := kube.ParseMetrics(bytes.NewReader(body), expfmt.ResponseFormat(resp.Header))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return &kube.Metrics{Cluster: c.Name, Namespace: namespace, Pod: pod, Time: time.Now().UTC(), Samples: samples}, nil
}
