package kube

import (
	"errors"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// IsDenied reports whether err is the API server refusing a call for want
// of a permission (403) or of valid credentials (401), wherever it was
// wrapped: a *ClusterError, a client-go status error, or a streaming
// upgrade (port-forward) refused, whose status client-go keeps only as text.
func IsDenied(err error) bool {
	if err == nil {
		return false
	}
	var ce *ClusterError
	if errors.As(err, &ce) && (ce.Reason == ReasonForbidden || ce.Reason == ReasonUnauthorized) {
		return true
	}
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
		return true
	}
	return upgradeDenied(err)
}

// upgradeDenied recognizes a refused upgrade: k8s.io/streaming's SPDY
// round tripper reports "unable to upgrade connection: <the Status
// message>", and a Forbidden status message reads `pods "x" is forbidden:
// User "u" cannot create resource "pods/portforward" ...`.
func upgradeDenied(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "unable to upgrade connection") &&
		(strings.Contains(msg, " is forbidden: ") || strings.Contains(msg, "Unauthorized"))
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

// DeniedUpgrade marks a streaming upgrade's error (kube/portforward) as
// the API server's refusal: IsDenied and a ClusterError's reason then see
// Forbidden or Unauthorized, as for any other call.
func DeniedUpgrade(err error) error { return deniedError{err} }
