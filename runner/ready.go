package runner

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// readyPoll is how often --wait-ready lists the observed workloads again.
const readyPoll = time.Second

// WaitReady blocks until every observed workload (each observe[] selector
// in each of its clusters) and the target's port-forward resource have all
// their pods Ready, and a deploy/ target its Deployment available, or
// until within has passed: then the error names every thing not ready
// (README.md "CI gate", run --wait-ready). A CI job that runs right after
// a rollout would otherwise measure pods that are still starting.
func WaitReady(ctx context.Context, sc *scenarios.Scenario, clusters map[string]*kube.Cluster, within time.Duration, progress io.Writer) error {
	began := time.Now()
	deadline := began.Add(within)
	lastShown := ""
	var lastAt time.Time
	for {
		// Each poll is bounded by what is left of the wait (and at least
		// ReadyPollMin): with --request-timeout 0 an API server that
		// accepts the connection and never answers would otherwise hold
		// the gate past its deadline.
		pctx, cancel := context.WithTimeout(ctx, max(time.Until(deadline), ReadyPollMin))
		pending, err := notReady(pctx, sc, clusters)
		cancel()
		if err != nil {
			var stop *rolloutFailed
			switch {
			case ctx.Err() != nil:
				return fmt.Errorf("--wait-ready: interrupted while waiting: %w", err)
			case errors.As(err, &stop) || !transient(err):
				return err
			case time.Now().After(deadline):
				return fmt.Errorf("--wait-ready %s: not ready in time: the API server did not answer the last check: %w", within, err)
			}
			// A restarting or overloaded API server is retried until
			// the deadline, as kubectl rollout status does.
			pending = []string{fmt.Sprintf("API error, retrying: %v", err)}
		}
		if len(pending) == 0 {
			if progress != nil {
				fmt.Fprintf(progress, "wait-ready: every observed workload is ready (%s)\n", time.Since(began).Round(100*time.Millisecond))
			}
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("--wait-ready %s: not ready in time: %s", within, strings.Join(pending, "; "))
		}
		if progress != nil {
			line := fmt.Sprintf("%d not ready, e.g. %s", len(pending), pending[0])
			if line != lastShown || time.Since(lastAt) >= 5*time.Second {
				fmt.Fprintf(progress, "wait-ready: %s (%s left)\n", line, time.Until(deadline).Round(time.Second))
				lastShown, lastAt = line, time.Now()
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("--wait-ready: interrupted while waiting: %s", strings.Join(pending, "; "))
		case <-time.After(min(readyPoll, max(time.Until(deadline), 10*time.Millisecond))):
		}
	}
}

// ReadyPollMin bounds a poll made at the very end of the wait, so that
// the last check has a chance to be answered.
const ReadyPollMin = 2 * time.Second

// transient is an API error worth asking again: the server was busy,
// restarting or unreachable, or the poll ran out of time. A denial, a
// missing resource kind or a bad request is not retried: waiting would
// not change it.
func transient(err error) bool {
	switch {
	case apierrors.IsForbidden(err), apierrors.IsUnauthorized(err), apierrors.IsBadRequest(err),
		apierrors.IsInvalid(err), apierrors.IsMethodNotSupported(err):
		return false
	case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err),
		errors.Is(err, context.DeadlineExceeded):
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout() || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, io.ErrUnexpectedEOF)
}

// rolloutFailed is a Deployment whose rollout will not finish by waiting
// (its progress deadline passed): --wait-ready stops at once.
type rolloutFailed struct{ msg string }

func (e *rolloutFailed) Error() string { return e.msg }

// notReady lists, one line each, what is not ready yet: "cluster c1:
// namespace demo: pod web-1: Ready=False (ContainersNotReady: ...)". An
// API call that fails (other than a missing Deployment) is an error.
func notReady(ctx context.Context, sc *scenarios.Scenario, clusters map[string]*kube.Cluster) ([]string, error) {
	var out []string
	for _, w := range sc.Observe {
		for _, name := range w.Clusters {
			c := clusters[name]
			if c == nil {
				continue
			}
			sel, err := labels.Parse(w.Selector)
			if err != nil {
				return nil, fmt.Errorf("observe %s: selector %q: %w", w.Name, w.Selector, err)
			}
			lines, err := podsNotReady(ctx, c, w.Namespace, sel, "workload "+w.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, lines...)
		}
	}
	if f := sc.Target.Forward; f != nil && clusters[f.Cluster] != nil {
		lines, err := targetNotReady(ctx, clusters[f.Cluster], f)
		if err != nil {
			return nil, err
		}
		out = append(out, lines...)
	}
	return out, nil
}

