package runner

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// outcomes are the attack's answered and failed requests by
// attack.successCodes, from the body counts.
func outcomes(s tally.Snapshot) (answered, failed int64) {
	oc := s.Dimensions[tally.Outcome]
	for i, b := range oc.Buckets {
		if b == tally.Success {
			answered = oc.N[i]
		} else {
			failed += oc.N[i]
		}
	}
	return answered, failed
}

// collect gathers after the attack what Kubernetes says: the pod logs,
// read to their end, and the metrics deltas, each reconciled with the
// requests answered, and what each log rule matched. It returns warnings.
func (kp *kubePath) collect(ctx context.Context, ev *evidence, start, end time.Time, grace time.Duration, seqConn []uint32) []string {
	ev.readyPods = kp.readyPods()
	warnings := append([]string(nil), kp.warnings...)
	answered, failed := outcomes(ev.body)
	if kp.logs != nil {
		// Even when interrupted, read what the pods logged so far.
		fctx := ctx
		if ctx.Err() != nil {
			fctx = context.WithoutCancel(ctx)
		}
		if err := kp.logs.finish(fctx, end); err != nil {
			warnings = append(warnings, "pod logs: "+err.Error())
			kp.noteDenied(err)
		}
		for t, st := range kp.logs.follower.Stats() {
			if kube.IsDenied(st.LastError) {
				kp.noteDenied(fmt.Errorf("log of pod %s: %w", t, st.LastError))
			}
		}
		ls, le := kp.logs.evidence(start, grace, seqConn, answered, failed)
		ev.logs, ev.logInfo = &ls, le
		ev.logSeconds = kp.logs.perSecond()
		ev.recon[scenarios.SourceLogs] = le.recon
		rules, errs, w := kp.logs.ruleReports(answered)
		ev.rules = append(ev.rules, rules...)
		ev.config[scenarios.SourceLogs] = append(ev.config[scenarios.SourceLogs], errs...)
		warnings = append(warnings, w...)
	}
	if len(kp.metricsBefore) > 0 {
		after, err := kp.scrapeAll(ctx)
		if err != nil {
			warnings = append(warnings, "metrics after the attack: "+err.Error())
			kp.noteDenied(err)
		}
		ms, recon := kp.metricsTally(after, start, answered, failed)
		ev.metrics = &ms
		ev.recon[scenarios.SourceMetrics] = recon
	}
	for _, p := range kp.unknownPods(ev.body) {
		warnings = append(warnings, fmt.Sprintf("pod %s named in responses is not in the inventory of the observed workloads: its cluster is not guessed", p))
	}
	return warnings
}

