package fleet

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/mesh-verify/mesh-verify/kube"
)

// awaitReady ends at the first pod the watch shows unable to start, with
// an error naming the image or the scheduler's reason, instead of waiting
// for workerReadyTimeout. The pod states are fed as the pod watch would
// deliver them (the lab test in kube checks the watch reports them from
// a real API server and scheduler).
func TestAwaitReadyStartFailure(t *testing.T) {
	t.Parallel()
	const image = "registry.example/mesh-verify:nope"
	for _, c := range []struct {
		name string
		pod  kube.WorkerPod
		want []string
	}{
		{"image pull", kube.WorkerPod{Name: "mv-x-0", Index: 0, Phase: corev1.PodPending, State: "waiting", Reason: "ErrImagePull", Message: "not found"},
			[]string{"worker 0 cannot start: image " + image + " cannot be pulled (ErrImagePull", "attack.pod.imagePullSecrets", "pod mv-x-0: Pending"}},
		{"back-off", kube.WorkerPod{Name: "mv-x-1", Index: 1, Phase: corev1.PodPending, State: "waiting", Reason: "ImagePullBackOff"},
			[]string{"worker 1 cannot start: image " + image + " cannot be pulled (ImagePullBackOff"}},
		{"invalid name", kube.WorkerPod{Name: "mv-x-0", Index: 0, Phase: corev1.PodPending, State: "waiting", Reason: "InvalidImageName"},
			[]string{"cannot be pulled (InvalidImageName"}},
		{"unschedulable for the grace", kube.WorkerPod{Name: "mv-x-0", Index: 0, Phase: corev1.PodPending, Unschedulable: true, Reason: "Unschedulable", Message: "0/3 nodes are available"},
			[]string{"worker 0 cannot be scheduled: no node has taken its pod for 200ms", "attack.pod.nodeSelector", "Unschedulable: 0/3 nodes are available"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &fleetRun{workers: 2, image: image, events: make(chan fleetEvent, 2), pods: map[int]kube.WorkerPod{}, unschedulableGrace: 200 * time.Millisecond}
			f.events <- fleetEvent{pods: []kube.WorkerPod{c.pod}}
			start := time.Now()
			err := f.awaitReady(context.Background(), time.Minute)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("took %s: want at once (the grace, for Unschedulable)", took)
			}
			for _, w := range c.want {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Fatalf("error %v, want it to contain %q", err, w)
				}
			}
		})
	}
	// A pod Unschedulable for less than the grace, then scheduled, is
	// waited for: the scheduler says so of a pod waiting for room.
	t.Run("unschedulable for a moment", func(t *testing.T) {
		t.Parallel()
		f := &fleetRun{workers: 1, image: image, events: make(chan fleetEvent, 2), pods: map[int]kube.WorkerPod{}, unschedulableGrace: 300 * time.Millisecond}
		f.events <- fleetEvent{pods: []kube.WorkerPod{{Name: "mv-x-0", Index: 0, Phase: corev1.PodPending, Unschedulable: true, Reason: "Unschedulable"}}}
		f.events <- fleetEvent{pods: []kube.WorkerPod{{Name: "mv-x-0", Index: 0, Phase: corev1.PodPending, State: "waiting", Reason: "ContainerCreating"}}}
		err := f.awaitReady(context.Background(), time.Second)
		if err == nil || !strings.Contains(err.Error(), "0 of 1 workers ready after 1s") {
			t.Fatalf("error %v, want the ready timeout", err)
		}
	})
	// A pod merely pending (being pulled, or scheduled) is waited for.
	t.Run("pending is not a failure", func(t *testing.T) {
		t.Parallel()
		f := &fleetRun{workers: 1, image: image, events: make(chan fleetEvent, 2), pods: map[int]kube.WorkerPod{}, unschedulableGrace: time.Second}
		f.events <- fleetEvent{pods: []kube.WorkerPod{{Name: "mv-x-0", Index: 0, Phase: corev1.PodPending, State: "waiting", Reason: "ContainerCreating"}}}
		err := f.awaitReady(context.Background(), 300*time.Millisecond)
		if err == nil || !strings.Contains(err.Error(), "0 of 1 workers ready after 300ms") {
			t.Fatalf("error %v, want the ready timeout", err)
		}
	})
}

// While the workers get ready, a progress line says each one's phase
// whenever one changes (the pod states fed as the pod watch delivers
// them; kube's lab test checks the watch against a real API server);
// past 8 workers it counts them by phase.
func TestPhaseProgress(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	f := &fleetRun{workers: 2, image: "img", events: make(chan fleetEvent, 8), pods: map[int]kube.WorkerPod{}, unschedulableGrace: time.Minute, progress: &out}
	f.events <- fleetEvent{pods: []kube.WorkerPod{{Name: "p0", Index: 0, Phase: corev1.PodPending, State: "waiting", Reason: "ContainerCreating"}}}
	f.events <- fleetEvent{pods: []kube.WorkerPod{{Name: "p0", Index: 0, Phase: corev1.PodPending, State: "waiting", Reason: "ContainerCreating"},
		{Name: "p1", Index: 1, Phase: corev1.PodPending, Reason: "bad\x1b[31mreason"}}}
	f.events <- fleetEvent{pods: []kube.WorkerPod{{Name: "p0", Index: 0, Phase: corev1.PodRunning, State: "running"},
		{Name: "p1", Index: 1, Phase: corev1.PodRunning, State: "running"}}}
	f.events <- fleetEvent{rec: Record{Kind: KindReady, Worker: 0}}
	f.events <- fleetEvent{rec: Record{Kind: KindReady, Worker: 1}}
	if err := f.awaitReady(context.Background(), 10*time.Second); err != nil {
		t.Fatal(err)
	}
	want := "workers: 0 pulling (ContainerCreating), 1 pending\n" +
		"workers: 0 pulling (ContainerCreating), 1 pending (bad\\u001b[31mreason)\n" +
		"workers: 0 running, 1 running\n"
	if out.String() != want {
		t.Errorf("progress:\n%s\nwant:\n%s", out.String(), want)
	}
	// A reason past maxReasonBytes is cut.
	f.pods[1] = kube.WorkerPod{Name: "p1", Index: 1, Phase: corev1.PodPending, Reason: strings.Repeat("x", 100)}
	if got, want := f.phaseLine(map[int]bool{}), "1 pending ("+strings.Repeat("x", maxReasonBytes-3)+"...)"; !strings.Contains(got, want) {
		t.Errorf("phase line %q, want it to contain %q", got, want)
	}

	many := &fleetRun{workers: 10, pods: map[int]kube.WorkerPod{
		0: {State: "running"}, 1: {State: "running"}, 2: {State: "waiting"}, 3: {Phase: corev1.PodFailed}, 4: {Phase: corev1.PodSucceeded},
	}}
	if got := many.phaseLine(map[int]bool{1: true}); got != "5 pending, 1 pulling, 1 running, 2 done, 1 failed" {
		t.Errorf("10 workers: %q", got)
	}
}