func targetNotReady(ctx context.Context, c *kube.Cluster, f *scenarios.Forward) ([]string, error) {
	t, err := portforward.ParseTarget(f.Resource, f.Port)
	if err != nil {
		return nil, err
	}
	at := fmt.Sprintf("cluster %s: namespace %s", c.Name, f.Namespace)
	what := "target " + f.Resource
	switch t.Kind {
	case portforward.KindPod:
		p, err := c.Client.CoreV1().Pods(f.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			if notFound(err) {
				return []string{fmt.Sprintf("%s: pod %s (%s) does not exist", at, t.Name, what)}, nil
			}
			return nil, fmt.Errorf("%s: get pod %s: %w", c, t.Name, err)
		}
		if line := podNotReady(p); line != "" {
			return []string{fmt.Sprintf("%s: pod %s (%s): %s", at, p.Name, what, line)}, nil
		}
		return nil, nil
	case portforward.KindService:
		s, err := c.Client.CoreV1().Services(f.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			if notFound(err) {
				return []string{fmt.Sprintf("%s: service %s (%s) does not exist", at, t.Name, what)}, nil
			}
			return nil, fmt.Errorf("%s: get service %s: %w", c, t.Name, err)
		}
		if len(s.Spec.Selector) == 0 {
			return nil, nil // the tunnel says why it cannot forward
		}
		return podsNotReady(ctx, c, f.Namespace, labels.SelectorFromSet(s.Spec.Selector), what)
	case portforward.KindDeployment:
		d, err := c.Client.AppsV1().Deployments(f.Namespace).Get(ctx, t.Name, metav1.GetOptions{})
		if err != nil {
			if notFound(err) {
				return []string{fmt.Sprintf("%s: deployment %s (%s) does not exist", at, t.Name, what)}, nil
			}
			return nil, fmt.Errorf("%s: get deployment %s: %w", c, t.Name, err)
		}
		var out []string
		line, err := deploymentNotAvailable(d)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		if line != "" {
			out = append(out, fmt.Sprintf("%s: deployment %s (%s): %s", at, d.Name, what, line))
		}
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil {
			return nil, fmt.Errorf("deployment %s/%s: invalid selector: %w", f.Namespace, d.Name, err)
		}
		pods, err := podsNotReady(ctx, c, f.Namespace, sel, what)
		if err != nil {
			return nil, err
		}
		return append(out, pods...), nil
	}
	return nil, nil
}

// podsNotReady lists the pods sel matches that are not Ready, or says that
// none matches. Pods being deleted and finished pods are not waited for.
func podsNotReady(ctx context.Context, c *kube.Cluster, ns string, sel labels.Selector, what string) ([]string, error) {
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("%s: list pods in namespace %s (selector %s): %w", c, ns, sel, err)
	}
	at := fmt.Sprintf("cluster %s: namespace %s", c.Name, ns)
	var out []string
	live := 0
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		live++
		if line := podNotReady(p); line != "" {
			out = append(out, fmt.Sprintf("%s: pod %s (%s): %s", at, p.Name, what, line))
		}
	}
	if live == 0 {
		return []string{fmt.Sprintf("%s: no pod matches selector %s (%s)", at, sel, what)}, nil
	}
	sort.Strings(out)
	return out, nil
}

// podNotReady is "" for a Ready pod, else its Ready condition and why.
func podNotReady(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type != corev1.PodReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			return ""
		}
		why := strings.TrimSpace(strings.Join([]string{c.Reason, c.Message}, ": "))
		why = strings.Trim(why, ": ")
		if why == "" {
			return fmt.Sprintf("Ready=%s (phase %s)", c.Status, p.Status.Phase)
		}
		return fmt.Sprintf("Ready=%s (%s)", c.Status, why)
	}
	return fmt.Sprintf("no Ready condition yet (phase %s)", p.Status.Phase)
}

// deploymentNotAvailable is "" when the Deployment's rollout is complete
// and it is Available, else what is missing. It follows kubectl rollout
// status: the new generation observed, every replica updated, no old
// replica still running, every updated replica available; a rollout past
// its progress deadline is an error, not something to wait for.
func deploymentNotAvailable(d *appsv1.Deployment) (string, error) {
	st := d.Status
	if st.ObservedGeneration < d.Generation {
		return fmt.Sprintf("spec generation %d not yet observed (at %d)", d.Generation, st.ObservedGeneration), nil
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Reason == "ProgressDeadlineExceeded" {
			return "", &rolloutFailed{fmt.Sprintf("deployment %s/%s exceeded its progress deadline: %s", d.Namespace, d.Name, c.Message)}
		}
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	switch {
	case st.UpdatedReplicas < want:
		return fmt.Sprintf("%d of %d replicas updated", st.UpdatedReplicas, want), nil
	case st.Replicas > st.UpdatedReplicas:
		return fmt.Sprintf("%d old replicas pending termination", st.Replicas-st.UpdatedReplicas), nil
	case st.AvailableReplicas < st.UpdatedReplicas || st.AvailableReplicas < want:
		return fmt.Sprintf("Available: %d of %d replicas available", st.AvailableReplicas, want), nil
	}
	for _, c := range st.Conditions {
		if c.Type == appsv1.DeploymentAvailable && c.Status != corev1.ConditionTrue {
			return fmt.Sprintf("Available=%s (%s: %s)", c.Status, c.Reason, c.Message), nil
		}
	}
	return "", nil
}

func notFound(err error) bool { return apierrors.IsNotFound(err) }
