package metricsout

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/exp/api/remote"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/mesh-verify/mesh-verify/redact"
)

// Remote is where and how the end of a run is written.
type Remote struct {
	// URL is the receiver's write endpoint, in full
	// (http://prometheus:9090/api/v1/write, Mimir's /api/v1/push, …).
	// Basic-auth credentials in it are used and never printed.
	URL string
	// Headers are sent with every write (Authorization,
	// X-Scope-OrgID for a multi-tenant receiver).
	Headers http.Header
	// Timeout bounds each attempt; Retries is how many times a 5xx, a 429
	// or a network error is retried, with backoff.
	Timeout time.Duration
	Retries int
}

// Limits of a remote write (validated by Remote.Validate).
const (
	MaxRetries     = 10
	MaxTimeout     = 5 * time.Minute
	DefaultTimeout = 10 * time.Second
	DefaultRetries = 3
)

// Validate checks the URL and the bounds before a run spends its time.
func (r Remote) Validate() error {
	u, err := url.Parse(r.URL)
	if err != nil {
		return fmt.Errorf("remote write URL %s: %s", redact.URL(r.URL), redact.Message(err.Error()))
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("remote write URL %s: want http:// or https:// with a host", redact.URL(r.URL))
	}
	if r.Timeout < 0 || r.Timeout > MaxTimeout {
		return fmt.Errorf("remote write timeout %s: want 0 (the default, %s) to %s", r.Timeout, DefaultTimeout, MaxTimeout)
	}
	if r.Retries < 0 || r.Retries > MaxRetries {
		return fmt.Errorf("remote write retries %d: want 0 to %d", r.Retries, MaxRetries)
	}
	return nil
}

// Write sends the families as one Prometheus remote-write 1.0 request
// (snappy-compressed prometheus.WriteRequest, with each family's type and
// help as metadata), every sample stamped at. Remote write 1.0 is what
// every receiver takes (Prometheus 2 and 3 with
// --web.enable-remote-write-receiver, Mimir, Thanos, VictoriaMetrics,
// Grafana Cloud); the transport, compression, headers and retries are
// client_golang's remote API.
func Write(ctx context.Context, r Remote, fams []*dto.MetricFamily, at time.Time) error {
	if err := r.Validate(); err != nil {
		return err
	}
	timeout := r.Timeout
	if timeout == 0 {
		timeout = DefaultTimeout
	}
	client := &http.Client{Timeout: timeout, Transport: headerTransport{h: r.Headers, next: http.DefaultTransport}}
	// The API's MaxRetries of 0 means "retry forever": the retries are
	// counted here instead, and the write given up after r.Retries of them
	// (MaxRetries bounds it too, one beyond).
	api, err := remote.NewAPI(r.URL, remote.WithAPIHTTPClient(client), remote.WithAPIPath(""),
		remote.WithAPIBackoff(remote.BackoffConfig{Min: 500 * time.Millisecond, Max: 5 * time.Second, MaxRetries: r.Retries + 1}))
	if err != nil {
		return fmt.Errorf("remote write to %s: %s", redact.URL(r.URL), redact.Message(err.Error()))
	}
	series := toSeries(fams, at)
	if len(series) == 0 {
		return nil
	}
	req := encodedRequest(encodeWriteRequest(series, toMetadata(fams)))
	ctx, giveUp := context.WithCancelCause(ctx)
	defer giveUp(nil)
	retries := 0
	var lastErr error
	onRetry := func(err error) {
		lastErr = err
		if retries++; retries > r.Retries {
			giveUp(errGaveUp)
		}
	}
	_, err = api.Write(ctx, remote.WriteV1MessageType, req, remote.WithWriteRetryCallback(onRetry))
	if err != nil && errors.Is(context.Cause(ctx), errGaveUp) && lastErr != nil {
		err = fmt.Errorf("%w (after %d retries)", lastErr, r.Retries)
	}
	if err != nil {
		// The receiver's answer is quoted in the error: keep it to one
		// readable line.
		return fmt.Errorf("remote write of %d series to %s: %s", len(series), redact.URL(r.URL), oneLine(redact.Message(err.Error())))
	}
	return nil
}

// errGaveUp cancels a write whose retries are spent.
var errGaveUp = errors.New("remote write retries spent")

