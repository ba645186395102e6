package kube

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// The Service gen-eastwest-gateway.sh installs is a gateway of its network
// on 15443, under its load balancer IP, its cluster IP and the gateway
// pods' IPs; the node port takes the same traffic.
func TestGatewayFromService(t *testing.T) {
	t.Parallel()
	raw, err := os.ReadFile("testdata/eastwestgateway-service.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var svc corev1.Service
	if err := yaml.UnmarshalStrict(raw, &svc); err != nil {
		t.Fatal(err)
	}
	eps := []discoveryv1.EndpointSlice{{Endpoints: []discoveryv1.Endpoint{{Addresses: []string{"10.20.0.5"}}}}}
	g, err := gatewayFromService("c2", &svc, eps)
	if err != nil {
		t.Fatal(err)
	}
	if g.Network != "network2" || !slices.Equal(g.Addresses, []string{"172.18.255.2", "10.96.20.7", "10.20.0.5"}) ||
		!slices.Equal(g.Ports, []int32{15443, 30443}) {
		t.Fatalf("gateway = %+v", g)
	}
	if !g.Has("172.18.255.2", 15443) || !g.Has("10.20.0.5", 0) || g.Has("172.18.255.2", 15021) {
		t.Fatal("Has: the gateway port decides")
	}
	svc.Labels[GatewayPortLabel] = "35443"
	if g, err = gatewayFromService("c2", &svc, nil); err != nil || !slices.Equal(g.Ports, []int32{35443}) {
		t.Fatalf("gateway-port label: %+v %v", g, err)
	}
	svc.Labels[GatewayPortLabel] = "tls"
	if _, err = gatewayFromService("c2", &svc, nil); err == nil || !strings.Contains(err.Error(), "service istio-system/istio-eastwestgateway: label networking.istio.io/gatewayPort=\"tls\"") {
		t.Fatalf("bad gateway-port label: %v", err)
	}
}

// ResolveUpstream on the addresses of istio.io's multicluster gateways
// task (content/en/docs/setup/install/multicluster/gateways, 2018): the
// main cluster's sleep 10.10.0.89 logs helloworld-v1 at 10.10.0.90:5000
// and the remote cluster's gateway at 192.23.120.32:15443. Here the
// remote network reuses the main one's pod CIDR, so 10.10.0.90 is also a
// pod of c2: only the pod of the logging pod's network may be meant.
func TestResolveUpstream(t *testing.T) {
	t.Parallel()
	gone := time.Now()
	pod := func(cluster, name, network string, ips ...string) Pod {
		return Pod{Cluster: cluster, Namespace: "sample", Name: name, IP: ips[0], IPs: ips, Network: network}
	}
	gw := func(cluster, network, ip string) Gateway {
		return Gateway{Cluster: cluster, Namespace: "istio-system", Name: "istio-eastwestgateway", Network: network,
			Addresses: []string{ip}, Ports: []int32{15443}}
	}
	multi := []Pod{
		pod("c1", "sleep", "network1", "10.10.0.89", "fd00::89"),
		pod("c1", "helloworld-v1", "network1", "10.10.0.90"),
		pod("c2", "helloworld-v2", "network2", "10.10.0.90"),
		pod("c2", "sleep", "network2", "10.10.0.89"),
	}
	multiGW := []Gateway{gw("c1", "network1", "192.168.1.246"), gw("c2", "network2", "192.23.120.32")}
	// Flat: one network, distinct pod CIDRs, no labels at all.
	flat := []Pod{pod("c1", "sleep", "", "10.10.0.89"), pod("c1", "helloworld-v1", "", "10.10.0.90"),
		pod("c2", "helloworld-v2", "", "10.32.0.9")}
	// The lab's kwok pods: one flat network that reuses addresses.
	reused := []Pod{pod("c1", "sleep", "", "10.0.0.1"), pod("c1", "callme", "", "10.0.0.2"), pod("c2", "callme", "", "10.0.0.2")}
	deleted := pod("c1", "helloworld-old", "", "10.10.0.77")
	deleted.Deleted = &gone
	for _, c := range []struct {
		name     string
		pods     []Pod
		gws      []Gateway
		from     string // cluster/pod
		addr     string
		kind     UpstreamKind
		want     string // cluster/pod, or a part of the reason
		clusters []string
	}{
		{"remote network's gateway", multi, multiGW, "c1/sleep", "192.23.120.32:15443", UpstreamCluster, "c2/", nil},
		{"other direction", multi, multiGW, "c2/sleep", "192.168.1.246:15443", UpstreamCluster, "c1/", nil},
		{"gateway address on another port", multi, multiGW, "c1/sleep", "192.23.120.32:15021", UpstreamUnresolved, "no observed pod on network network1", nil},
		{"own network's pod, CIDR reused", multi, multiGW, "c1/sleep", "10.10.0.90:5000", UpstreamPod, "c1/helloworld-v1", nil},
		{"same IP seen from the other network", multi, multiGW, "c2/sleep", "10.10.0.90:5000", UpstreamPod, "c2/helloworld-v2", nil},
		{"own IPv6 address, dual stack", multi, multiGW, "c1/sleep", "[fd00::89]:15006", UpstreamOwn, "c1/", nil},
		{"loopback", multi, multiGW, "c1/sleep", "127.0.0.1:80", UpstreamOwn, "c1/", nil},
		{"not an address", multi, multiGW, "c1/sleep", "helloworld:5000", UpstreamUnresolved, "is no IP address", nil},
		{"network shared by two clusters", multi, multiGW, "c1/sleep", "192.23.120.32:15443", UpstreamUnresolved, "clusters c2, c3 share network network2",
			[]string{"c1", "c2", "c3"}},
		{"unlabelled gateway", multi, []Gateway{gw("c2", "", "192.23.120.32")}, "c1/sleep", "192.23.120.32:15443", UpstreamUnresolved, "has no topology.istio.io/network label", nil},
		{"flat network, remote pod", flat, nil, "c1/sleep", "10.32.0.9:5000", UpstreamPod, "c2/helloworld-v2", nil},
		{"flat network, local pod", flat, nil, "c1/sleep", "10.10.0.90:5000", UpstreamPod, "c1/helloworld-v1", nil},
		{"unknown address", flat, nil, "c1/sleep", "10.99.0.1:5000", UpstreamUnresolved, "no observed pod or network gateway has it", nil},
		{"reused address, no network labels", reused, nil, "c1/sleep", "10.0.0.2:8080", UpstreamUnresolved, "pods c1/sample/callme, c2/sample/callme all have this IP", nil},
		{"deleted pod's IP taken by a new pod", append(slices.Clone(flat), deleted, pod("c1", "helloworld-new", "", "10.10.0.77")), nil, "c1/sleep", "10.10.0.77:5000", UpstreamPod, "c1/helloworld-new", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			clusters := c.clusters
			if clusters == nil {
				clusters = []string{"c1", "c2"}
			}
			pods := c.pods
			if len(clusters) == 3 {
				pods = append(slices.Clone(pods), pod("c3", "helloworld-v3", "network2", "10.10.0.91"))
			}
			inv := NewInventory(clusters, pods, c.gws)
			fromCluster, fromPod, _ := strings.Cut(c.from, "/")
			u := inv.ResolveUpstream(fromCluster, "sample", fromPod, c.addr)
			if u.Kind != c.kind {
				t.Fatalf("kind %d, want %d (%+v)", u.Kind, c.kind, u)
			}
			switch u.Kind {
			case UpstreamUnresolved:
				if !strings.Contains(u.Reason, c.want) {
					t.Fatalf("reason %q, want %q", u.Reason, c.want)
				}
			case UpstreamPod:
				if got := u.Pod.Cluster + "/" + u.Pod.Name; got != c.want {
					t.Fatalf("pod %s, want %s", got, c.want)
				}
			default:
				if got := u.Cluster + "/"; got != c.want {
					t.Fatalf("cluster %s, want %s", got, c.want)
				}
			}
		})
	}
}

