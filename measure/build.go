package measure

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
	"github.com/mesh-verify/mesh-verify/internal/certpem"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// AttackConfig translates the scenario's attack section for url and
// runID; the scenario was validated, so what is left to fail here is a
// programming error. Judging reads it too (the timeout, the planned
// requests), so a plan is the attack's.
func AttackConfig(sc *scenarios.Scenario, url, runID string) attack.Options {
	a := sc.Attack
	o := attack.Options{
		Method:          a.Method,
		URL:             url,
		Header:          http.Header{},
		Body:            []byte(a.Body),
		Duration:        a.Duration.Duration,
		Requests:        a.Requests,
		Concurrency:     a.Concurrency,
		Timeout:         a.Timeout.Duration,
		KeepAlive:       a.KeepAlive == nil || *a.KeepAlive,
		Connections:     a.Connections,
		MaxConnections:  a.MaxConnections,
		HTTP2:           a.HTTP2,
		MaxBody:         a.MaxBody.Bytes(),
		MaxWorkers:      a.MaxWorkers,
		RequestIDHeader: a.RequestID,
		RunID:           runID,
	}
	for k, v := range a.Headers {
		o.Header.Set(k, v)
	}
	if g := a.GRPC; g != nil {
		// A unary call over HTTP/2: POST to the method's path, the
		// length-prefixed message, and the headers gRPC requires.
		o.Method, o.HTTP2, o.GRPC = http.MethodPost, true, true
		o.URL = strings.TrimSuffix(url, "/") + g.Method
		o.Header.Set("Content-Type", "application/grpc")
		o.Header.Set("Te", "trailers")
		o.Body = grpcFrame(g.Message)
	}
	if a.Rate != nil {
		o.Rate = vegeta.Rate{Freq: a.Rate.Freq, Per: a.Rate.Per}
	}
	if a.Ramp != nil {
		o.Ramp = &attack.Ramp{
			From: vegeta.Rate{Freq: a.Ramp.From.Freq, Per: a.Ramp.From.Per},
			To:   vegeta.Rate{Freq: a.Ramp.To.Freq, Per: a.Ramp.To.Per},
			Over: a.Ramp.Duration.Duration,
		}
		if o.Duration == 0 {
			o.Duration = o.Ramp.Over
		}
	}
	if a.Concurrency > 0 && a.Rate == nil && a.Ramp == nil && a.Repetitions > 0 {
		// siege -c C -r R: every simulated user sends R requests.
		o.Requests = uint64(a.Concurrency) * uint64(a.Repetitions)
	}
	return o
}

// grpcFrame is a gRPC message frame (uncompressed flag, big-endian
// length, message) holding a protobuf message whose field 1 is the string
// text: tag 0x0a (field 1, length-delimited), its varint length, the
// bytes. An empty text is the empty message.
func grpcFrame(text string) []byte {
	var msg []byte
	if text != "" {
		msg = append([]byte{0x0a}, binary.AppendUvarint(nil, uint64(len(text)))...)
		msg = append(msg, text...)
	}
	frame := make([]byte, 5, 5+len(msg))
	binary.BigEndian.PutUint32(frame[1:], uint32(len(msg)))
	return append(frame, msg...)
}

// targetTLS is how the target's certificate is checked (target.tls):
// the system roots by default, a CA file (relative to the scenario file),
// a server name, or nothing at all when the scenario says so. insecure
// reports the last, for the report's warning.
func targetTLS(sc *scenarios.Scenario) (cfg *tls.Config, insecure bool, err error) {
	cfg = &tls.Config{MinVersion: tls.VersionTLS12}
	t := sc.Target.TLS
	if t == nil {
		return cfg, false, nil
	}
	if t.InsecureSkipVerify {
		cfg.InsecureSkipVerify = true //nolint:gosec // the scenario asked for it, and the report says so
		return cfg, true, nil
	}
	cfg.ServerName = t.ServerName
	if t.CA != "" {
		pem, err := ReadCA(sc)
		if err != nil {
			return nil, false, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, false, fmt.Errorf("target.tls.ca: %s holds no PEM certificate", caPath(sc))
		}
		cfg.RootCAs = pool
	}
	return cfg, false, nil
}

