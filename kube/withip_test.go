package kube

import (
	"fmt"
	"slices"
	"testing"
)

// WithIP is the address index an access log's upstream is resolved by:
// every address of a dual-stack pod, several pods where the clusters'
// pod networks overlap (a multi-network mesh), never a deleted pod, and
// current after a change of the inventory (the cached index is dropped).
func TestWithIP(t *testing.T) {
	t.Parallel()
	inv := NewInventory([]string{"c1", "c2"}, []Pod{
		{Cluster: "c2", Namespace: "sample", Name: "b", UID: "b", IP: "10.0.0.5"},
		{Cluster: "c1", Namespace: "sample", Name: "a", UID: "a", IP: "10.0.0.5"},
		{Cluster: "c1", Namespace: "sample", Name: "dual", UID: "d", IP: "10.0.0.7", IPs: []string{"10.0.0.7", "fd00::7"}},
	}, nil)
	names := func(pods []Pod) []string {
		var out []string
		for _, p := range pods {
			out = append(out, p.Key())
		}
		return out
	}
	for _, tc := range []struct {
		ip   string
		want []string
	}{
		{"10.0.0.5", []string{"c1/sample/a", "c2/sample/b"}}, // cluster order, then name
		{"fd00::7", []string{"c1/sample/dual"}},
		{"10.0.0.7", []string{"c1/sample/dual"}},
		{"10.0.0.9", nil},
		{"", nil},
	} {
		if got := names(inv.WithIP(tc.ip)); !slices.Equal(got, tc.want) {
			t.Errorf("WithIP(%q) = %v, want %v", tc.ip, got, tc.want)
		}
	}
	// c2's pod deleted, a new pod in c1 takes 10.0.0.9: the index follows.
	inv.apply(Pod{Cluster: "c2", Namespace: "sample", Name: "b", UID: "b", IP: "10.0.0.5"}, true)
	inv.apply(Pod{Cluster: "c1", Namespace: "sample", Name: "new", UID: "n", IP: "10.0.0.9"}, false)
	if got := names(inv.WithIP("10.0.0.5")); !slices.Equal(got, []string{"c1/sample/a"}) {
		t.Errorf("after c2's pod was deleted: WithIP = %v, want c1's only", got)
	}
	if got := names(inv.WithIP("10.0.0.9")); !slices.Equal(got, []string{"c1/sample/new"}) {
		t.Errorf("after a pod was added: WithIP = %v", got)
	}
	// The same answer as a scan of Pods, the rule it replaces.
	for _, ip := range []string{"10.0.0.5", "10.0.0.7", "fd00::7", "10.0.0.9"} {
		var scan []string
		for _, p := range inv.Pods() {
			if p.HasIP(ip) {
				scan = append(scan, p.Key())
			}
		}
		if got := names(inv.WithIP(ip)); !slices.Equal(got, scan) {
			t.Errorf("WithIP(%q) = %v, a scan of Pods gives %v", ip, got, scan)
		}
	}
}

// BenchmarkPodByAddress is an access log's address lookup per line over
// 10,000 pods: the index against the scan of Pods it replaced.
func BenchmarkPodByAddress(b *testing.B) {
	pods := make([]Pod, 10000)
	for i := range pods {
		pods[i] = Pod{Cluster: fmt.Sprint("c", i%2+1), Namespace: "sample", Name: fmt.Sprint("p", i), UID: fmt.Sprint(i), IP: fmt.Sprintf("10.%d.%d.%d", i%2, i/256%256, i%256)}
	}
	inv := NewInventory([]string{"c1", "c2"}, pods, nil)
	b.Run("index", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if len(inv.WithIP(pods[i%len(pods)].IP)) != 1 {
				b.Fatal("not found")
			}
		}
	})
	b.Run("scan", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			n := 0
			for _, p := range inv.Pods() {
				if p.HasIP(pods[i%len(pods)].IP) {
					n++
				}
			}
			if n != 1 {
				b.Fatal("not found")
			}
		}
	})
}
