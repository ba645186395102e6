package podlogs

import (
	"context"
	"fmt"
	"io"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClientGoOpener opens pod logs through each cluster's API server
// (GET /api/v1/namespaces/{ns}/pods/{pod}/log, RBAC: get on pods/log),
// keyed by cluster name. Its streams are in FormatTimestamps.
func ClientGoOpener(clients map[string]kclient.Interface) Opener {
	return clientGoOpener(clients)
}

type clientGoOpener map[string]kclient.Interface

func (c clientGoOpener) Open(ctx context.Context, t Target, r OpenRequest) (io.ReadCloser, error) {
	cs, ok := c[t.Cluster]
	if !ok || cs == nil {
		return nil, fmt.Errorf("no client for cluster %q", t.Cluster)
	}
	opts := &corev1.PodLogOptions{
		Container:  t.Container,
		Follow:     r.Follow,
		Previous:   r.Previous,
		Timestamps: true,
	}
	if !r.Since.IsZero() {
		// metav1.Time goes into the query as t.UTC().Format(time.RFC3339)
		// (MarshalQueryParameter): the fraction is cut, never rounded up,
		// which is what the Follower's resume relies on.
		st := metav1.NewTime(r.Since)
		opts.SinceTime = &st
	}
	rc, err := cs.CoreV1().Pods(t.Namespace).GetLogs(t.Pod, opts).Stream(ctx)
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %w", ErrGone, err)
	}
	return rc, err
}