// MaxCAFileBytes bounds target.tls.ca: a bundle of every public root CA
// is about 220 KiB, and the file goes to distributed workers in a Secret
// that holds at most 1 MiB with the scenario.
const MaxCAFileBytes = 512 << 10

// ReadCA reads the scenario's target.tls.ca (nil when it names none or
// skips verification): a regular file of at most MaxCAFileBytes that holds
// certificates and no private key. It returns the certificates alone,
// PEM-encoded again, which is all a worker needs; a key is refused, never
// echoed. validate, run and the workers' Secret all read it here.
func ReadCA(sc *scenarios.Scenario) ([]byte, error) {
	t := sc.Target.TLS
	if t == nil || t.CA == "" || t.InsecureSkipVerify {
		return nil, nil
	}
	path := caPath(sc)
	data, err := boundedfile.Read(path, MaxCAFileBytes, "a CA file")
	if err != nil {
		return nil, fmt.Errorf("target.tls.ca: %w", err)
	}
	certs, err := certpem.Certificates(data)
	if err != nil {
		return nil, fmt.Errorf("target.tls.ca: %s: %w", path, err)
	}
	return certs, nil
}

// caPath is target.tls.ca's file, relative to the scenario's.
func caPath(sc *scenarios.Scenario) string {
	path := sc.Target.TLS.CA
	if !filepath.IsAbs(path) && sc.File != "" {
		path = filepath.Join(filepath.Dir(sc.File), path)
	}
	return path
}

// PlannedRequests is how many requests the attack will send if nothing
// stops it early; 0 when it cannot be known in advance (closed loop by time).
func PlannedRequests(o attack.Options) int64 {
	var byTime int64
	switch {
	case o.Ramp != nil:
		from, to := o.Ramp.From.Rate(0), o.Ramp.To.Rate(0)
		byTime = int64((from + to) / 2 * o.Ramp.Over.Seconds())
	case o.Rate.Freq > 0 && o.Duration > 0:
		byTime = int64(o.Rate.Rate(0) * o.Duration.Seconds())
	}
	switch {
	case o.Requests > 0 && byTime > 0:
		return min(int64(o.Requests), byTime)
	case o.Requests > 0:
		return int64(o.Requests)
	}
	return byTime
}

// Mode names the attack's load model for the report: ramp, open-loop or
// closed-loop.
func Mode(o attack.Options) string {
	switch {
	case o.Ramp != nil:
		return "ramp"
	case o.Rate.Freq > 0:
		return "open-loop"
	}
	return "closed-loop"
}

// attributor compiles the scenario's rules after its preset's, so a
// scenario's own rules refine a preset rather than being overruled by it.
func attributor(sc *scenarios.Scenario) (*attribution.Attributor, error) {
	var rules []attribution.Rule
	for i, r := range sc.Attribution.Rules {
		ar := attribution.Rule{Name: fmt.Sprintf("attribution.rules[%d]", i), Field: attribution.Field(r.Field), Last: r.Match == "last"}
		switch {
		case r.Body != "":
			ar.Source = attribution.Body
			re, err := regexp.Compile(r.Body)
			if err != nil {
				return nil, fmt.Errorf("attribution.rules[%d].body: %w", i, err)
			}
			ar.Regex = re
		case r.Header != "":
			ar.Source, ar.Key = attribution.Header, r.Header
		case r.JSON != "":
			ar.Source, ar.Key = attribution.JSON, r.JSON
		}
		if r.Regex != "" {
			re, err := regexp.Compile(r.Regex)
			if err != nil {
				return nil, fmt.Errorf("attribution.rules[%d].regex: %w", i, err)
			}
			ar.Regex = re
		}
		rules = append(rules, ar)
	}
	if sc.Attribution.Preset != "" {
		p, err := attribution.Preset(sc.Attribution.Preset)
		if err != nil {
			return nil, fmt.Errorf("attribution.preset: %w", err)
		}
		rules = append(rules, p...)
	}
	var maps []attribution.ValueMap
	for _, m := range sc.Attribution.Map {
		maps = append(maps, attribution.ValueMap{From: attribution.Field(m.From), To: attribution.Field(m.To), Values: m.Values})
	}
	return attribution.New(rules, maps), nil
}
