package lab

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/crds"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
)

// TestRegisterCRDsWaitsForTheFirstStatus: kubectl wait fails at once on a
// CRD that has no status.conditions yet (seen in CI right after the
// apply); registerCRDs asks again, and any other failure ends it. kubectl
// is played by a function here: the real one needs an API server that
// loses this race, which cannot be provoked on demand.
func TestRegisterCRDsWaitsForTheFirstStatus(t *testing.T) {
	t.Parallel()
	accessor := errors.New("kubectl wait (cluster c1): exit status 1: error: .status.conditions accessor error: <nil> is of the type <nil>, expected []interface{}")
	for _, c := range []struct {
		name    string
		errs    []error // what the successive waits return
		waits   int
		wantErr string
	}{
		{"no status yet, then established", []error{accessor, accessor, nil}, 3, ""},
		{"another failure", []error{errors.New("timed out waiting for the condition")}, 1, "timed out"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			waits := 0
			kubectl := func(_ context.Context, _ []byte, args ...string) (string, error) {
				if args[0] != "wait" {
					return "", nil
				}
				waits++
				return "", c.errs[min(waits-1, len(c.errs)-1)]
			}
			err := registerCRDs(context.Background(), kubectl, "c1", crds.Files())
			if waits != c.waits || (c.wantErr == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.wantErr) {
				t.Fatalf("waits %d (want %d), err %v (want %q)", waits, c.waits, err, c.wantErr)
			}
		})
	}
}

// TestCRDFilesAreTheTopologysMeshes: a lab cluster serves the CRDs of the
// meshes its topology routes by and its manifests use, and no other
// mesh's, as a cluster with one mesh installed. Every built-in topology
// is checked against the mesh its name says.
func TestCRDFilesAreTheTopologysMeshes(t *testing.T) {
	t.Parallel()
	want := map[string][]string{"istio": {"istio.yaml"}, "kuma": {"kuma.yaml"}, "skupper": {"skupper.yaml"}, "cilium": nil}
	names := topologies.Names()
	if len(names) == 0 {
		t.Fatal("no built-in topologies")
	}
	for _, name := range names {
		mesh, _, _ := strings.Cut(name, "-")
		w, ok := want[mesh]
		if !ok {
			t.Errorf("topology %s: no mesh of %v in its name", name, want)
			continue
		}
		topo, err := topologies.Builtin(name)
		if err != nil {
			t.Fatal(err)
		}
		if got := crdFiles(topo); !slices.Equal(got, w) {
			t.Errorf("topology %s: CRD files %v, want %v", name, got, w)
		}
	}
}
