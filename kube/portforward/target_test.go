package portforward

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestParseTarget(t *testing.T) {
	for _, tc := range []struct {
		res, port string
		want      Target
		err       string
	}{
		{"pod/x", "8080", Target{KindPod, "x", "8080"}, ""},
		{"svc/web", "http", Target{KindService, "web", "http"}, ""},
		{"service/web", "80", Target{KindService, "web", "80"}, ""},
		{"deploy/web", "http", Target{KindDeployment, "web", "http"}, ""},
		{"deployment/web", "9000", Target{KindDeployment, "web", "9000"}, ""},
		{"web", "80", Target{}, "want pod/NAME"},
		{"svc/", "80", Target{}, "want pod/NAME"},
		{"statefulset/x", "80", Target{}, "unsupported kind"},
		{"svc/web", "", Target{}, "no port"},
		{"svc/web", "70000", Target{}, "out of range"},
	} {
		got, err := ParseTarget(tc.res, tc.port)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseTarget(%q, %q) error = %v, want %q", tc.res, tc.port, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseTarget(%q, %q) = %+v, %v; want %+v", tc.res, tc.port, got, err, tc.want)
		}
	}
}

func TestTargetPort(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"},
		Spec: corev1.PodSpec{
			InitContainers: []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{{Name: "init-port", ContainerPort: 7000}}}},
			Containers: []corev1.Container{
				{Name: "app", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
				{Name: "sidecar", Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 15020}}},
			},
		},
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "ns"},
		Spec: corev1.ServiceSpec{ClusterIP: "10.0.0.9", Ports: []corev1.ServicePort{
			{Name: "web", Port: 80, TargetPort: intstr.FromString("http")},
			{Name: "num", Port: 81, TargetPort: intstr.FromInt32(9090)},
			{Name: "same", Port: 82},
			{Name: "udp", Port: 53, Protocol: corev1.ProtocolUDP},
			{Name: "bad", Port: 83, TargetPort: intstr.FromString("nope")},
		}},
	}
	headless := svc.DeepCopy()
	headless.Spec.ClusterIP = corev1.ClusterIPNone
	for _, tc := range []struct {
		name string
		t    Target
		svc  *corev1.Service
		want int32
		err  string
	}{
		{"svc port number to named targetPort", Target{KindService, "web", "80"}, svc, 8080, ""},
		{"svc port name to named targetPort", Target{KindService, "web", "web"}, svc, 8080, ""},
		{"svc numeric targetPort", Target{KindService, "web", "num"}, svc, 9090, ""},
		{"svc targetPort omitted", Target{KindService, "web", "82"}, svc, 82, ""},
		{"headless keeps the port", Target{KindService, "web", "80"}, headless, 80, ""},
		{"svc has no such port", Target{KindService, "web", "8080"}, svc, 0, "has no port 8080"},
		{"udp refused", Target{KindService, "web", "udp"}, svc, 0, "TCP only"},
		{"named targetPort missing in pod", Target{KindService, "web", "bad"}, svc, 0, `no container port named "nope"`},
		{"pod number", Target{KindPod, "p", "1234"}, nil, 1234, ""},
		{"pod name in second container", Target{KindPod, "p", "metrics"}, nil, 15020, ""},
		{"pod name in init container", Target{KindDeployment, "d", "init-port"}, nil, 7000, ""},
		{"pod name missing", Target{KindPod, "p", "grpc"}, nil, 0, `no container port named "grpc"`},
	} {
		got, err := targetPort(tc.t, tc.svc, pod)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error = %v, want %q", tc.name, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s: = %d, %v; want %d", tc.name, got, err, tc.want)
		}
	}
}

func testPod(name, node string, phase corev1.PodPhase, ready bool, created time.Time) corev1.Pod {
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	return corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(created), UID: types.UID("uid-" + name)},
		Spec:       corev1.PodSpec{NodeName: node},
		Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: st, LastTransitionTime: metav1.NewTime(created.Add(time.Second))},
		}},
	}
}

func TestPickPodLikeKubectl(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	deleting := testPod("deleting", "n1", corev1.PodRunning, true, t0.Add(-time.Hour))
	now := metav1.NewTime(t0)
	deleting.DeletionTimestamp = &now
	pods := []corev1.Pod{
		testPod("pending", "", corev1.PodPending, false, t0.Add(-3*time.Hour)),
		testPod("notready", "n1", corev1.PodRunning, false, t0.Add(-3*time.Hour)),
		testPod("young", "n1", corev1.PodRunning, true, t0),
		testPod("old", "n1", corev1.PodRunning, true, t0.Add(-time.Hour)),
		deleting,
	}
	// kubectl's ActivePods reversed: ready beats not ready; among ready
	// pods the one ready the longest wins; deleting pods are skipped.
	if p := pickPod(pods); p == nil || p.Name != "old" {
		t.Fatalf("picked %v, want old", p)
	}
	// Same ready time and age: fewer restarts wins.
	a := testPod("a", "n1", corev1.PodRunning, true, t0)
	b := testPod("b", "n1", corev1.PodRunning, true, t0)
	b.Status.ContainerStatuses = []corev1.ContainerStatus{{RestartCount: 2}}
	if p := pickPod([]corev1.Pod{b, a}); p.Name != "a" {
		t.Fatalf("picked %s, want a (fewer restarts)", p.Name)
	}
	if p := pickPod([]corev1.Pod{pods[0], deleting}); p != nil {
		t.Fatalf("picked %s from pods none of which can serve", p.Name)
	}
	if p := pickPod([]corev1.Pod{pods[1]}); p == nil || p.Name != "notready" {
		t.Fatalf("a running, not ready pod is still forwardable (kubectl does): got %v", p)
	}
}
