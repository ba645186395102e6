package runner

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/converge"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

func assemble(sc *scenarios.Scenario, runID, target string, o attack.Options, sum attack.Summary, ev evidence, rules attribution.Stats) *reports.Report {
	s := ev.body
	st := sc.Statistics
	r := &reports.Report{
		Schema:   reports.Schema,
		RunID:    runID,
		Scenario: reports.ScenarioInfo{Name: sc.Metadata.Name, File: sc.File, Description: sc.Metadata.Description},
		Target:   target,
		Attack: reports.AttackInfo{Summary: sum, Mode: measure.Mode(o), Concurrency: o.Concurrency,
			KeepAlive: o.KeepAlive, MaxConnections: o.MaxConnections, HTTP2: o.HTTP2, Method: o.Method, GRPC: grpcMethod(sc)},
		Statistics: reports.StatisticsInfo{Confidence: st.Confidence, Power: st.Power, Margin: st.Margin.Fraction(),
			Relative: st.Relative, Interval: st.Interval, Inconclusive: st.Inconclusive, Stop: st.Stop,
			Balancing: st.Balancing, BalancingReason: st.BalancingReason},
		Samples:  s.Samples,
		Timeline: reports.Timeline{SliceWidth: s.SliceWidth},
	}
	r.Attack.Connections = uint64(max(s.Connections, 0))
	m := s.Metrics
	r.Metrics = reports.Metrics{
		Requests:    s.Total,
		Success:     m.Success,
		StatusCodes: m.StatusCodes,
		BytesIn:     m.BytesIn.Total,
		Latency: reports.Latency{Mean: m.Latencies.Mean, P50: m.Latencies.P50, P90: m.Latencies.P90,
			P95: m.Latencies.P95, P99: m.Latencies.P99, Max: m.Latencies.Max},
	}
	oc := s.Dimensions[tally.Outcome]
	for i, b := range oc.Buckets {
		if b == tally.Success {
			r.Metrics.Successes = oc.N[i]
		}
	}
	if s.Total > 0 {
		r.Metrics.Success = float64(r.Metrics.Successes) / float64(s.Total)
	}
	// net/http quotes the request URL in its errors: redacted, two messages
	// may become one.
	errs := map[string]int64{}
	for msg, n := range s.Errors {
		errs[redact.Message(msg)] += n
	}
	for msg, n := range errs {
		r.Metrics.Errors = append(r.Metrics.Errors, reports.ErrorCount{Message: msg, Count: n})
	}
	if s.ErrorsOther > 0 {
		r.Metrics.Errors = append(r.Metrics.Errors, reports.ErrorCount{Message: "(other errors)", Count: s.ErrorsOther})
	}
	sort.Slice(r.Metrics.Errors, func(a, b int) bool { return r.Metrics.Errors[a].Count > r.Metrics.Errors[b].Count })
	r.Dimensions = dimensions(scenarios.SourceBody, s)
	r.Warnings = append(r.Warnings, sc.Warnings()...)
	r.Warnings = append(r.Warnings, overflowWarnings(scenarios.SourceBody, s)...)
	for _, src := range []struct {
		name string
		s    *tally.Snapshot
	}{{scenarios.SourceLogs, ev.logs}, {scenarios.SourceMetrics, ev.metrics}} {
		if src.s != nil {
			r.Dimensions = append(r.Dimensions, dimensions(src.name, *src.s)...)
			r.Warnings = append(r.Warnings, overflowWarnings(src.name, *src.s)...)
			r.Warnings = append(r.Warnings, disagreements(s, *src.s, src.name)...)
		}
		if rc := ev.recon[src.name]; rc != nil {
			r.Reconciliation = append(r.Reconciliation, *rc)
			if rc.Status != reports.ReconcileOK && judgedFrom(sc, src.name) && len(ev.config[src.name]) == 0 {
				r.Warnings = append(r.Warnings, rc.Reason)
			}
		}
	}
	for _, rs := range rules.Rules {
		r.Rules = append(r.Rules, reports.RuleReport{Source: scenarios.SourceBody, Rule: rs.Rule, Read: rules.Responses, Matched: rs.Matched, Samples: rs.Samples})
	}
	r.Rules = append(r.Rules, ev.rules...)
	for _, src := range scenarios.Sources() {
		r.ConfigErrors = append(r.ConfigErrors, ev.config[src]...)
	}
	for _, sl := range s.Slices {
		rs := reports.Slice{Start: sl.Start, Requests: sl.Requests, Errors: sl.Errors, Clusters: sl.Clusters}
		if len(sl.Latency) > 0 {
			rs.Latency = make(map[string]reports.SliceLatency, len(sl.Latency))
			for k, h := range sl.Latency {
				rs.Latency[k] = reports.SliceLatency{N: h.Count, P50: h.Quantile(0.5), P90: h.Quantile(0.9), P99: h.Quantile(0.99), Max: h.Max}
			}
		}
		r.Timeline.Slices = append(r.Timeline.Slices, rs)
	}
	addLogTimeline(&r.Timeline, ev.logSeconds, sum.Started)
	return r
}

