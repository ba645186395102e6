package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
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

// TestWaitReadyChecksKwokOfAClusterWithAnUnreadablePod: a pod the daemon
// cannot read through the API server (PodStatus.Unverified) makes the wait
// check that cluster's kwok controller once, and a check that fails ends
// the wait with the pod and the cluster named. The daemon is played by
// status files written here; the kwok check by heal (the real one,
// kwok.(*Lab).EnsureWatches, has its own lab test in lab/kwok).
func TestWaitReadyChecksKwokOfAClusterWithAnUnreadablePod(t *testing.T) {
	t.Parallel()
	topo, err := topologies.Builtin("cilium-affinity")
	if err != nil {
		t.Fatal(err)
	}
	var pods []daemon.Pod
	for c, n := range topo.ExpectedPods() {
		for i := range n {
			pods = append(pods, daemon.Pod{Cluster: c, Namespace: "default", Name: fmt.Sprintf("p%d", i), Ready: true, Verified: true})
		}
	}
	write := func(dir string, unverified bool) {
		t.Helper()
		ps := slices.Clone(pods)
		if unverified {
			ps[0].Verified, ps[0].Unverified = false, "unreadable for 15s: log target not found"
		}
		b, err := json.Marshal(daemon.Status{PID: 7, Synced: true, Pods: ps})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, daemon.StatusFile), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	alive := make(chan struct{}) // the daemon never exits here
	t.Run("healed", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(dir, true)
		var healed []string
		heal := func(cluster string) error {
			healed = append(healed, cluster)
			write(dir, false) // a restarted kwok serves the pod's logs
			return nil
		}
		if _, err := waitReady(context.Background(), dir, topo, 7, alive, 10*time.Second, heal); err != nil {
			t.Fatal(err)
		}
		if want := []string{pods[0].Cluster}; !slices.Equal(healed, want) {
			t.Fatalf("healed %v, want %v", healed, want)
		}
	})
	t.Run("check fails", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		write(dir, true)
		_, err := waitReady(context.Background(), dir, topo, 7, alive, 10*time.Second, func(string) error { return errors.New("kwok does not serve the canary") })
		if err == nil || !strings.Contains(err.Error(), pods[0].Key()) || !strings.Contains(err.Error(), "kwok controller of cluster "+pods[0].Cluster) {
			t.Fatalf("err = %v", err)
		}
	})
}
