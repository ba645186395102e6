package worker

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// Limits of the sidecar lifecycle (docs/distributed.md, Worker pods in a
// mesh).
const (
	// DefaultProxyReadyTimeout bounds the wait for the injected proxy;
	// MaxProxyReadyTimeout bounds --sidecar-ready-timeout (the worker's
	// --start-timeout bound: a proxy slower than that is broken).
	DefaultProxyReadyTimeout = time.Minute
	MaxProxyReadyTimeout     = MaxStartTimeout
	// proxyPoll is the pause between readiness probes, proxyCall the bound
	// of one probe or quit request: the endpoints are on the loopback.
	proxyPoll = 250 * time.Millisecond
	proxyCall = 2 * time.Second
	// maxProxyBody bounds what is read of an endpoint's answer (for the
	// error message).
	maxProxyBody = 512
)

// Proxy is the mesh proxy injected next to the worker: the worker waits
// until it is ready before it reads its ConfigMap (its traffic, the API
// server's included, goes through the proxy) and asks it to quit at the
// end, else the pod's proxy keeps running and the Job never completes.
type Proxy struct {
	// Name is the mesh, for messages.
	Name string
	// ReadyURL answers 200 once the proxy forwards traffic (GET).
	ReadyURL string
	// QuitURL stops the proxy (POST).
	QuitURL string
}

// ProxyFor is the documented endpoints of a sidecar: Istio's pilot-agent
// (readiness on 15021, quitquitquit on 15020) and Kuma's Envoy admin on
// 9901 (ready and quitquitquit).
func ProxyFor(sidecar string) (*Proxy, error) {
	switch sidecar {
	case "", "none":
		return nil, nil
	case "istio":
		return &Proxy{Name: "istio", ReadyURL: "http://127.0.0.1:15021/healthz/ready", QuitURL: "http://127.0.0.1:15020/quitquitquit"}, nil
	case "kuma":
		return &Proxy{Name: "kuma", ReadyURL: "http://127.0.0.1:9901/ready", QuitURL: "http://127.0.0.1:9901/quitquitquit"}, nil
	}
	return nil, fmt.Errorf("--sidecar %q: want istio, kuma or none", sidecar)
}

// SidecarAdminEnv names where the injected proxy's readiness and quit
// endpoints listen (HOST:PORT, a loopback address) when they are not at
// the proxy's own ports on the pod's loopback. Unset on a real cluster;
// the local lab sets it, as all its processes share the host's loopback
// (lab/README.md, "Worker pods in the lab's mesh").
const SidecarAdminEnv = "MESH_VERIFY_SIDECAR_ADMIN"

// ProxyAt is ProxyFor with its endpoints' paths at admin (HOST:PORT on
// the loopback) instead of the proxy's own ports; admin "" is ProxyFor.
func ProxyAt(sidecar, admin string) (*Proxy, error) {
	p, err := ProxyFor(sidecar)
	if err != nil || p == nil || admin == "" {
		return p, err
	}
	host, port, err := net.SplitHostPort(admin)
	if err != nil {
		return nil, fmt.Errorf("$%s %q: want HOST:PORT: %w", SidecarAdminEnv, admin, err)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
		return nil, fmt.Errorf("$%s %q: want a port 1..65535", SidecarAdminEnv, admin)
	}
	// The endpoints stop the proxy: never anything but this host's.
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return nil, fmt.Errorf("$%s %q: want a loopback address (127.0.0.1, ::1 or localhost)", SidecarAdminEnv, admin)
	}
	for _, u := range []*string{&p.ReadyURL, &p.QuitURL} {
		parsed, err := url.Parse(*u)
		if err != nil {
			return nil, err
		}
		parsed.Host = net.JoinHostPort(host, port)
		*u = parsed.String()
	}
	return p, nil
}

// proxyClient talks to the loopback only: never through $HTTP_PROXY.
func proxyClient() *http.Client {
	return &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: proxyCall}
}

// WaitReady polls ReadyURL until it answers 200, for at most timeout.
func (p *Proxy) WaitReady(parent context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(parent, timeout)
	defer cancel()
	c := proxyClient()
	var last error
	for {
		last = p.call(ctx, c, http.MethodGet, p.ReadyURL)
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			if parent.Err() != nil {
				return fmt.Errorf("stopped while waiting for the %s sidecar: %w", p.Name, parent.Err())
			}
			return fmt.Errorf("the %s sidecar was not ready within %s (GET %s: %v): is it injected and healthy?", p.Name, timeout, p.ReadyURL, last)
		case <-time.After(proxyPoll):
		}
	}
}

// Quit asks the proxy to exit (one POST, bounded by proxyCall).
func (p *Proxy) Quit(ctx context.Context) error {
	if err := p.call(ctx, proxyClient(), http.MethodPost, p.QuitURL); err != nil {
		return fmt.Errorf("stop the %s sidecar (POST %s): %w: the Job completes only once it exits", p.Name, p.QuitURL, err)
	}
	return nil
}

func (p *Proxy) call(ctx context.Context, c *http.Client, method, url string) error {
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxProxyBody))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("status %d %q", resp.StatusCode, body)
	}
	return nil
}
