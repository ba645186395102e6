package main

import (
	"os/exec"
	"strings"
	"testing"
)

// maxAPIGroups is how many k8s.io/api packages (API group versions) the
// product may link: core/v1, apps/v1, batch/v1, discovery/v1 (the narrow
// client's scheme, kube/kclient), rbac/v1 (the manifest `mesh-verify
// rbac` prints) and scheduling/v1alpha3 (which batch/v1 imports). The
// full clientset links 56; a new group is a decision, made here.
const maxAPIGroups = 6

// The product binary stays narrow (issues 24 and 27): client-go's full
// clientset and its scheme registered every API group and made a third of
// the executable; the lab is its own program. Either coming back through
// an innocent import would go unseen without this test.
func TestProductDeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list")
	}
	out, err := exec.CommandContext(t.Context(), "go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	var groups []string
	for _, p := range strings.Fields(string(out)) {
		for _, banned := range []string{
			"k8s.io/client-go/kubernetes", // the clientset, its typed clients and its scheme
			"k8s.io/client-go/applyconfigurations",
			"k8s.io/client-go/discovery",
			"k8s.io/client-go/openapi",
			"k8s.io/client-go/testing",
			"github.com/google/gnostic-models",
			"github.com/mesh-verify/mesh-verify/lab",
		} {
			if p == banned || strings.HasPrefix(p, banned+"/") {
				t.Errorf("the product links %s (banned: %s): see kube/kclient's doc", p, banned)
			}
		}
		if strings.HasPrefix(p, "k8s.io/api/") {
			groups = append(groups, p)
		}
	}
	if len(groups) > maxAPIGroups {
		t.Errorf("the product links %d k8s.io/api packages, at most %d: %s", len(groups), maxAPIGroups, strings.Join(groups, " "))
	}
}
