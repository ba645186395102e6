package runner

import (
	"testing"

	"github.com/mesh-verify/mesh-verify/kube"
)

// An access log's upstream address names a pod only when exactly one pod
// of the inventory has it: kwok, like clusters on separate networks, gives
// pods of different clusters the same IPs. The lab-backed half, with the
// inventory listed from real API servers, is e2e/runner
// TestPodToClusterThroughTheInventory.
func TestPodByAddress(t *testing.T) {
	t.Parallel()
	inv := kube.NewInventory([]string{"c1", "c2"}, []kube.Pod{
		{Cluster: "c1", Namespace: "default", Name: "hw-v1-a", IP: "10.0.0.1", Version: "v1"},
		{Cluster: "c1", Namespace: "default", Name: "hw-v1-b", IP: "10.0.0.2", Version: "v1"},
		{Cluster: "c2", Namespace: "default", Name: "hw-v2-a", IP: "10.0.0.1", Version: "v2"},
		{Cluster: "c2", Namespace: "default", Name: "hw-v2-ds", IP: "10.0.0.9", IPs: []string{"10.0.0.9", "fd00::9"}, Version: "v2"},
	}, nil)
	kp := &kubePath{inv: inv}
	for _, tc := range []struct {
		addr string
		pod  string // "" when no single pod has the address
	}{
		{"10.0.0.2:8080", "c1/default/hw-v1-b"},
		{"10.0.0.2", "c1/default/hw-v1-b"},
		{"10.0.0.1:8080", ""}, // two clusters' pods share it
		{"[fd00::9]:5000", "c2/default/hw-v2-ds"},
		{"192.0.2.1:80", ""},
		{"", ""},
	} {
		id, ok := kp.ByAddress(tc.addr)
		got := ""
		if ok {
			got = id.Cluster + "/default/" + id.Pod
		}
		if got != tc.pod {
			t.Errorf("ByAddress(%q) = %q (%+v), want %q", tc.addr, got, id, tc.pod)
		}
	}
	if id, _ := kp.ByAddress("10.0.0.2:8080"); id.Version != "v1" {
		t.Errorf("version %q, want the pod's v1", id.Version)
	}
	if _, ok := (*kubePath)(nil).ByAddress("10.0.0.2:8080"); ok {
		t.Error("a run without Kubernetes resolved an address")
	}
}
