package runner

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What --wait-ready says about one pod or Deployment; the polling itself
// runs against the lab's API servers in e2e/gate.
func TestPodNotReady(t *testing.T) {
	for _, tc := range []struct {
		name string
		st   corev1.PodStatus
		want string
	}{
		{"ready", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}, ""},
		{"containers not ready", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse,
			Reason: "ContainersNotReady", Message: "containers with unready status: [app]"}}}, "Ready=False (ContainersNotReady: containers with unready status: [app])"},
		{"no reason", corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}}, "Ready=False (phase Running)"},
		{"pending", corev1.PodStatus{Phase: corev1.PodPending}, "no Ready condition yet (phase Pending)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := podNotReady(&corev1.Pod{Status: tc.st}); got != tc.want {
				t.Errorf("podNotReady = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestDeploymentNotAvailable(t *testing.T) {
	two := int32(2)
	dep := func(gen, observed int64, updated, available int32, cond corev1.ConditionStatus) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &two},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, UpdatedReplicas: updated, AvailableReplicas: available,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: cond, Reason: "MinimumReplicasUnavailable", Message: "m"}}}}
	}
	for _, tc := range []struct {
		name string
		d    *appsv1.Deployment
		want string
	}{
		{"available", dep(3, 3, 2, 2, corev1.ConditionTrue), ""},
		{"not observed", dep(4, 3, 2, 2, corev1.ConditionTrue), "generation 4 not yet observed"},
		{"rolling", dep(3, 3, 1, 2, corev1.ConditionTrue), "1 of 2 replicas updated"},
		{"unavailable", dep(3, 3, 2, 1, corev1.ConditionFalse), "1 of 2 replicas available"},
		{"condition false", dep(3, 3, 2, 2, corev1.ConditionFalse), "Available=False (MinimumReplicasUnavailable: m)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := deploymentNotAvailable(tc.d)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("deploymentNotAvailable = %q, want %q", got, tc.want)
			}
		})
	}
}