// addLogTimeline adds the logs' served lines per cluster to the slices
// they fall in (seconds before the first slice are left out; seconds past
// the last extend the timeline, since the logs outlast the responses by
// their settle time).
func addLogTimeline(tl *reports.Timeline, secs map[string]map[int64]int, start time.Time) {
	width := tl.SliceWidth
	if len(secs) == 0 || width <= 0 {
		return
	}
	for cluster, m := range secs {
		for sec, n := range m {
			off := time.Unix(sec, 0).Sub(start.Truncate(time.Second))
			if off < 0 || n == 0 {
				continue
			}
			i := int(off / width)
			if i > len(tl.Slices)+1 {
				continue // long after the attack: background, not the run
			}
			for len(tl.Slices) <= i {
				tl.Slices = append(tl.Slices, reports.Slice{Start: time.Duration(len(tl.Slices)) * width})
			}
			sl := &tl.Slices[i]
			if sl.Sources == nil {
				sl.Sources = map[string]map[string]int64{}
			}
			if sl.Sources[scenarios.SourceLogs] == nil {
				sl.Sources[scenarios.SourceLogs] = map[string]int64{}
			}
			sl.Sources[scenarios.SourceLogs][cluster] += int64(n)
		}
	}
}

// dimensions reports the observed split of every identity field one
// source attributed.
func dimensions(source string, s tally.Snapshot) []reports.Dimension {
	var out []reports.Dimension
	for _, f := range attribution.Fields() {
		c := s.Dimensions[string(f)]
		d := reports.Dimension{Name: string(f), Source: source, Unattributed: s.Unattributed[string(f)],
			ErrorsUnattributed: s.FailuresUnattributed[string(f)]}
		if c.Units != nil {
			d.Units = c.Units.Units
			if len(c.Units.SumXX) == len(c.Buckets) {
				u := *c.Units
				d.Sums = &u
			}
		}
		for _, n := range c.N {
			d.Attributed += n
		}
		for i, b := range c.Buckets {
			share := 0.0
			if d.Attributed > 0 {
				share = float64(c.N[i]) / float64(d.Attributed)
			}
			d.Buckets = append(d.Buckets, reports.Bucket{Name: b, Count: c.N[i], Share: share, Sources: []string{source},
				Errors: s.Failures[string(f)][b], Cluster: podCluster(f, b, s)})
		}
		// Buckets that only failed: which cluster produced the 503s.
		for _, b := range slices.Sorted(maps.Keys(s.Failures[string(f)])) {
			if !slices.Contains(c.Buckets, b) {
				d.Buckets = append(d.Buckets, reports.Bucket{Name: b, Sources: []string{source}, Errors: s.Failures[string(f)][b],
					Cluster: podCluster(f, b, s)})
			}
		}
		if d.Attributed > 0 || len(s.Failures[string(f)]) > 0 || source == scenarios.SourceBody {
			out = append(out, d)
		}
	}
	return out
}

