package daemon

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

func TestDescribePolicy(t *testing.T) {
	for _, c := range []struct {
		p    meshsim.Policy
		want string
	}{
		{meshsim.Policy{Mode: "balanced", Costs: map[string]float64{"c3": 2, "c2": 4}}, "balanced costs c2=4,c3=2 per-connection"},
		{meshsim.Policy{Mode: "weighted", WeightBy: "version", Weights: map[string]float64{"v1": 100},
			Mirror: &meshsim.Mirror{Version: "v2", Percent: 50}}, "weighted weights by version v1=100 mirror 50% to version v2"},
		{meshsim.Policy{Mode: "failover", Order: []string{"c1", "c2"}}, "failover order c1>c2"},
		{meshsim.Policy{Mode: "per-pod", PerConnection: true}, "per-pod per-connection"},
	} {
		if got := describePolicy(c.p); got != c.want {
			t.Errorf("describePolicy(%+v) = %q, want %q", c.p, got, c.want)
		}
	}
}

// The status file is replaced atomically and reads back as written,
// sorted by pod.
func TestStatusRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadStatus(dir); !os.IsNotExist(err) {
		t.Fatalf("ReadStatus of an empty dir = %v, want not exist", err)
	}
	in := &Status{PID: 42, Topology: "skupper-1", Synced: true, Pods: []Pod{
		{Cluster: "c3", Namespace: "ns", Name: "b", Ready: true, Verified: true},
		{Cluster: "c2", Namespace: "ns", Name: "a", Backends: []string{"c2/x"}, Routed: &Routed{Requests: 3, ByCluster: map[string]int64{"c2": 3}}},
	}}
	if err := writeStatus(dir, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadStatus(dir)
	if err != nil {
		t.Fatal(err)
	}
	if out.PID != 42 || len(out.Pods) != 2 || out.Pods[0].Key() != "c2/ns/a" || out.Pods[0].Routed.ByCluster["c2"] != 3 || !out.Pods[1].Verified {
		t.Errorf("round trip = %+v", out)
	}
	if left, _ := filepath.Glob(filepath.Join(dir, ".status-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}

// Each entry pod's simulator seed is a function of the lab's seed and of
// what names the pod stably; any difference gives another seed.
func TestEntrySeed(t *testing.T) {
	base := entrySeed(42, "istio-proxy", "c1", 0)
	if again := entrySeed(42, "istio-proxy", "c1", 0); again != base {
		t.Fatalf("entrySeed is not stable: %d then %d", base, again)
	}
	seen := map[uint64]string{base: "base"}
	for name, s := range map[string]uint64{
		"another lab seed":        entrySeed(43, "istio-proxy", "c1", 0),
		"another entry":           entrySeed(42, "skupper-router", "c1", 0),
		"another cluster":         entrySeed(42, "istio-proxy", "c2", 0),
		"another instance":        entrySeed(42, "istio-proxy", "c1", 1),
		"names that run together": entrySeed(42, "istio-proxyc", "1", 0),
	} {
		if prev, dup := seen[s]; dup {
			t.Errorf("%s gives seed %d, as %s does", name, s, prev)
		}
		seen[s] = name
	}
}
