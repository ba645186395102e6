package runner

import (
	"fmt"
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
	dep := func(gen, observed int64, replicas, updated, available int32, cond corev1.ConditionStatus) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo", Generation: gen}, Spec: appsv1.DeploymentSpec{Replicas: &two},
			Status: appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: cond, Reason: "MinimumReplicasUnavailable", Message: "m"}}}}
	}
	deadline := dep(3, 3, 3, 1, 2, corev1.ConditionTrue)
	deadline.Status.Conditions = append(deadline.Status.Conditions, appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing,
		Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "web-2" has timed out progressing.`})
	// The cases are kubectl rollout status's (DeploymentStatusViewer).
	for _, tc := range []struct {
		name    string
		d       *appsv1.Deployment
		want    string
		wantErr string
	}{
		{"available", dep(3, 3, 2, 2, 2, corev1.ConditionTrue), "", ""},
		{"not observed", dep(4, 3, 2, 2, 2, corev1.ConditionTrue), "generation 4 not yet observed", ""},
		{"rolling", dep(3, 3, 3, 1, 2, corev1.ConditionTrue), "1 of 2 replicas updated", ""},
		{"old replicas terminating", dep(3, 3, 3, 2, 2, corev1.ConditionTrue), "1 old replicas pending termination", ""},
		{"unavailable", dep(3, 3, 2, 2, 1, corev1.ConditionFalse), "1 of 2 replicas available", ""},
		{"condition false", dep(3, 3, 2, 2, 2, corev1.ConditionFalse), "Available=False (MinimumReplicasUnavailable: m)", ""},
		{"progress deadline exceeded", deadline, "", `deployment demo/web exceeded its progress deadline: ReplicaSet "web-2" has timed out progressing.`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := deploymentNotAvailable(tc.d)
			if tc.want == "" && got != "" || tc.want != "" && !strings.Contains(got, tc.want) {
				t.Errorf("deploymentNotAvailable = %q, want %q", got, tc.want)
			}
			if fmt.Sprint(err) != fmt.Sprint(tc.wantErr) && (err != nil || tc.wantErr != "") {
				t.Errorf("error %v, want %q", err, tc.wantErr)
			}
		})
	}
}
