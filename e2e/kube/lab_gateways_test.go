package kube_test

import (
	"context"
	"slices"
	"testing"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// The east-west gateway Service gen-eastwest-gateway.sh installs (labels
// and ports as the script writes them), its load balancer's address set
// through the status subresource as a cloud controller would, and its
// EndpointSlice, in a real API server: EastWestGateways lists it with
// every address a remote sidecar may name, and no other Service.
func TestLabEastWestGateways(t *testing.T) {
	lab := labtest.Clusters(t, "c2")
	c := lab.Connect(t, "c2")
	lab.Apply(t, "c2", "apiVersion: v1\nkind: Namespace\nmetadata: {name: istio-system}\n")
	lab.Apply(t, "c2", `apiVersion: v1
kind: Service
metadata:
  name: istio-eastwestgateway
  namespace: istio-system
  labels: {app: istio-eastwestgateway, istio: eastwestgateway, topology.istio.io/network: network2}
spec:
  type: LoadBalancer
  selector: {app: istio-eastwestgateway, istio: eastwestgateway}
  ports:
  - {name: status-port, port: 15021, targetPort: 15021}
  - {name: tls, port: 15443, targetPort: 15443}
---
apiVersion: v1
kind: Service
metadata: {name: istiod, namespace: istio-system, labels: {app: istiod}}
spec:
  selector: {app: istiod}
  ports: [{name: grpc-xds, port: 15010}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: istio-eastwestgateway-abcde
  namespace: istio-system
  labels: {kubernetes.io/service-name: istio-eastwestgateway}
addressType: IPv4
ports: [{name: tls, port: 15443}]
endpoints: [{addresses: [10.20.0.5]}]
`)
	lab.Kubectl(t, "c2", "-n", "istio-system", "patch", "service", "istio-eastwestgateway", "--subresource=status", "--type=merge",
		"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"172.18.255.2"}]}}}`)
	gws, err := kube.EastWestGateways(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(gws) != 1 {
		t.Fatalf("gateways %+v, want the east-west gateway only", gws)
	}
	g := gws[0]
	if g.Cluster != "c2" || g.Name != "istio-eastwestgateway" || g.Network != "network2" ||
		!slices.Contains(g.Addresses, "172.18.255.2") || !slices.Contains(g.Addresses, "10.20.0.5") || len(g.Addresses) != 3 ||
		!slices.Contains(g.Ports, 15443) {
		t.Fatalf("gateway %+v", g)
	}
	inv := kube.NewInventory([]string{"c1", "c2"}, nil, gws)
	if u := inv.ResolveUpstream("c1", "sample", "sleep", "172.18.255.2:15443"); u.Kind != kube.UpstreamCluster || u.Cluster != "c2" {
		t.Fatalf("upstream through the gateway: %+v", u)
	}
}
