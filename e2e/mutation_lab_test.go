package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// routeTimeout is how soon after a kubectl patch the lab's data plane must
// route by the patched object ("within seconds").
const routeTimeout = 5 * time.Second

// TestMutationsFlipVerdicts changes a mesh object of a running lab with
// kubectl patch, as a user changing the mesh's configuration does, and
// checks that the catalog scenario of the seed judges the new routing:
// the verdict flips the way the change implies. The lab's data plane
// routes by the object the daemon watches, so the scenario, unchanged,
// PASSes before and FAILs after.
func TestMutationsFlipVerdicts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, topology, scenario string
		// cluster and patch: kubectl patch arguments.
		cluster string
		patch   []string
		// policy is a substring of the entry's policy in the lab status
		// once the daemon applied the change.
		policy string
	}{
		{"mirrorPercentage 50 -> 10", "istio-mirror", "istio-mirror", "c1",
			[]string{"virtualservice", "callme-service-route", "--type", "json", "-p", `[{"op":"replace","path":"/spec/http/0/mirrorPercentage/value","value":10}]`},
			"mirror 10% to version v2"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			l := mv.Lab(t, e2etest.LabSpec{Topology: c.topology})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			f := filepath.Join("..", "scenarios", "catalog", c.scenario+".yaml")
			run := func(want assert.Verdict) {
				t.Helper()
				r := runBinary(t, ctx, "run", f, "--kubeconfig", l.Kubeconfig)
				if r.Report() == nil {
					t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
				}
				if got := r.Report().Verdict; got != want {
					t.Fatalf("verdict %s, want %s\n%s", got, want, r.Stdout)
				}
			}
			run(assert.Pass)
			patched := time.Now()
			e2etest.Kubectl(t, l, c.cluster, append([]string{"patch"}, c.patch...)...)
			took := waitPolicy(t, l, c.policy, patched)
			t.Logf("%s: the data plane routes by the patched object %v after the patch", c.name, took.Round(time.Millisecond))
			run(assert.Fail)
		})
	}
}

// waitPolicy waits until an entry pod's policy in the lab status contains
// want, at most routeTimeout after since, and returns how long it took.
func waitPolicy(t *testing.T, l *lab.Lab, want string, since time.Time) time.Duration {
	t.Helper()
	for {
		st, err := daemon.ReadStatus(l.Dir)
		if err == nil {
			for _, p := range st.Pods {
				if strings.Contains(p.Policy, want) {
					return time.Since(since)
				}
			}
		}
		if time.Since(since) > routeTimeout {
			var got []string
			if st != nil {
				for _, p := range st.Pods {
					if p.Policy != "" {
						got = append(got, p.Name+": "+p.Policy)
					}
				}
			}
			t.Fatalf("no entry routes by %q %v after the patch (policies: %q; status error %v)", want, routeTimeout, got, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
