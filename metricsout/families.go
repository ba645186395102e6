package metricsout

import (
	"cmp"
	"slices"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/proto"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Metric names (docs/metrics.md).
const (
	namePrefix      = "mesh_verify_"
	RequestsTotal   = namePrefix + "requests_total"
	BucketRequests  = namePrefix + "bucket_requests_total"
	BucketShare     = namePrefix + "bucket_share"
	ExpectedShare   = namePrefix + "expected_share"
	SuccessRatio    = namePrefix + "success_ratio"
	LatencySeconds  = namePrefix + "latency_seconds"
	ExpectationName = namePrefix + "expectation_verdict"
	GateName        = namePrefix + "gate_verdict"
	RunInfo         = namePrefix + "run_info"
	Unattributed    = namePrefix + "unattributed_requests_total"
)

// verdicts are the state set's states, in the order reports print them.
var verdicts = []assert.Verdict{assert.Pass, assert.Inconclusive, assert.Fail}

// Run identifies the run every series belongs to.
type Run struct {
	ID, Scenario string
}

// builder collects families in a fixed order, each series carrying the
// run's labels first.
type builder struct {
	run  Run
	fams map[string]*dto.MetricFamily
}

func newBuilder(run Run) *builder { return &builder{run: run, fams: map[string]*dto.MetricFamily{}} }

func (b *builder) add(name, help string, typ dto.MetricType, value float64, labels ...string) {
	f, ok := b.fams[name]
	if !ok {
		f = &dto.MetricFamily{Name: proto.String(name), Help: proto.String(help), Type: typ.Enum()}
		b.fams[name] = f
	}
	m := &dto.Metric{Label: []*dto.LabelPair{
		{Name: proto.String("run_id"), Value: proto.String(b.run.ID)},
		{Name: proto.String("scenario"), Value: proto.String(b.run.Scenario)},
	}}
	for i := 0; i+1 < len(labels); i += 2 {
		m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(labels[i]), Value: proto.String(labels[i+1])})
	}
	switch typ {
	case dto.MetricType_COUNTER:
		m.Counter = &dto.Counter{Value: proto.Float64(value)}
	default:
		m.Gauge = &dto.Gauge{Value: proto.Float64(value)}
	}
	f.Metric = append(f.Metric, m)
}

