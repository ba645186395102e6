package meshconfig

import (
	"slices"
	"testing"

	"github.com/mesh-verify/mesh-verify/kube/access"
)

func TestPermissionsPerKind(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		kind      string
		want, not []string
	}{
		{KindVirtualService, []string{"get virtualservices.networking.istio.io", "list destinationrules.networking.istio.io", "get services", "list pods"}, []string{"list secrets", "get meshhttproutes.kuma.io"}},
		{KindMeshHTTPRoute, []string{"get meshhttproutes.kuma.io"}, []string{"list pods", "get trafficroutes.kuma.io"}},
		{KindTrafficRoute, []string{"get trafficroutes.kuma.io"}, []string{"get meshhttproutes.kuma.io"}},
		{KindSkupper, []string{"list links.skupper.io", "list secrets", "list pods", "list connectors.skupper.io", "list listeners.skupper.io", "get configmaps"}, []string{"get services", "list configmaps"}},
		{KindService, []string{"get services", "list pods"}, []string{"list secrets", "get virtualservices.networking.istio.io"}},
	} {
		var have []string
		for _, p := range Permissions(tc.kind) {
			have = append(have, p.String())
			if p.Verb != "get" && p.Verb != "list" {
				t.Errorf("%s: %s: only get and list are needed", tc.kind, p)
			}
		}
		for _, w := range tc.want {
			if !slices.Contains(have, w) {
				t.Errorf("%s: no %s in %v", tc.kind, w, have)
			}
		}
		for _, n := range tc.not {
			if slices.Contains(have, n) {
				t.Errorf("%s: %s is not needed", tc.kind, n)
			}
		}
	}
}

func TestNeeds(t *testing.T) {
	t.Parallel()
	got := Needs(Ref{Kind: KindVirtualService, Namespace: "demo", Name: "r", Cluster: "c2"}, []string{"c1", "c2"})
	want := []access.Need{
		{Cluster: "c2", Namespace: "demo", Feature: access.FeatureMeshConfig, TargetKind: KindVirtualService},
		{Cluster: "c1", Namespace: "demo", Feature: access.FeatureMeshConfig, TargetKind: KindService},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Needs = %v, want %v", got, want)
	}
	if got := Needs(Ref{Kind: KindTrafficRoute, Name: "r"}, []string{"c1", "c2"}); len(got) != 1 || got[0].Cluster != "c1" {
		t.Errorf("TrafficRoute needs %v, want the first cluster's only", got)
	}
}
