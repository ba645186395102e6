package lab

import (
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

func TestReadiness(t *testing.T) {
	pod := func(cluster, name string, ready, verified bool, errMsg string) daemon.Pod {
		return daemon.Pod{Cluster: cluster, Namespace: "ns", Name: name, Ready: ready, Verified: verified, Error: errMsg}
	}
	clusters := []string{"c1", "c2"}
	want := map[string]int{"c1": 1, "c2": 2}
	cases := []struct {
		name string
		st   daemon.Status
		ok   bool
		why  string
	}{
		{"not synced", daemon.Status{}, false, "still listing"},
		{"all serving", daemon.Status{Synced: true, Pods: []daemon.Pod{
			pod("c1", "r", true, true, ""), pod("c2", "a", true, true, ""), pod("c2", "b", true, true, "")}}, true, ""},
		{"one unverified", daemon.Status{Synced: true, Pods: []daemon.Pod{
			pod("c1", "r", true, true, ""), pod("c2", "a", true, false, ""), pod("c2", "b", true, true, "")}}, false, "cluster c2 has 1 of 2 pods serving"},
		{"an extra pod", daemon.Status{Synced: true, Pods: []daemon.Pod{
			pod("c1", "r", true, true, ""), pod("c1", "s", true, true, ""), pod("c2", "a", true, true, ""), pod("c2", "b", true, true, "")}}, false, "cluster c1 has 2 of 1"},
		{"an error", daemon.Status{Synced: true, Pods: []daemon.Pod{
			pod("c1", "r", true, false, "no forward found"), pod("c2", "a", true, true, ""), pod("c2", "b", true, true, "")}}, false, "pod c1/ns/r: no forward found"},
	}
	for _, c := range cases {
		ok, why := readiness(clusters, want, &c.st)
		if ok != c.ok || !strings.Contains(why, c.why) {
			t.Errorf("%s: readiness = %v, %q; want %v, %q", c.name, ok, why, c.ok, c.why)
		}
	}
}
