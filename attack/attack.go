// Package attack fires a rate-controlled load at one entry point with vegeta
// as a library, stamping every request with a unique id and recording which
// connection carried it, because many meshes balance per connection and the
// statistics must know which requests were not independent draws.
package attack

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"text/template"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// DialFunc opens a connection to the target; a tunnel (port-forward through
// the API server) plugs in here so each HTTP connection is its own stream.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// Options configure one attack. Open loop: Rate (or Ramp) for Duration or
// Requests, whichever ends first. Closed loop: Concurrency workers sending
// back to back (Rate zero), like `siege -c`.
type Options struct {
	Method string
	URL    string
	Header http.Header
	Body   []byte

	Rate        vegeta.Rate
	Ramp        *Ramp
	Duration    time.Duration
	Requests    uint64
	Concurrency int

	Timeout   time.Duration
	KeepAlive bool
	// Connections spreads keep-alive requests at random over this many
	// lanes, each with its own connection pool, so an open-loop attack
	// uses several connections even when one would keep up: meshes that
	// balance per connection give one draw per connection, not per request.
	Connections    int
	MaxConnections int
	HTTP2          bool
	// MaxBody is how much of each body is read (vegeta's -max-body; < 0
	// reads all of it); beyond it a body is abandoned (see cappedBody).
	MaxBody    int64
	MaxWorkers uint64

	// GRPC keeps each response's trailers (Result.Trailer), where gRPC
	// puts a call's status.
	GRPC bool

	// TLS checks an https target's certificate; nil verifies it with the
	// system roots (the scenario's target.tls relaxes or pins it).
	TLS *tls.Config

	// Abort, when it ends, cuts the requests in flight short (a second
	// Ctrl-C); the context Run is given only stops new ones and lets
	// those in flight finish. Results cut short are not counted as the
	// target's failures: Summary.Aborted counts them.
	Abort context.Context

	// RequestIDHeader carries RunID-Seq on every request.
	RequestIDHeader string
	RunID           string

	// Dial replaces the network dialer (nil: plain TCP).
	Dial DialFunc

	// Engine picks what sends the requests: EngineAuto (empty) the fast
	// engine wherever it can (plain HTTP/1.1, see fastEngineFor) and
	// net/http elsewhere; EngineFast or EngineNetHTTP insist on one (the
	// fast one fails New where it cannot).
	Engine string
}

// Ramp is a linear increase of the rate.
type Ramp struct {
	From, To vegeta.Rate
	Over     time.Duration
}

// Result is one request's outcome with the ids that join it to logs and
// to its connection.
type Result struct {
	*vegeta.Result
	RequestID string
	ConnID    uint64
	// Trailer is the response's trailers (Options.GRPC only).
	Trailer http.Header
}

// Sink receives results in order of completion and connection closes from
// the transport's goroutines; implementations must be safe for both.
type Sink interface {
	Add(r *Result)
	ConnClosed(id uint64)
}

// Summary tells how the attack itself went, apart from what it measured.
type Summary struct {
	Started       time.Time `json:"started"`
	Ended         time.Time `json:"ended"`
	Requests      uint64    `json:"requests"`
	RequestedRate float64   `json:"requestedRate"` // per second; 0 = as fast as the workers go
	AchievedRate  float64   `json:"achievedRate"`
	// Connections is how many TCP connections were opened. With
	// keep-alive on the net/http engine a few may carry no request (Go's
	// transport dials for a request that a connection becoming idle then
	// takes); the statistics use the connection each result records, not
	// this count.
	Connections uint64 `json:"connections"`
	// Truncated counts responses whose body went on beyond MaxBody plus
	// a short drain: the rest was not transferred and their connection was
	// closed (each such request ends its keep-alive connection).
	Truncated uint64 `json:"truncated,omitempty"`
	// Aborted counts requests cut short by Options.Abort, not in Requests.
	Aborted uint64 `json:"aborted,omitempty"`
	// Attributing is the time the sink took over the results (attribution,
	// tally, recording). It runs on the loop that takes vegeta's results,
	// so when it is a large part of Elapsed it held the workers back.
	Attributing time.Duration `json:"attributing"`
	Interrupted bool          `json:"interrupted"`
	Elapsed     time.Duration `json:"elapsed"`
	// Engine is what sent the requests: "fasthttp" (plain HTTP/1.1 on
	// connections the attack holds itself) or "net/http" (vegeta's
	// attacker over Go's client: HTTP/2, TLS, gRPC).
	Engine string `json:"engine,omitempty"`
}