// Dual-stack pods have two IPs, and native sidecars restart as init
// containers: the inventory keeps both.
func TestPodIPsAndInitContainerRestarts(t *testing.T) {
	t.Parallel()
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "callme-v1-0", Namespace: "default", Labels: map[string]string{NetworkLabel: "network1"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "callme"}}, InitContainers: []corev1.Container{{Name: "istio-proxy"}}},
		Status: corev1.PodStatus{
			PodIP:                 "10.244.1.7",
			PodIPs:                []corev1.PodIP{{IP: "10.244.1.7"}, {IP: "fd00:10:244:1::7"}},
			ContainerStatuses:     []corev1.ContainerStatus{{Name: "callme", RestartCount: 1}},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "istio-proxy", RestartCount: 2}},
		},
	}
	p := podFromAPI("c1", "callme", in)
	if !slices.Equal(p.IPs, []string{"10.244.1.7", "fd00:10:244:1::7"}) || !p.HasIP("fd00:10:244:1::7") || p.HasIP("") {
		t.Fatalf("IPs = %v", p.IPs)
	}
	if p.Restarts != 3 || p.Network != "network1" {
		t.Fatalf("restarts %d, network %q", p.Restarts, p.Network)
	}
	// An API server that fills only podIP still gives one address.
	in.Status.PodIPs = nil
	if p := podFromAPI("c1", "callme", in); !slices.Equal(p.IPs, []string{"10.244.1.7"}) {
		t.Fatalf("IPs without podIPs = %v", p.IPs)
	}
	inv := &Inv{clusters: []*Cluster{{Name: "c1"}}, pods: map[string]*Pod{}}
	inv.apply(podFromAPI("c1", "callme", in), false)
	in.Status.InitContainerStatuses[0].RestartCount = 3
	if ev := inv.apply(podFromAPI("c1", "callme", in), false); ev == nil || ev.Type != PodRestarted {
		t.Fatalf("a native sidecar's restart: event %+v", ev)
	}
}