type headerTransport struct {
	h    http.Header
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if len(t.h) > 0 {
		req = req.Clone(req.Context())
		for k, vs := range t.h {
			for _, v := range vs {
				req.Header.Add(k, v)
			}
		}
	}
	return t.next.RoundTrip(req)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

type label struct{ name, value string }

type series struct {
	labels []label
	value  float64
	ms     int64
}

// toSeries flattens the families into samples, labels sorted by name as
// remote write requires (__name__ first), NaN and infinities left out.
func toSeries(fams []*dto.MetricFamily, at time.Time) []series {
	var out []series
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.Counter != nil:
				v = m.Counter.GetValue()
			case m.Gauge != nil:
				v = m.Gauge.GetValue()
			case m.Untyped != nil:
				v = m.Untyped.GetValue()
			default:
				continue
			}
			if math.IsNaN(v) || math.IsInf(v, 0) {
				continue
			}
			ls := []label{{"__name__", f.GetName()}}
			for _, l := range m.GetLabel() {
				if l.GetValue() != "" { // an empty label is no label in Prometheus
					ls = append(ls, label{l.GetName(), l.GetValue()})
				}
			}
			slices.SortFunc(ls, func(a, b label) int { return strings.Compare(a.name, b.name) })
			out = append(out, series{labels: ls, value: v, ms: at.UnixMilli()})
		}
	}
	return out
}

type metadata struct {
	typ        int32 // prompb MetricMetadata.MetricType: COUNTER=1, GAUGE=2
	name, help string
}

func toMetadata(fams []*dto.MetricFamily) []metadata {
	var out []metadata
	for _, f := range fams {
		t := int32(0)
		switch f.GetType() {
		case dto.MetricType_COUNTER:
			t = 1
		case dto.MetricType_GAUGE:
			t = 2
		}
		out = append(out, metadata{typ: t, name: f.GetName(), help: f.GetHelp()})
	}
	return out
}

// encodeWriteRequest encodes remote write 1.0's prometheus.WriteRequest
// (prometheus/prompb/remote.proto, types.proto) with protowire:
// client_golang's remote API ships only 2.0's generated types, and
// importing prometheus/prometheus for four small messages would bring its
// module graph along.
//
//	WriteRequest { repeated TimeSeries timeseries = 1; repeated MetricMetadata metadata = 3; }
//	TimeSeries   { repeated Label labels = 1; repeated Sample samples = 2; }
//	Label        { string name = 1; string value = 2; }
//	Sample       { double value = 1; int64 timestamp = 2; }
//	MetricMetadata { MetricType type = 1; string metric_family_name = 2; string help = 4; }
func encodeWriteRequest(ss []series, meta []metadata) []byte {
	var b []byte
	for _, s := range ss {
		var ts []byte
		for _, l := range s.labels {
			var lb []byte
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendString(lb, l.name)
			lb = protowire.AppendTag(lb, 2, protowire.BytesType)
			lb = protowire.AppendString(lb, l.value)
			ts = protowire.AppendTag(ts, 1, protowire.BytesType)
			ts = protowire.AppendBytes(ts, lb)
		}
		var sb []byte
		sb = protowire.AppendTag(sb, 1, protowire.Fixed64Type)
		sb = protowire.AppendFixed64(sb, math.Float64bits(s.value))
		sb = protowire.AppendTag(sb, 2, protowire.VarintType)
		sb = protowire.AppendVarint(sb, uint64(s.ms))
		ts = protowire.AppendTag(ts, 2, protowire.BytesType)
		ts = protowire.AppendBytes(ts, sb)
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, ts)
	}
	for _, m := range meta {
		var mb []byte
		mb = protowire.AppendTag(mb, 1, protowire.VarintType)
		mb = protowire.AppendVarint(mb, uint64(m.typ))
		mb = protowire.AppendTag(mb, 2, protowire.BytesType)
		mb = protowire.AppendString(mb, m.name)
		mb = protowire.AppendTag(mb, 4, protowire.BytesType)
		mb = protowire.AppendString(mb, m.help)
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendBytes(b, mb)
	}
	return b
}

// Size and MarshalToSizedBuffer are gogo-protobuf's encoding methods,
// which remote.API.Write uses when a message has them.
type encodedRequest []byte

func (e encodedRequest) Size() int { return len(e) }

func (e encodedRequest) MarshalToSizedBuffer(dst []byte) (int, error) {
	b := []byte(e)
	if len(dst) < len(b) {
		return 0, fmt.Errorf("remote write request: buffer of %d bytes for %d", len(dst), len(b))
	}
	// gogo fills the buffer from its end; the API passes one of exactly
	// Size() bytes, so the end is the whole.
	return copy(dst[len(dst)-len(b):], b), nil
}
