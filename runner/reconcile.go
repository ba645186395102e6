package runner

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/reports"
)

// slack is the disagreement a source may show beyond the background's
// noise: 2 requests, or 0.2% of those answered, whichever is more
// (README.md, reconciliation). Joined by request id a source should count
// exactly; the slack covers a request whose line a proxy flushed after
// the settle time, not a pod's worth of lost lines (a scaled-down pod's
// last 2 s were 2% of a run).
func slack(answered int64) float64 { return max(2, 0.002*float64(answered)) }

// reconcile compares what a source counts served with what the attack got
// answered: more than were answered and failed together (a failed request
// may have been served and logged), or fewer than were answered, beyond
// the tolerance, and the source cannot be trusted for a verdict.
func reconcile(r *reports.Reconciliation, variance, slack float64) {
	r.Tolerance = podlogs.Tolerance(variance, slack)
	switch {
	case r.Counted > float64(r.Answered+r.Failed)+r.Tolerance:
		r.Status = reports.ReconcileOver
		r.Reason = fmt.Sprintf("%s count %.0f requests served, more than the %d the attack sent (%d answered, %d failed) by more than the tolerance of %.0f: some lines are not the run's requests (another client, one request logged by several observed workloads, or a rule that matches more than one line per request)",
			r.Source, r.Counted, r.Answered+r.Failed, r.Answered, r.Failed, r.Tolerance)
	case r.Counted < float64(r.Answered)-r.Tolerance:
		r.Status = reports.ReconcileUnder
		r.Reason = fmt.Sprintf("%s count %.0f requests served, fewer than the %d the attack got answered by more than the tolerance of %.0f: lines were lost (a stream that could not be read, a pod deleted before its last lines were), the rule misses some, or pods that served are not observed",
			r.Source, r.Counted, r.Answered, r.Tolerance)
	default:
		r.Status = reports.ReconcileOK
	}
}

// reconcileLogs reconciles the logs: requests joined by id, and lines in
// the window less the background, summed over every pod; mirrored copies
// are reported apart, as they are not served requests.
func reconcileLogs(le *logEvidence, answered, failed int64) *reports.Reconciliation {
	r := &reports.Reconciliation{Source: "logs", Answered: answered, Failed: failed}
	if le.copiesOnly {
		// Only mirror targets are observed: their lines are copies (counted
		// against the primaries by the mirror expectation), and no served
		// request is expected in the logs to compare with those answered.
		r.Status = reports.ReconcileOK
		r.Reason = "only mirror targets are observed: their lines are mirrored copies, and no served request is counted from the logs"
	}
	var variance float64
	for t, pc := range le.pods {
		p := reports.PodReconciliation{Cluster: t.Cluster, Pod: cmp.Or(t.Pod, "(unknown: behind a network gateway)"), Workload: le.owner[t]}
		if le.idMode[le.owner[t]] {
			p.Mode = "request id"
			p.Lines, p.Net = int64(pc.Requests), float64(pc.Requests)
			p.Copies, p.Errors = float64(pc.Mirrored), float64(pc.Failed)
		} else {
			p.Mode = "window"
			p.Lines = int64(pc.Served.Window)
			p.BackgroundLines, p.BackgroundSeconds = int64(pc.Served.Background), pc.BackgroundSeconds
			p.Rate, p.Expected = pc.Served.Rate, pc.Served.Expected
			p.Net, p.Copies, p.Errors = pc.Served.Net(), pc.Copies.Net(), pc.Errors.Net()
			r.Background += pc.Served.Expected
			variance += pc.Served.Variance
			r.Counted += pc.Served.Net()
		}
		r.Copies += p.Copies
		r.Pods = append(r.Pods, p)
	}
	// Requests joined by id count once, however many pods logged them.
	r.Counted += float64(le.totals.Requests)
	r.Retried, r.Attempts = int64(le.totals.Retried), int64(le.totals.Attempts)
	for _, pc := range le.pods {
		r.CountsAttempts = r.CountsAttempts || pc.WithoutID > 0
	}
	r.CountsAttempts = r.CountsAttempts || le.totals.AttemptOverflow
	sortPods(r.Pods)
	if !le.copiesOnly {
		reconcile(r, variance, le.slack)
	}
	if r.Status == reports.ReconcileOver && r.CountsAttempts {
		r.Reason += "; lines without a request id count each attempt of a retried request"
	}
	if r.Status == reports.ReconcileUnder && le.leftOut > 0 {
		r.Reason += fmt.Sprintf("; %d lines were left out because their upstream address named no single observed pod or network gateway (see the warnings)", le.leftOut)
	}
	return r
}

// metricsDelta is one pod's counter delta, with its workload.
type metricsDelta struct {
	workload string
	delta    kube.PodDelta
}

// reconcileMetrics reconciles the per-pod counter deltas. A counter has no
// background measured here, so only the slack applies.
func reconcileMetrics(deltas []metricsDelta, answered, failed int64) *reports.Reconciliation {
	r := &reports.Reconciliation{Source: "metrics", Answered: answered, Failed: failed}
	for _, d := range deltas {
		r.Counted += d.delta.Delta
		r.Pods = append(r.Pods, reports.PodReconciliation{Cluster: d.delta.Cluster, Pod: d.delta.Pod, Workload: d.workload,
			Mode: "counter", Lines: int64(d.delta.Delta + 0.5), Net: d.delta.Delta})
	}
	sortPods(r.Pods)
	reconcile(r, 0, slack(answered))
	return r
}

func sortPods(ps []reports.PodReconciliation) {
	slices.SortFunc(ps, func(a, b reports.PodReconciliation) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Pod, b.Pod))
	})
}
