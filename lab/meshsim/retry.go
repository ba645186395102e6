package meshsim

import (
	"io"
	"net/http"
	"slices"
	"strconv"
)

// MaxRetries bounds Retry.Attempts: each retry holds the request's
// connection slot a while longer, and no mesh default comes near it.
const MaxRetries = 10

// AttemptCountHeader is the header Envoy sets on every upstream attempt
// (x-envoy-attempt-count: 1, 2, …) when the route asks for it, as Istio's
// sidecars do; the upstream's sidecar logs each attempt as a request.
const AttemptCountHeader = "X-Envoy-Attempt-Count"

// maxRetryDrain is how much of a retried attempt's answer is read so its
// connection can be reused; a longer one is closed instead.
const maxRetryDrain = 64 << 10

// Retry is an Envoy route's retry policy (Istio's HTTPRetry): up to
// Attempts more tries of a request whose answer has one of Codes or whose
// connection failed (ConnectFailure). Each try goes to the backend the
// request was routed to: the lab's subsets have one pod per cluster, so
// Envoy's "previous hosts" predicate has no other host to choose. Only
// requests without a body or with a replayable one are retried.
type Retry struct {
	Attempts       int
	Codes          []int
	ConnectFailure bool
}

// retryTransport is the simulator's transport with its policy's retries.
type retryTransport struct{ s *Sim }

func (t retryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.s.mu.Lock()
	rp := t.s.p.Retry
	t.s.mu.Unlock()
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 1; ; attempt++ {
		out := req
		if attempt > 1 {
			out = req.Clone(req.Context())
			if req.GetBody != nil {
				b, err := req.GetBody()
				if err != nil {
					return nil, err
				}
				out.Body = b
			}
		}
		out.Header.Set(AttemptCountHeader, strconv.Itoa(attempt))
		resp, err := t.s.transport.RoundTrip(out)
		last := rp == nil || attempt > rp.Attempts || !replayable || req.Context().Err() != nil
		switch {
		case last:
			return resp, err
		case err != nil && !rp.ConnectFailure:
			return resp, err
		case err == nil && !slices.Contains(rp.Codes, resp.StatusCode):
			return resp, nil
		}
		if resp != nil {
			_, _ = io.CopyN(io.Discard, resp.Body, maxRetryDrain)
			_ = resp.Body.Close()
		}
		t.s.mu.Lock()
		t.s.st.Retries++
		t.s.mu.Unlock()
	}
}