// podCluster is the cluster of a pod bucket, empty for other fields.
func podCluster(f attribution.Field, bucket string, s tally.Snapshot) string {
	if f != attribution.Pod {
		return ""
	}
	return s.PodClusters[bucket]
}

// disagreements names the buckets where bodies and another source counted
// differently, per cluster and pod, where both attributed that field.
func disagreements(body, other tally.Snapshot, source string) []string {
	var out []string
	for _, f := range []attribution.Field{attribution.Cluster, attribution.Pod} {
		b, o := body.Dimensions[string(f)], other.Dimensions[string(f)]
		if len(b.Buckets) == 0 || len(o.Buckets) == 0 {
			continue
		}
		counts := map[string][2]int64{}
		for i, n := range b.Buckets {
			c := counts[n]
			c[0] = b.N[i]
			counts[n] = c
		}
		for i, n := range o.Buckets {
			c := counts[n]
			c[1] = o.N[i]
			counts[n] = c
		}
		names := make([]string, 0, len(counts))
		for n := range counts {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			if c := counts[n]; c[0] != c[1] {
				out = append(out, fmt.Sprintf("%s %s: responses say %d, %s say %d", f, n, c[0], source, c[1]))
			}
		}
	}
	return out
}

// finish sets the verdict, the gate and the exit code.
func finish(r *reports.Report, sc *scenarios.Scenario) {
	vs := make([]assert.Verdict, 0, len(r.Expectation))
	for _, e := range r.Expectation {
		vs = append(vs, e.Verdict)
	}
	r.Verdict = assert.Worst(vs...)
	r.Gate = r.Verdict
	if r.Verdict == assert.Inconclusive && sc.Statistics.Inconclusive == "pass" {
		r.Gate = assert.Pass
	}
	switch {
	case r.Attack.Interrupted:
		r.ExitCode = exitcode.Interrupted
	case len(r.ConfigErrors) > 0:
		// The scenario is wrong, whatever the mesh did (README.md, exit codes).
		r.ExitCode = exitcode.InvalidInput
	case r.Gate == assert.Pass:
		r.ExitCode = exitcode.Pass
	case r.Gate == assert.Fail:
		r.ExitCode = exitcode.Fail
	default:
		r.ExitCode = exitcode.Inconclusive
	}
	if c := r.Converge; c != nil && c.Mode == reports.ConvergeWindows && !c.Converged {
		// statistics.inconclusive: pass lets an INCONCLUSIVE split pass
		// a run, not a converge gate that saw no N passes in a row.
		converge.NotConverged(r)
	}
}

// judgedFrom reports whether some split, reached, only or never
// expectation counts from source: only then does its reconciliation
// decide anything.
func judgedFrom(sc *scenarios.Scenario, source string) bool {
	for _, e := range judge.Resolve(sc) {
		if e.Attributed() && e.Source() == source {
			return true
		}
	}
	return false
}

// overflowWarnings say loudly that a dimension ran past tally.MaxBuckets
// distinct values: a rule that names a new pod or cluster with nearly
// every request captures something per request, and its counts say
// nothing about the split.
func overflowWarnings(source string, s tally.Snapshot) []string {
	var out []string
	for _, dn := range slices.Sorted(maps.Keys(s.Overflow)) {
		out = append(out, fmt.Sprintf("%s by %s: more than %d distinct values, %d requests counted as %s: the rule probably captures a per-request value (a request id, a timestamp, an address) instead of the %s",
			source, dn, tally.MaxBuckets, s.Overflow[dn], tally.Other, dn))
	}
	return out
}

// grpcMethod is the method of a gRPC attack, for the report.
func grpcMethod(sc *scenarios.Scenario) string {
	if sc.Attack.GRPC == nil {
		return ""
	}
	return sc.Attack.GRPC.Method
}
