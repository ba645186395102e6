package kube

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Istio's multi-network labels (pilot/pkg/serviceregistry/kube/controller/
// network.go): a Service labelled with a network is that network's
// gateway, reached on port 15443 unless the gateway-port label says
// otherwise; samples/multicluster/gen-eastwest-gateway.sh also labels it
// istio=eastwestgateway.
const (
	NetworkLabel     = "topology.istio.io/network"
	GatewayPortLabel = "networking.istio.io/gatewayPort"
	eastWestSelector = "istio=eastwestgateway"
	// DefaultGatewayPort is the east-west gateway's mTLS port: what an
	// outbound sidecar's access log names as upstream for a request served
	// on another network.
	DefaultGatewayPort = 15443
)

// Gateway is a network gateway of one cluster (Istio's east-west gateway):
// the addresses under which the other networks' sidecars reach the
// cluster, and the network it fronts.
type Gateway struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Network is the Service's topology.istio.io/network label ("" when
	// only istio=eastwestgateway marks it).
	Network string `json:"network,omitempty"`
	// Addresses are the IPs a remote sidecar may name: the load balancer's
	// ingress IPs, external IPs, cluster IPs and the gateway pods' IPs.
	Addresses []string `json:"addresses"`
	// Ports are the ports those addresses take the cross-network traffic
	// on: the gateway port and, for it, the Service's target and node port.
	Ports []int32 `json:"ports"`
}

func (g Gateway) String() string {
	return fmt.Sprintf("gateway %s/%s in cluster %s (network %s)", g.Namespace, g.Name, g.Cluster, cmp.Or(g.Network, "unlabelled"))
}

// Has reports whether addr (an IP, or IP:port) is one of the gateway's
// cross-network addresses; a port, when given, must be one of Ports.
func (g Gateway) Has(ip string, port int32) bool {
	return slices.Contains(g.Addresses, ip) && (port == 0 || slices.Contains(g.Ports, port))
}

// EastWestGateways lists a cluster's network gateways: Services labelled
// with a network or istio=eastwestgateway in any namespace, with the pod
// IPs of their EndpointSlices. A caller that may not list them (RBAC) gets
// the *ClusterError and decides; nothing is guessed.
func EastWestGateways(ctx context.Context, c *Cluster) ([]Gateway, error) {
	byKey := map[string]*corev1.Service{}
	for _, sel := range []string{NetworkLabel, eastWestSelector} {
		list, err := c.Client.CoreV1().Services(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return nil, c.wrap("list services labelled "+sel+" in all namespaces", err)
		}
		for i := range list.Items {
			s := &list.Items[i]
			byKey[s.Namespace+"/"+s.Name] = s
		}
	}
	var out []Gateway
	for _, svc := range byKey {
		eps, err := c.Client.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx,
			metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + svc.Name})
		if err != nil {
			return nil, c.wrap("list endpointslices of service "+svc.Namespace+"/"+svc.Name, err)
		}
		g, err := gatewayFromService(c.Name, svc, eps.Items)
		if err != nil {
			return nil, err
		}
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b Gateway) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	return out, nil
}

// gatewayFromService reads a gateway Service and its EndpointSlices. A
// gateway-port label that is no port number is an error naming the
// Service, as istiod logs it instead of using the gateway.
func gatewayFromService(cluster string, svc *corev1.Service, slicesOf []discoveryv1.EndpointSlice) (Gateway, error) {
	g := Gateway{Cluster: cluster, Namespace: svc.Namespace, Name: svc.Name, Network: svc.Labels[NetworkLabel]}
	port := int32(DefaultGatewayPort)
	if v, ok := svc.Labels[GatewayPortLabel]; ok {
		n, err := strconv.ParseUint(v, 10, 16)
		if err != nil || n == 0 {
			return Gateway{}, fmt.Errorf("cluster %s: service %s/%s: label %s=%q is no port number", cluster, svc.Namespace, svc.Name, GatewayPortLabel, v)
		}
		port = int32(n)
	}
	add := func(ip string) {
		if ip != "" && ip != corev1.ClusterIPNone && !slices.Contains(g.Addresses, ip) {
			g.Addresses = append(g.Addresses, ip)
		}
	}
	for _, in := range svc.Status.LoadBalancer.Ingress {
		add(in.IP)
	}
	for _, ip := range svc.Spec.ExternalIPs {
		add(ip)
	}
	add(svc.Spec.ClusterIP)
	for _, ip := range svc.Spec.ClusterIPs {
		add(ip)
	}
	for _, es := range slicesOf {
		for _, ep := range es.Endpoints {
			for _, ip := range ep.Addresses {
				add(ip)
			}
		}
	}
	g.Ports = []int32{port}
	for _, sp := range svc.Spec.Ports {
		if sp.Port != port {
			continue
		}
		if sp.TargetPort.IntVal > 0 && !slices.Contains(g.Ports, sp.TargetPort.IntVal) {
			g.Ports = append(g.Ports, sp.TargetPort.IntVal)
		}
		if sp.NodePort > 0 && !slices.Contains(g.Ports, sp.NodePort) {
			g.Ports = append(g.Ports, sp.NodePort)
		}
	}
	return g, nil
}
