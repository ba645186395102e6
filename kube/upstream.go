package kube

import (
	"cmp"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
)

// UpstreamKind says what an access log's upstream address names.
type UpstreamKind int

// Upstream kinds.
const (
	// UpstreamUnresolved: no pod or gateway, or several, answer to the
	// address; the line must not count for any cluster (Upstream.Reason).
	UpstreamUnresolved UpstreamKind = iota
	// UpstreamOwn: the logging pod itself (loopback, or one of its IPs):
	// an inbound line, which the logging pod served.
	UpstreamOwn
	// UpstreamPod: another observed pod, on the logging pod's network.
	UpstreamPod
	// UpstreamCluster: a network gateway (Istio's east-west gateway,
	// gatewayIP:15443); the request was served in the one cluster behind
	// it, by a pod the line does not name.
	UpstreamCluster
)

// Upstream is what ResolveUpstream found.
type Upstream struct {
	Kind UpstreamKind
	// Pod is set for UpstreamPod.
	Pod Pod
	// Cluster is the serving cluster (UpstreamPod, UpstreamCluster).
	Cluster string
	// Gateway is the gateway the address belongs to, if any.
	Gateway *Gateway
	// Reason says why an address is unresolved.
	Reason string
}

// SetGateways records the clusters' network gateways (EastWestGateways),
// which ResolveUpstream maps to the cluster behind them.
func (inv *Inv) SetGateways(gws []Gateway) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	inv.gateways = slices.Clone(gws)
	inv.changed()
}

// networksCached is networksLocked, computed once per change; callers
// hold inv.mu for reading.
func (inv *Inv) networksCached() map[string]string {
	if n := inv.networks.Load(); n != nil {
		return *n
	}
	n := inv.networksLocked()
	inv.networks.Store(&n)
	return n
}

// networksLocked is each cluster's network: its gateways' network label,
// else the one its pods carry; "" when unknown or contradictory.
func (inv *Inv) networksLocked() map[string]string {
	seen := map[string]map[string]bool{}
	note := func(cluster, network string) {
		if network == "" {
			return
		}
		if seen[cluster] == nil {
			seen[cluster] = map[string]bool{}
		}
		seen[cluster][network] = true
	}
	for _, g := range inv.gateways {
		note(g.Cluster, g.Network)
	}
	for _, p := range inv.pods {
		if len(seen[p.Cluster]) == 0 || seen[p.Cluster][p.Network] {
			note(p.Cluster, p.Network)
		}
	}
	out := map[string]string{}
	for c, nets := range seen {
		if len(nets) == 1 {
			for n := range nets {
				out[c] = n
			}
		}
	}
	return out
}

// ResolveUpstream maps the upstream address an access log of pod
// cluster/namespace/name names (%UPSTREAM_HOST%, "IP:port") to who served
// the request, as the mesh routes:
//
//   - loopback or the logging pod's own IP: the pod itself (inbound);
//   - a network gateway's address and port: the cluster behind it, the
//     one inventory cluster on the gateway's network (Istio replaces a
//     remote network's endpoints by its gateway, pilot's
//     EndpointsByNetworkFilter);
//   - a pod IP: the pod with it on the logging pod's network. Networks
//     may reuse pod CIDRs, so a pod of another network is never taken;
//     with no network labels (one flat network) the IP must be unique.
//
// Anything else is unresolved, with the reason: never a guess, and never
// the logging pod's cluster by default.
func (inv *Inv) ResolveUpstream(cluster, namespace, name, addr string) Upstream {
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		host, portText = addr, ""
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	if ip == nil {
		return Upstream{Reason: fmt.Sprintf("upstream %q is no IP address", addr)}
	}
	if ip.IsLoopback() || ip.IsUnspecified() {
		return Upstream{Kind: UpstreamOwn, Cluster: cluster}
	}
	host = ip.String()
	var port int32
	if n, err := strconv.ParseUint(portText, 10, 16); err == nil {
		port = int32(n)
	}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	if self, ok := inv.pods[cluster+"/"+namespace+"/"+name]; ok && self.HasIP(host) {
		return Upstream{Kind: UpstreamOwn, Cluster: cluster}
	}
	networks := inv.networksCached()
	for i := range inv.gateways {
		if g := &inv.gateways[i]; g.Has(host, port) {
			return inv.behindGatewayLocked(g, networks)
		}
	}
	from := networks[cluster]
	var live, all []*Pod
	for _, p := range inv.pods {
		if !p.HasIP(host) {
			continue
		}
		if pn := cmp.Or(p.Network, networks[p.Cluster]); from != "" && pn != from {
			continue
		}
		all = append(all, p)
		if p.Deleted == nil {
			live = append(live, p)
		}
	}
	// An IP a deleted pod had and a new pod of the same network has now is
	// the new pod's.
	pick := all
	if len(all) > 1 && len(live) == 1 {
		pick = live
	}
	switch len(pick) {
	case 1:
		return Upstream{Kind: UpstreamPod, Pod: *pick[0], Cluster: pick[0].Cluster}
	case 0:
		where := "no observed pod or network gateway has it"
		if from != "" {
			where = "no observed pod on network " + from + " or network gateway has it"
		}
		return Upstream{Reason: fmt.Sprintf("upstream %s: %s", addr, where)}
	}
	names := make([]string, 0, len(pick))
	for _, p := range pick {
		names = append(names, p.Key())
	}
	slices.Sort(names)
	return Upstream{Reason: fmt.Sprintf("upstream %s: pods %s all have this IP; label each cluster's network (%s on the pods or on the east-west gateway Service) so that the address resolves on the logging pod's network",
		addr, strings.Join(names, ", "), NetworkLabel)}
}

func (inv *Inv) behindGatewayLocked(g *Gateway, networks map[string]string) Upstream {
	if g.Network == "" {
		return Upstream{Gateway: g, Reason: fmt.Sprintf("%s has no %s label: the cluster behind it is unknown", g, NetworkLabel)}
	}
	var behind []string
	for _, c := range inv.clusters {
		if networks[c.Name] == g.Network {
			behind = append(behind, c.Name)
		}
	}
	switch len(behind) {
	case 1:
		return Upstream{Kind: UpstreamCluster, Cluster: behind[0], Gateway: g}
	case 0:
		return Upstream{Gateway: g, Reason: fmt.Sprintf("%s: no cluster of the run is on network %s", g, g.Network)}
	}
	return Upstream{Gateway: g, Reason: fmt.Sprintf("%s: clusters %s share network %s, and the line does not say which served it", g, strings.Join(behind, ", "), g.Network)}
}
