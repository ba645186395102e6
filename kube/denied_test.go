package kube

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestIsDenied(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{apierrors.NewForbidden(gr, "x", errors.New("no")), true},
		{fmt.Errorf("list: %w", apierrors.NewUnauthorized("expired")), true},
		{&ClusterError{Cluster: "c1", Call: "list pods", Reason: ReasonForbidden, Err: errors.New("x")}, true},
		{errors.New(`unable to upgrade connection: pods "p" is forbidden: User "u" cannot create resource "pods/portforward"`), true},
		{apierrors.NewNotFound(gr, "x"), false},
		{errors.New("unable to upgrade connection: pod not running"), false},
		{nil, false},
	} {
		if got := IsDenied(tc.err); got != tc.want {
			t.Errorf("IsDenied(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
	// A refused upgrade wrapped by a cluster reads as Forbidden.
	c := &Cluster{Name: "c1", Context: "kind-c1"}
	err := c.wrap("create pods/portforward for pod d/p", deniedError{errors.New(`unable to upgrade connection: pods "p" is forbidden: User "u" cannot create resource "pods/portforward"`)})
	if !strings.Contains(err.Error(), "forbidden to create pods/portforward for pod d/p") {
		t.Errorf("refused upgrade: %v", err)
	}
}