// neededFields lists the identity fields the expectations judged from one
// source group requests by.
func neededFields(sc *scenarios.Scenario, source string) []attribution.Field {
	var out []attribution.Field
	for _, e := range judge.Resolve(sc) {
		if e.Source() != source || !e.Attributed() {
			continue
		}
		by := e.By()
		if f := attribution.Field(by); by != "" && !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// bodyConfigErrors names the attribution mistakes the answered responses
// show (README.md, configuration errors): rules that match none of them, a
// field a rule captures empty (Istio's echo app without --cluster), a
// field no rule gives, cluster names that are none of the scenario's. Each
// is about a field some expectation judged from the bodies needs.
func bodyConfigErrors(sc *scenarios.Scenario, st attribution.Stats, body tally.Snapshot, inventory bool) []reports.ConfigError {
	answered, _ := outcomes(body)
	if answered == 0 || st.Responses == 0 {
		return nil // nothing answered: the mesh's failure, not the rules'
	}
	var errs []reports.ConfigError
	anyMatched := false
	for _, r := range st.Rules {
		anyMatched = anyMatched || r.Matched > 0
	}
	for _, f := range neededFields(sc, scenarios.SourceBody) {
		if i := slices.IndexFunc(st.Empty, func(e attribution.EmptyCapture) bool { return e.Field == f }); i >= 0 {
			e := st.Empty[i]
			msg := fmt.Sprintf("rule %s captured an empty %s in %d of %d answered responses: the app does not know its %s", e.Rule, f, e.Count, st.Responses, f)
			if f == attribution.Cluster {
				msg += " (Istio's echo app prints Cluster= without --cluster): start it with --cluster, or observe the workload so that the inventory names each pod's cluster"
			}
			errs = append(errs, reports.ConfigError{Subject: "attribution: empty " + string(f), Message: msg, Samples: e.Samples})
			continue
		}
		if st.Fields[f] > 0 {
			continue
		}
		var samples []string
		var names []string
		for _, r := range st.Rules {
			names = append(names, r.Rule)
			for _, s := range r.Samples {
				if len(samples) < attribution.MaxSamples && !slices.Contains(samples, s) {
					samples = append(samples, s)
				}
			}
		}
		switch {
		case !anyMatched:
			errs = append(errs, reports.ConfigError{Subject: "attribution",
				Message: fmt.Sprintf("no rule (%s) matched any of the %d answered responses: they do not fit the app's answers", strings.Join(names, "; "), st.Responses),
				Samples: samples})
		case f == attribution.Cluster && st.Fields[attribution.Pod] > 0 && !inventory:
			errs = append(errs, reports.ConfigError{Subject: "attribution: no cluster",
				Message: fmt.Sprintf("the responses name their pod but not their cluster (%d of %d): observe the workload (observe[]) so that the inventory maps each pod to its cluster", st.Fields[attribution.Pod], st.Responses),
				Samples: samples})
		case f == attribution.Cluster && st.Fields[attribution.Pod] > 0:
			errs = append(errs, reports.ConfigError{Subject: "attribution: no cluster",
				Message: fmt.Sprintf("the responses name pods (%d of %d responses, %d with a name the inventory does not know) but no cluster: observe the workload that answers, so that the inventory maps its pods", st.Fields[attribution.Pod], st.Responses, st.Unresolved),
				Samples: samples})
		default:
			errs = append(errs, reports.ConfigError{Subject: "attribution: no " + string(f),
				Message: fmt.Sprintf("no rule (%s) gave a %s in any of the %d answered responses, and expectations group by it", strings.Join(names, "; "), f, st.Responses),
				Samples: samples})
		}
	}
	if slices.Contains(neededFields(sc, scenarios.SourceBody), attribution.Cluster) && len(sc.Clusters) > 0 {
		seen := body.Dimensions[string(attribution.Cluster)].Buckets
		declared := false
		for _, b := range seen {
			declared = declared || slices.Contains(sc.ClusterNames(), b)
		}
		if len(seen) > 0 && !declared {
			example := seen[0]
			errs = append(errs, reports.ConfigError{Subject: "attribution: cluster names",
				Message: fmt.Sprintf("the responses name clusters %s, none of them a declared cluster (%s): rename them with attribution.map, like {from: cluster, to: cluster, values: {%s: %s}}",
					strings.Join(seen, ", "), strings.Join(sc.ClusterNames(), ", "), example, sc.Clusters[0].Name)})
		}
	}
	return errs
}

// configured says why an expectation judged from source cannot be judged
// at all: the scenario's rules for it are wrong (exit 4). The reason points
// at the configuration errors, never at the number of requests.
func (ev evidence) configured(source string) string {
	errs := ev.config[source]
	if len(errs) == 0 {
		return ""
	}
	return "configuration error: " + errs[0].Subject + " (see the configuration errors): no verdict until it is fixed"
}

// Unusable says why an expectation's source cannot be trusted for a
// verdict: a configuration error of that source, or, for the counts of
// logs and metrics, a reconciliation that failed: they count more, or far
// fewer, requests than the attack got answered. Success rate and latency
// come from the responses alone and are always judged. Bodies that were
// answered but not attributed (no rule placed them, or an overloaded
// attribution dropped them) do not make a source unusable: the verdict is
// judged by their worst case (missing, docs/statistics.md §3.6).
func (ev evidence) Unusable(source string, attributed bool) string {
	if why := ev.configured(source); why != "" {
		return why
	}
	if r := ev.recon[source]; attributed && r != nil && r.Status != reports.ReconcileOK {
		return "not judged: " + r.Reason
	}
	return ""
}

// mirrorCount is what the mirror expectation is judged on: k copies seen
// among n primary requests, and what n is; or why it cannot be judged.
type mirrorCount struct {
	k, n     int64
	basis    string
	unusable string
}

// mirrorCounts finds the copies and their primaries, most precise first
// (README.md, mirroring): this run's request ids joined in the logs (q̂ =
// primaries seen mirrored / primaries seen served); the data plane's own
// request id, which a copy shares with its primary, joined between the
// primaries' and the target's proxy logs; or the copies counted in the
// mirror target's logs in the attack window, less their background, over
// the primary requests answered.
func (ev evidence) mirrorCounts(m *scenarios.MirrorExpect) mirrorCount {
	le := ev.logInfo
	if le == nil {
		return mirrorCount{unusable: "no pod logs were read: the mirrored copies are only visible there"}
	}
	if why := ev.configured(scenarios.SourceLogs); why != "" {
		return mirrorCount{unusable: why}
	}
	if why := le.unread[m.To]; why != "" {
		// Copies that could not be read are unknown, not absent: never a 0%.
		return mirrorCount{unusable: "not judged: " + why}
	}
	answered, _ := outcomes(ev.body)
	t := le.totals
	over := func(copies, variance float64, what string) string {
		tol := podlogs.Tolerance(variance, le.slack)
		if copies <= float64(answered)+tol {
			return ""
		}
		return fmt.Sprintf("not judged: %s %.0f copies, more than the %d primary requests answered by more than the tolerance of %.0f: the mirror target's lines are not only copies of this run's requests (its own traffic? set mirror.shadow: true with a host or authority group)",
			what, copies, answered, tol)
	}
	switch {
	case le.idMode[m.To] && t.Requests > 0:
		return mirrorCount{k: int64(t.MirroredServed), n: int64(t.Requests), basis: "requests seen served in the logs"}
	case le.idMode[m.To]:
		if why := over(float64(t.Mirrored), 0, m.To+" logged"); why != "" {
			return mirrorCount{unusable: why}
		}
		return mirrorCount{k: min(int64(t.Mirrored), answered), n: answered, basis: "requests answered"}
	case t.DataPlaneCopies > 0 && t.DataPlanePrimaries > 0 && !t.DataPlaneOverflow:
		return mirrorCount{k: int64(t.DataPlaneBoth), n: int64(t.DataPlanePrimaries),
			basis: "primaries in the proxies' logs, joined by the data plane's request id"}
	}
	targets := le.targetsOf(m.To)
	if len(targets) == 0 {
		return mirrorCount{unusable: fmt.Sprintf("not judged: no pod of %s was observed, so no copy could be counted (a pod belongs to the first observe workload whose selector matches it)", m.To)}
	}
	var copies, variance, served float64
	for _, tg := range targets {
		pc := le.pods[tg]
		copies += pc.Copies.Net()
		variance += pc.Copies.Variance
		served += pc.Served.Net()
	}
	if m.ShadowDefaulted() && m.Shadow != nil && *m.Shadow && copies <= 0 && served > podlogs.Tolerance(0, le.slack) {
		return mirrorCount{unusable: fmt.Sprintf("not judged: %s logged %.0f requests in the attack window but none with a -shadow host: Istio 1.28 and later no longer mark copies; set mirror.shadow: false to count every line of %s as a copy", m.To, served, m.To)}
	}
	if why := over(copies, variance, m.To+" logged"); why != "" {
		return mirrorCount{unusable: why}
	}
	k := int64(math.Round(max(copies, 0)))
	return mirrorCount{k: min(k, answered), n: answered, basis: "requests answered (copies counted in " + m.To + "'s logs in the attack window)"}
}
