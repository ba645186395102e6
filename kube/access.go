package kube

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// CheckLogAccess reads at most one byte of a container's log: the same
// call (get pods/log) the log followers make, made before the attack so
// that a denied one is a setup error naming the verb and resource, not a
// run whose log source silently counted nothing (README.md, RBAC). Only a
// denial is returned; any other failure (the pod just went) is the
// followers' to handle.
func (c *Cluster) CheckLogAccess(ctx context.Context, namespace, pod, container string) error {
	one := int64(1)
	// Stream, as the followers read, decodes the API server's refusal
	// (DoRaw would report it as "unknown").
	rc, err := c.Client.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{Container: container, LimitBytes: &one}).Stream(ctx)
	if err != nil {
		if IsDenied(err) {
			return c.wrap(fmt.Sprintf("get pods/log of pod %s/%s (to follow its logs)", namespace, pod), err)
		}
		return nil
	}
	_, _ = io.Copy(io.Discard, rc)
	return rc.Close()
}

// deniedError gives a refused streaming upgrade back the status that
// client-go reports only as text ("unable to upgrade connection: pods "x"
// is forbidden: ..."), so that a ClusterError's reason is Forbidden (or
// Unauthorized) as for any other call.
type deniedError struct{ err error }

func (e deniedError) Error() string { return e.err.Error() }
func (e deniedError) Unwrap() error { return e.err }

// Status makes it an apierrors.APIStatus.
func (e deniedError) Status() metav1.Status {
	st := metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: e.err.Error()}
	if !strings.Contains(e.err.Error(), " is forbidden: ") {
		st.Code, st.Reason = http.StatusUnauthorized, metav1.StatusReasonUnauthorized
	}
	return st
}