// Attack is a prepared attack: templates parsed, transport built.
type Attack struct {
	opts    Options
	tr      *tracker
	client  *http.Client
	target  *requestTemplate
	pacer   vegeta.Pacer
	workers uint64
	maxW    uint64
	// fast, when set, sends the requests instead of vegeta's attacker
	// over client.
	fast *fastEngine
}

// New checks the options and prepares the attack.
func New(o Options) (*Attack, error) {
	if o.Method == "" {
		o.Method = http.MethodGet
	}
	if o.RequestIDHeader == "" {
		o.RequestIDHeader = "X-Request-Id"
	}
	// Canonical once, so neither the targeter nor the transport
	// canonicalises (and allocates) it per request.
	o.RequestIDHeader = http.CanonicalHeaderKey(o.RequestIDHeader)
	if o.Timeout <= 0 {
		o.Timeout = 10 * time.Second
	}
	if o.Rate.Freq == 0 && o.Ramp == nil && o.Concurrency <= 0 {
		return nil, errors.New("attack: no rate, ramp or concurrency")
	}
	if o.Duration <= 0 && o.Requests == 0 && o.Ramp == nil {
		return nil, errors.New("attack: unbounded: set a duration or a request count")
	}
	tmpl, err := newRequestTemplate(o)
	if err != nil {
		return nil, err
	}
	a := &Attack{opts: o, target: tmpl}
	a.tr = newTracker(o.Dial)
	a.client = &http.Client{
		// No Client.Timeout: recordingTransport bounds each request by
		// o.Timeout itself, for a fraction of the cost.
		Transport: &recordingTransport{next: a.transport(), tr: a.tr, ridHeader: o.RequestIDHeader, runID: o.RunID, timeout: o.Timeout, timeoutCause: errRequestTimeout(o.Timeout), maxBody: o.MaxBody, abort: o.Abort, trailers: o.GRPC},
		// A mesh entry answering with a redirect is a finding, not a hop to follow.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	a.pacer, a.workers, a.maxW = o.pacing()
	switch u, why := fastEngineFor(o); {
	case o.Engine == EngineNetHTTP:
	case o.Engine == EngineFast && u == nil:
		return nil, fmt.Errorf("attack: engine %s cannot send these requests: %s", EngineFast, why)
	case o.Engine == EngineFast || o.Engine == EngineAuto && u != nil:
		a.fast = newFastEngine(a, u)
	case o.Engine != EngineAuto:
		return nil, fmt.Errorf("attack: engine %q: want %q or %q", o.Engine, EngineFast, EngineNetHTTP)
	}
	return a, nil
}

// Engine is the engine that sends the attack's requests.
func (a *Attack) Engine() string {
	if a.fast != nil {
		return EngineFast
	}
	return EngineNetHTTP
}

func (o Options) pacing() (p vegeta.Pacer, workers, maxWorkers uint64) {
	workers, maxWorkers = vegeta.DefaultWorkers, vegeta.DefaultMaxWorkers
	if o.MaxWorkers > 0 {
		maxWorkers = o.MaxWorkers
	}
	switch {
	case o.Ramp != nil:
		slope := (o.Ramp.To.Rate(0) - o.Ramp.From.Rate(0)) / o.Ramp.Over.Seconds()
		p = vegeta.LinearPacer{StartAt: o.Ramp.From, Slope: slope}
	case o.Rate.Freq > 0:
		p = o.Rate
	default:
		// Closed loop: a zero rate makes vegeta send as fast as its workers
		// allow, so pinning the workers to the concurrency gives siege -c.
		p = vegeta.Rate{}
		workers, maxWorkers = uint64(o.Concurrency), uint64(o.Concurrency)
	}
	if o.Concurrency > 0 {
		if workers > uint64(o.Concurrency) {
			workers = uint64(o.Concurrency)
		}
		maxWorkers = uint64(o.Concurrency)
	}
	if o.Requests > 0 {
		p = countPacer{Pacer: p, limit: o.Requests}
	}
	return p, workers, maxWorkers
}

// countPacer stops an attack after a fixed number of hits, which vegeta's
// pacers do not do by themselves.
type countPacer struct {
	vegeta.Pacer
	limit uint64
}

func (c countPacer) Pace(elapsed time.Duration, hits uint64) (time.Duration, bool) {
	if hits >= c.limit {
		return 0, true
	}
	return c.Pacer.Pace(elapsed, hits)
}

// DefaultLanes is how many connections an open-loop keep-alive attack
// spreads its requests over unless told otherwise.
const DefaultLanes = 10

// lanes is how many connection pools requests are spread over, and the
// connections each may open (0: no bound): one pool without keep-alive.
func (o Options) lanes() (lanes, perLane int) {
	lanes = o.Connections
	if lanes == 0 && o.Concurrency == 0 {
		lanes = DefaultLanes
	}
	if o.MaxConnections > 0 && lanes > o.MaxConnections {
		lanes = o.MaxConnections
	}
	if !o.KeepAlive || lanes <= 1 {
		return 1, o.MaxConnections
	}
	if o.MaxConnections > 0 {
		perLane = max(1, o.MaxConnections/lanes)
	}
	return lanes, perLane
}

func (a *Attack) transport() http.RoundTripper {
	lanes, perLane := a.opts.lanes()
	if lanes == 1 {
		return a.pool(perLane)
	}
	l := make(laneTransport, lanes)
	for i := range l {
		l[i] = a.pool(perLane)
	}
	return l
}

// tlsConfig is a copy of TLS for one pool (a tls.Config must not be
// shared while in use and changed).
func (o Options) tlsConfig() *tls.Config {
	if o.TLS == nil {
		return &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return o.TLS.Clone()
}

func (a *Attack) pool(maxConns int) *http.Transport {
	o := a.opts
	idle := vegeta.DefaultConnections
	if maxConns > 0 {
		idle = maxConns
	}
	t := &http.Transport{
		Proxy:               nil, // the entry is local; an ambient HTTP_PROXY must not reroute it
		DialContext:         a.tr.dialContext,
		TLSClientConfig:     o.tlsConfig(),
		MaxIdleConnsPerHost: idle,
		MaxConnsPerHost:     maxConns,
		DisableKeepAlives:   !o.KeepAlive,
		ForceAttemptHTTP2:   o.HTTP2,
		DisableCompression:  true,
	}
	if o.Dial != nil {
		// Through a kwok port-forward, a backend closing an idle
		// connection is never passed on to the stream, and a request sent
		// on it waits for the timeout: retire idle connections before the
		// servers' own idle timeouts (10 s for Go servers) can fire.
		t.IdleConnTimeout = 5 * time.Second
	}
	if o.HTTP2 {
		// HTTP/2 only: negotiated by ALPN over TLS, and with prior
		// knowledge (h2c) on a cleartext URL, as meshes carry gRPC and h2
		// between sidecars. One connection then multiplexes many requests.
		var p http.Protocols
		p.SetHTTP2(true)
		p.SetUnencryptedHTTP2(true)
		t.Protocols = &p
	} else {
		// A non-nil empty map is how net/http is told not to negotiate h2.
		t.TLSNextProto = map[string]func(string, *tls.Conn) http.RoundTripper{}
	}
	return t
}

// laneTransport sends each request over a lane picked at random. Not
// round-robin: a deterministic lane order aliases with a deterministic
// balancer (nginx's or Envoy's round robin) and ties connections to
// backends that in fact balance per request.
type laneTransport []*http.Transport

func (l laneTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return l[rand.IntN(len(l))].RoundTrip(req)
}

func (l laneTransport) CloseIdleConnections() {
	for _, t := range l {
		t.CloseIdleConnections()
	}
}

// Run fires the attack until it ends or ctx is cancelled, handing every
// result to sink. A cancelled attack still returns its summary.
func (a *Attack) Run(ctx context.Context, sink Sink) Summary {
	a.tr.setSink(sink)
	if a.fast != nil {
		sum := Summary{Started: time.Now(), RequestedRate: a.requestedRate(), Engine: EngineFast}
		a.fast.run(ctx, sink, &sum)
		a.finish(&sum)
		return sum
	}
	atk := vegeta.NewAttacker(
		vegeta.Workers(a.workers),
		vegeta.MaxWorkers(a.maxW),
		vegeta.MaxBody(a.opts.MaxBody),
		vegeta.Redirects(vegeta.NoFollow),
		// Our client goes last: vegeta's transport options type-assert
		// *http.Transport and would silently skip our wrapper otherwise.
		vegeta.Client(a.client),
	)
	sum := Summary{Started: time.Now(), RequestedRate: a.requestedRate(), Engine: EngineNetHTTP}
	res := atk.Attack(a.target.targeter(), a.pacer, a.opts.Duration, "")
	done := ctx.Done()
	var abortDone <-chan struct{}
	if a.opts.Abort != nil {
		abortDone = a.opts.Abort.Done()
	}
	for {
		select {
		case r, ok := <-res:
			if !ok {
				a.client.CloseIdleConnections()
				a.finish(&sum)
				return sum
			}
			if aborted(a.opts.Abort, r) {
				sum.Aborted++
				a.tr.take(r.Seq)
				continue
			}
			sum.Requests++
			t0 := time.Now()
			sink.Add(a.result(r))
			sum.Attributing += time.Since(t0)
		case <-done:
			// Keep draining: in-flight requests finish (bounded by the
			// timeout) and are counted, so nothing measured is lost.
			atk.Stop()
			sum.Interrupted = true
			done = nil
		case <-abortDone:
			atk.Stop()
			sum.Interrupted = true
			abortDone = nil
		}
	}
}

// finish completes the summary once the last result is in.
func (a *Attack) finish(sum *Summary) {
	sum.Ended = time.Now()
	sum.Elapsed = sum.Ended.Sub(sum.Started)
	if s := sum.Elapsed.Seconds(); s > 0 {
		sum.AchievedRate = float64(sum.Requests) / s
	}
	sum.Connections = a.tr.opened()
	sum.Truncated = a.tr.truncated.Load()
}

// aborted tells a result cut short by Abort (no response, after Abort
// ended) from the target's own failures.
func aborted(abort context.Context, r *vegeta.Result) bool {
	return abort != nil && abort.Err() != nil && r.Code == 0 && r.Error != ""
}

func (a *Attack) requestedRate() float64 {
	switch {
	case a.opts.Ramp != nil:
		return a.opts.Ramp.To.Rate(0)
	case a.opts.Rate.Freq > 0:
		return a.opts.Rate.Rate(0)
	}
	return 0
}

func (a *Attack) result(r *vegeta.Result) *Result {
	var out *Result
	if f := a.tr.take(r.Seq); f != nil {
		// The request's inflight, allocated anyway, holds its result.
		out = &f.res
		out.RequestID, out.ConnID = f.meta.rid, f.meta.conn
		out.Trailer = f.meta.trailer
	} else {
		out = &Result{}
	}
	out.Result = r
	if a.opts.GRPC && out.Trailer == nil {
		out.Trailer = http.Header{} // a gRPC answer, with its status in the headers or nowhere
	}
	return out
}

// requestTemplate renders the per-request URL, headers and body; templates
// are only executed where the scenario used them, to keep the hot path cheap.
type requestTemplate struct {
	method, url string
	header      http.Header
	body        []byte
	urlT, bodyT *template.Template
	headerT     map[string]*template.Template
	ridHeader   string
	runID       string
}

// TemplateData is what `{{.RequestID}}` and `{{.Seq}}` expand to.
type TemplateData struct {
	RequestID string
	Seq       uint64
}

func newRequestTemplate(o Options) (*requestTemplate, error) {
	rt := &requestTemplate{method: o.Method, url: o.URL, header: o.Header.Clone(), body: o.Body,
		ridHeader: o.RequestIDHeader, runID: o.RunID, headerT: map[string]*template.Template{}}
	if rt.header == nil {
		rt.header = http.Header{}
	}
	// The request id header is the attack's own: a value the scenario
	// gave it is replaced on every request.
	delete(rt.header, rt.ridHeader)
	var err error
	if rt.urlT, err = parseIfTemplate("url", o.URL); err != nil {
		return nil, err
	}
	if rt.bodyT, err = parseIfTemplate("body", string(o.Body)); err != nil {
		return nil, err
	}
	for k, vs := range rt.header {
		if len(vs) == 1 {
			t, err := parseIfTemplate("header "+k, vs[0])
			if err != nil {
				return nil, err
			}
			if t != nil {
				rt.headerT[k] = t
			}
		}
	}
	return rt, nil
}

func parseIfTemplate(name, s string) (*template.Template, error) {
	if !strings.Contains(s, "{{") {
		return nil, nil
	}
	t, err := template.New(name).Option("missingkey=error").Parse(s)
	if err != nil {
		return nil, fmt.Errorf("attack: template in %s: %w", name, err)
	}
	return t, nil
}

// static says whether every request is the same but for its id and
// sequence number: nothing in it is templated.
func (rt *requestTemplate) static() bool {
	return rt.urlT == nil && rt.bodyT == nil && len(rt.headerT) == 0
}

// targeter numbers requests itself: vegeta's Seq is assigned before the
// targeter runs, but not handed to it.
func (rt *requestTemplate) targeter() vegeta.Targeter {
	if rt.static() {
		// Nothing to render: every request is the same but for its id,
		// which recordingTransport adds from vegeta's sequence number
		// (numbered like seq below, from 0). The header map is shared:
		// vegeta copies it into the request it builds and never writes
		// it.
		return func(t *vegeta.Target) error {
			t.Method, t.URL, t.Body, t.Header = rt.method, rt.url, rt.body, rt.header
			return nil
		}
	}
	var seq atomic.Uint64
	return func(t *vegeta.Target) error {
		n := seq.Add(1) - 1
		var num [20]byte
		d := TemplateData{RequestID: rt.runID + "-" + string(strconv.AppendUint(num[:0], n, 10)), Seq: n}
		t.Method = rt.method
		t.URL = rt.url
		t.Body = rt.body
		// The value slices are shared with the template: vegeta copies
		// them into the request it builds and never writes them.
		t.Header = make(http.Header, len(rt.header)+1)
		for k, vs := range rt.header {
			t.Header[k] = vs
		}
		t.Header[rt.ridHeader] = []string{d.RequestID}
		var buf bytes.Buffer
		if rt.urlT != nil {
			if err := rt.urlT.Execute(&buf, d); err != nil {
				return err
			}
			t.URL = buf.String()
		}
		if rt.bodyT != nil {
			buf.Reset()
			if err := rt.bodyT.Execute(&buf, d); err != nil {
				return err
			}
			t.Body = bytes.Clone(buf.Bytes())
		}
		for k, ht := range rt.headerT {
			buf.Reset()
			if err := ht.Execute(&buf, d); err != nil {
				return err
			}
			t.Header.Set(k, buf.String())
		}
		return nil
	}
}
