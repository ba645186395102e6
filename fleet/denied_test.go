package fleet

import (
	"errors"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A denied call of a distributed run names what worker runs need and the
// rbac command with --workers; other errors pass unchanged. The error is
// client-go's own Forbidden status error, as the API server's 403 decodes.
func TestDenied(t *testing.T) {
	t.Parallel()
	forbidden := apierrors.NewForbidden(schema.GroupResource{Group: "batch", Resource: "jobs"}, "mv-x", errors.New(`User "ci" cannot create resource "jobs"`))
	err := Denied(forbidden, "c1", "load", 3)
	for _, want := range []string{`cannot create resource "jobs"`, "worker runs need, in cluster c1 namespace load:", "create jobs.batch", "create secrets", "get pods/log",
		"`mesh-verify rbac SCENARIO --workers 3 --cluster c1`"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%v\nlacks %q", err, want)
		}
	}
	if !apierrors.IsForbidden(err) {
		t.Errorf("the hint hides the Forbidden status: %v", err)
	}
	// The workers' own permissions are theirs, not the coordinator's.
	if strings.Contains(err.Error(), "get secrets") || strings.Contains(err.Error(), "watch configmaps") {
		t.Errorf("%v: names the workers' own permissions", err)
	}
	other := errors.New("connection refused")
	if got := Denied(other, "c1", "load", 3); got != other {
		t.Errorf("a non-denied error became %v", got)
	}
}

// The Job's bound on workers is the records': a worker past fleet's
// MaxWorkers would print records the coordinator refuses. (Here, not in
// kube: fleet stands on kube.)
func TestMaxWorkersIsFleets(t *testing.T) {
	if kube.MaxWorkers != MaxWorkers {
		t.Errorf("kube.MaxWorkers %d, fleet.MaxWorkers %d: a worker's records would be refused", kube.MaxWorkers, MaxWorkers)
	}
}
