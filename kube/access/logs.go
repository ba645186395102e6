package access

import (
	"context"
	"fmt"
	"io"

	"github.com/mesh-verify/mesh-verify/kube"
	corev1 "k8s.io/api/core/v1"
)

// CheckLogAccess reads at most one byte of a container's log: the same
// call (get pods/log) the log followers make, made before the attack so
// that a denied one is a setup error naming the verb and resource, not a
// run whose log source silently counted nothing (README.md, RBAC). Only a
// denial is returned; any other failure (the pod just went) is the
// followers' to handle.
func CheckLogAccess(ctx context.Context, c *kube.Cluster, namespace, pod, container string) error {
	one := int64(1)
	// Stream, as the followers read, decodes the API server's refusal
	// (DoRaw would report it as "unknown").
	rc, err := c.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, LimitBytes: &one}).Stream(ctx)
	if err != nil {
		if kube.IsDenied(err) {
			return c.Wrap(fmt.Sprintf("get pods/log of pod %s/%s (to follow its logs)", namespace, pod), err)
		}
		return nil
	}
	_, _ = io.Copy(io.Discard, rc)
	return rc.Close()
}