func (b *builder) families() []*dto.MetricFamily {
	out := make([]*dto.MetricFamily, 0, len(b.fams))
	for _, f := range b.fams {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
	return out
}

const (
	helpRequests  = "Requests the run sent, by outcome (success as attack.successCodes says, failure otherwise)."
	helpBucket    = "Answered requests attributed to each bucket (cluster, pod, version) of a dimension, by the source that attributed them."
	helpShare     = "Observed share (0..1) of each bucket among the attributed answered requests of its dimension and source."
	helpExpected  = "Expected share (0..1) of each bucket, as the expectation's model resolved it."
	helpSuccess   = "Share (0..1) of the run's requests that succeeded."
	helpLatency   = "Latency of the run's requests at a quantile, in seconds (quantile=\"1\" is the maximum)."
	helpExpect    = "Verdict of each expectation as a state set: 1 for the verdict in force, 0 for the others."
	helpGate      = "The run's gate verdict (after the scenario's rule for INCONCLUSIVE) as a state set."
	helpInfo      = "Constant 1; the labels say which build ran and how it exited."
	helpUnattrib  = "Requests no attribution rule could place, per dimension."
	stateLabelKey = "verdict"
)

// FromReport is the judged run as metric families: what the remote write
// at the end of a run sends, and what `report -o prom` prints.
func FromReport(r *reports.Report) []*dto.MetricFamily {
	b := newBuilder(Run{ID: r.RunID, Scenario: r.Scenario.Name})
	b.add(RunInfo, helpInfo, dto.MetricType_GAUGE, 1, "version", r.Tool.Version, "exit_code", strconv.Itoa(r.ExitCode))
	b.add(RequestsTotal, helpRequests, dto.MetricType_COUNTER, float64(r.Metrics.Successes), "outcome", "success")
	b.add(RequestsTotal, helpRequests, dto.MetricType_COUNTER, float64(r.Metrics.Requests-r.Metrics.Successes), "outcome", "failure")
	b.add(SuccessRatio, helpSuccess, dto.MetricType_GAUGE, r.Metrics.Success)
	for _, q := range []struct {
		q string
		d time.Duration
	}{{"0.5", r.Metrics.Latency.P50}, {"0.9", r.Metrics.Latency.P90}, {"0.95", r.Metrics.Latency.P95},
		{"0.99", r.Metrics.Latency.P99}, {"1", r.Metrics.Latency.Max}} {
		b.add(LatencySeconds, helpLatency, dto.MetricType_GAUGE, q.d.Seconds(), "quantile", q.q)
	}
	for _, d := range r.Dimensions {
		for _, bk := range d.Buckets {
			labels := []string{"dimension", d.Name, "source", d.Source, "bucket", bk.Name, "cluster", bk.Cluster}
			b.add(BucketRequests, helpBucket, dto.MetricType_COUNTER, float64(bk.Count), labels...)
			b.add(BucketShare, helpShare, dto.MetricType_GAUGE, bk.Share, labels...)
		}
		b.add(Unattributed, helpUnattrib, dto.MetricType_COUNTER, float64(d.Unattributed), "dimension", d.Name, "source", d.Source)
	}
	for i, e := range r.Expectation {
		name := e.Name
		if name == "" {
			name = e.Kind + "#" + strconv.Itoa(i+1)
		}
		for _, v := range verdicts {
			b.add(ExpectationName, helpExpect, dto.MetricType_GAUGE, boolf(e.Verdict == v),
				"expectation", name, "kind", e.Kind, stateLabelKey, v.String())
		}
		if e.Model != nil {
			keys := make([]string, 0, len(e.Model.Shares))
			for k := range e.Model.Shares {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			for _, k := range keys {
				b.add(ExpectedShare, helpExpected, dto.MetricType_GAUGE, e.Model.Shares[k], "expectation", name, "bucket", k)
			}
		}
	}
	for _, v := range verdicts {
		b.add(GateName, helpGate, dto.MetricType_GAUGE, boolf(r.Gate == v), stateLabelKey, v.String())
	}
	return b.families()
}

// FromSnapshot is the run so far, from the tally while the attack lasts:
// what the exposition endpoint serves at each scrape.
func FromSnapshot(run Run, s tally.Snapshot) []*dto.MetricFamily {
	b := newBuilder(run)
	var ok int64
	if oc, found := s.Dimensions[tally.Outcome]; found {
		for i, n := range oc.Buckets {
			if n == tally.Success {
				ok = oc.N[i]
			}
		}
	}
	b.add(RequestsTotal, helpRequests, dto.MetricType_COUNTER, float64(ok), "outcome", "success")
	b.add(RequestsTotal, helpRequests, dto.MetricType_COUNTER, float64(s.Total-ok), "outcome", "failure")
	if s.Total > 0 {
		b.add(SuccessRatio, helpSuccess, dto.MetricType_GAUGE, float64(ok)/float64(s.Total))
	}
	dims := make([]string, 0, len(s.Dimensions))
	for d := range s.Dimensions {
		if d != tally.Outcome {
			dims = append(dims, d)
		}
	}
	slices.Sort(dims)
	for _, d := range dims {
		c := s.Dimensions[d]
		var tot int64
		for _, n := range c.N {
			tot += n
		}
		for i, bk := range c.Buckets {
			cluster := ""
			if d == "pod" {
				cluster = s.PodClusters[bk]
			}
			labels := []string{"dimension", d, "source", "body", "bucket", bk, "cluster", cluster}
			b.add(BucketRequests, helpBucket, dto.MetricType_COUNTER, float64(c.N[i]), labels...)
			if tot > 0 {
				b.add(BucketShare, helpShare, dto.MetricType_GAUGE, float64(c.N[i])/float64(tot), labels...)
			}
		}
		b.add(Unattributed, helpUnattrib, dto.MetricType_COUNTER, float64(s.Unattributed[d]), "dimension", d, "source", "body")
	}
	return b.families()
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
