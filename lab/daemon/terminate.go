package daemon

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Pod termination as a kubelet does it (lab/README.md, "Pod lifecycle"):
// a deleted pod keeps its deletionTimestamp for its grace period (kwok's
// lab stages leave it alone until then); the daemon takes it out of every
// data plane's backends first, waits a moment for requests already routed
// to it to arrive, then gives its app "SIGTERM" (stop accepting, drain
// in-flight requests, log their lines), reports its containers terminated
// and deletes it with grace 0. kwok deletes it at the deletionTimestamp
// if the daemon has not.

const (
	// endpointSettle is the pause between leaving the endpoints and the
	// app's SIGTERM, like a preStop sleep: a request a data plane routed
	// just before the change still reaches an app that accepts it.
	endpointSettle = 250 * time.Millisecond
	// drainMargin ends the drain this long before the deletionTimestamp,
	// so the daemon, not kwok's stage, ends the pod.
	drainMargin = 200 * time.Millisecond
	// finishTimeout bounds the status patch and the final delete.
	finishTimeout = 10 * time.Second
)

// terminating reports whether the pod is being deleted gracefully: it
// has a deletionTimestamp but is not finished.
func terminating(p *corev1.Pod) bool {
	return p != nil && p.DeletionTimestamp != nil &&
		p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed
}

// beginTermination starts the pod's termination once: out of the
// backends (synchronously, so no data plane picks it any more), then the
// drain in the background, where the pod-event worker does not wait for
// it.
func (d *Daemon) beginTermination(ctx context.Context, ref podRef, rt *podRT, pod *corev1.Pod) error {
	d.mu.Lock()
	if rt.drained != nil {
		d.mu.Unlock()
		return d.updateBackends(ctx) // a no-op unless an earlier update failed
	}
	rt.status.Ready, rt.status.Terminating = false, true
	drainCtx, cancel := context.WithDeadline(context.Background(), pod.DeletionTimestamp.Add(-drainMargin))
	rt.drainCancel, rt.drained = cancel, make(chan struct{})
	d.mu.Unlock()
	d.log.Info("pod terminating: out of the endpoints, then SIGTERM", "pod", ref.String(),
		"deletionTimestamp", pod.DeletionTimestamp.UTC().Format(time.RFC3339))
	err := d.updateBackends(ctx)
	go func() {
		defer close(rt.drained)
		defer cancel()
		d.drain(drainCtx, ref, rt, pod)
	}()
	return err
}

// drain is the pod's SIGTERM and what follows it.
func (d *Daemon) drain(ctx context.Context, ref podRef, rt *podRT, pod *corev1.Pod) {
	select {
	case <-time.After(endpointSettle):
	case <-ctx.Done():
	}
	started := time.Now()
	if rt.server != nil {
		// Shutdown stops accepting, waits for in-flight requests (which
		// log their lines) until ctx ends, then closes what is left.
		if err := rt.server.Shutdown(ctx); err != nil {
			d.log.Warn("app did not drain within the grace period; killed", "pod", ref.String(), "err", err)
		}
	}
	// A sidecar outlives its app, as Istio's drains after the app exits.
	if rt.plane != nil {
		rt.plane.dp.Stop()
	}
	d.log.Info("pod drained", "pod", ref.String(), "took", time.Since(started).Round(time.Millisecond))
	if ctx.Err() != nil && context.Cause(ctx) == context.Canceled {
		return // stopPod or the daemon's own stop: the pod is gone or not ours to finish
	}
	fctx, cancel := context.WithTimeout(context.Background(), finishTimeout)
	defer cancel()
	if err := d.clusters[ref.cluster].finishPod(fctx, pod); err != nil {
		// kwok's stage deletes it at its deletionTimestamp anyway.
		d.log.Warn("finish terminated pod", "pod", ref.String(), "err", err)
	}
}

// finishPod reports the pod's containers terminated, as a kubelet does
// when they exit, then deletes the pod with grace 0. Both are tied to
// the pod's uid, so a replacement of the same name is never touched.
func (c *Cluster) finishPod(ctx context.Context, pod *corev1.Pod) error {
	now := metav1.Now()
	var statuses []map[string]any
	for _, ct := range pod.Spec.Containers {
		statuses = append(statuses, map[string]any{
			"name": ct.Name, "image": ct.Image, "ready": false, "started": false,
			"state": map[string]any{"terminated": map[string]any{
				"exitCode": 0, "reason": "Completed", "finishedAt": now, "startedAt": pod.Status.StartTime,
			}},
		})
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": pod.UID},
		"status": map[string]any{
			"containerStatuses": statuses,
			"conditions": []map[string]any{
				{"type": string(corev1.PodReady), "status": string(corev1.ConditionFalse), "lastTransitionTime": now, "reason": "PodCompleted"},
				{"type": string(corev1.ContainersReady), "status": string(corev1.ConditionFalse), "lastTransitionTime": now, "reason": "PodCompleted"},
			},
		},
	})
	if err != nil {
		return fmt.Errorf("encode status of pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	pods := c.cs.CoreV1().Pods(pod.Namespace)
	if _, err := pods.Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: fieldManager}, "status"); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return nil // gone or replaced meanwhile
		}
		return fmt.Errorf("report containers of pod %s/%s in cluster %s terminated: %w", pod.Namespace, pod.Name, c.Name, err)
	}
	return c.deleteNow(ctx, pod)
}

// deleteNow deletes the pod with grace 0, if it is still this uid.
func (c *Cluster) deleteNow(ctx context.Context, pod *corev1.Pod) error {
	uid := pod.UID
	err := c.cs.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: new(int64(0)), Preconditions: &metav1.Preconditions{UID: &uid},
	})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("delete terminated pod %s/%s in cluster %s: %w", pod.Namespace, pod.Name, c.Name, err)
	}
	return nil
}
