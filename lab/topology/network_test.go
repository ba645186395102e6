package topology

import (
	"slices"
	"strings"
	"testing"
)

// TestNetworks renders a multi-network topology: each cluster gets the
// east-west gateway Service gen-eastwest-gateway.sh installs, labelled
// with its network (what kube.EastWestGateways lists), and its pods the
// network label; a topology without networks gets neither.
func TestNetworks(t *testing.T) {
	t.Parallel()
	src := strings.Replace(good, "clusters: [c1, c2]\n", "clusters: [c1, c2]\nnetworks: {c1: network1, c2: network2}\n", 1)
	top, err := Parse("t.yaml", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"c1", "c2"} {
		want := map[string]string{"c1": "network1", "c2": "network2"}[c]
		if !slices.Contains(top.Namespaces(c), EastWestGatewayNamespace) {
			t.Errorf("%s: namespaces %v lack %s", c, top.Namespaces(c), EastWestGatewayNamespace)
		}
		var gw int
		for _, s := range top.ServiceObjects(c) {
			if s.Name != EastWestGatewayName {
				continue
			}
			gw++
			if s.Namespace != EastWestGatewayNamespace || s.Labels["istio"] != "eastwestgateway" || s.Labels[NetworkLabel] != want ||
				len(s.Spec.Ports) != 1 || s.Spec.Ports[0].Port != EastWestGatewayPort {
				t.Errorf("%s: gateway Service %s/%s labels %v ports %v", c, s.Namespace, s.Name, s.Labels, s.Spec.Ports)
			}
		}
		if gw != 1 {
			t.Errorf("%s: %d east-west gateway Services, want 1", c, gw)
		}
		for _, d := range top.Deployments(c) {
			if got := d.Spec.Template.Labels[NetworkLabel]; got != want {
				t.Errorf("%s: Deployment %s's pods labelled network %q, want %q", c, d.Name, got, want)
			}
		}
	}
	flat, err := Parse("t.yaml", []byte(good))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range flat.ServiceObjects("c1") {
		if s.Name == EastWestGatewayName {
			t.Errorf("a topology without networks got %s/%s", s.Namespace, s.Name)
		}
	}
}

// TestNetworksInvalid: every cluster needs a network, and only clusters.
func TestNetworksInvalid(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ networks, want string }{
		{"{c1: network1}", `networks.c2: want every cluster's network, a name like network1, got ""`},
		{"{c1: network1, c2: Net_2}", `networks.c2: want every cluster's network, a name like network1, got "Net_2"`},
		{"{c1: n1, c2: n2, c9: n3}", `networks.c9: cluster "c9" is not in clusters [c1 c2]`},
	} {
		src := strings.Replace(good, "clusters: [c1, c2]\n", "clusters: [c1, c2]\nnetworks: "+c.networks+"\n", 1)
		_, err := Parse("t.yaml", []byte(src))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("networks %s: error %v, want %q", c.networks, err, c.want)
		}
	}
}
