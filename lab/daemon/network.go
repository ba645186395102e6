package daemon

import (
	"context"
	"net"
	"strconv"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// gatewayLookupTimeout bounds the one read of a cluster's east-west
// gateway Service; a lab API server answers in milliseconds.
const gatewayLookupTimeout = 5 * time.Second

// upstreamHost is the %UPSTREAM_HOST% an outbound Envoy line of entry e
// names for backend b in a multi-network topology (Topology.Networks):
// the pod's IP and port when b is on the entry's network, else the
// ClusterIP of b's cluster's east-west gateway and port 15443, as Istio
// replaces a remote network's endpoints by its gateway. fallback (the
// backend's loopback address) stays when the pod or gateway is not known
// yet: a line is never given another pod's address.
func (d *Daemon) upstreamHost(e *topology.Entry, b meshsim.Backend, fallback string) string {
	if b.Pod == "" {
		return fallback
	}
	nets := d.cfg.Topology.Networks
	if nets[b.Cluster] != nets[e.Cluster] {
		if ip := d.gatewayIP(b.Cluster); ip != "" {
			return net.JoinHostPort(ip, strconv.Itoa(topology.EastWestGatewayPort))
		}
		return fallback
	}
	lister := d.listers[b.Cluster]
	if lister == nil {
		return fallback
	}
	pod, err := lister.Pods(e.Namespace).Get(b.Pod)
	if err != nil || pod.Status.PodIP == "" {
		return fallback
	}
	d.mu.Lock()
	rt := d.pods[podRef{cluster: b.Cluster, namespace: e.Namespace, name: b.Pod}]
	var port int32
	if rt != nil {
		port = rt.status.Port
	}
	d.mu.Unlock()
	if port == 0 {
		return fallback
	}
	return net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(port)))
}

// gatewayIP is the ClusterIP of cluster's east-west gateway Service, read
// once from its API server; "" while it cannot be read.
func (d *Daemon) gatewayIP(cluster string) string {
	d.gwMu.Lock()
	defer d.gwMu.Unlock()
	if ip, ok := d.gateways[cluster]; ok {
		return ip
	}
	cl := d.clusters[cluster]
	if cl == nil {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), gatewayLookupTimeout)
	defer cancel()
	svc, err := cl.cs.CoreV1().Services(topology.EastWestGatewayNamespace).Get(ctx, topology.EastWestGatewayName, metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP == "" {
		d.log.Warn("east-west gateway unknown", "cluster", cluster, "err", err)
		return ""
	}
	d.gateways[cluster] = svc.Spec.ClusterIP
	return svc.Spec.ClusterIP
}
