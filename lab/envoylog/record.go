package envoylog

import (
	"context"
	"io"
	"net/http"
	"net/http/httptrace"
	"strconv"
	"time"
)

// Recorder wraps a proxy's ResponseWriter to learn what Envoy's access
// log says about the response: its status and the body bytes sent.
type Recorder struct {
	http.ResponseWriter
	Code  int   // 0 until a status was written
	Bytes int64 // %BYTES_SENT%
}

// WriteHeader records the first status written.
func (w *Recorder) WriteHeader(code int) {
	if w.Code == 0 {
		w.Code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write counts the body bytes (a first Write is a 200).
func (w *Recorder) Write(b []byte) (int, error) {
	if w.Code == 0 {
		w.Code = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.Bytes += int64(n)
	return n, err
}

// Flush lets streamed answers through (httputil.ReverseProxy flushes).
func (w *Recorder) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// BodyCounter wraps a request body to count %BYTES_RECEIVED%.
type BodyCounter struct {
	R io.ReadCloser
	N int64
}

func (c *BodyCounter) Read(p []byte) (int, error) {
	n, err := c.R.Read(p)
	c.N += int64(n)
	return n, err
}

// Close closes the wrapped body.
func (c *BodyCounter) Close() error { return c.R.Close() }

// CountBody replaces r's body (if any) with a counter and returns it.
func CountBody(r *http.Request) *BodyCounter {
	c := &BodyCounter{R: r.Body}
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = c
	}
	return c
}

// Exchange is what a proxy learns about one request while forwarding it,
// for the fields of its access-log line that come from the upstream side.
type Exchange struct {
	sent          time.Time
	Upstream      time.Duration // until the upstream's response headers; -1 if none
	Flags         string
	Details       string
	UpstreamLocal string // the proxy's end of the upstream connection
}

type exchangeKey struct{}

// NewExchange starts recording a request that has not reached an upstream
// yet; Flags and Details say it went through until something fails.
func NewExchange() *Exchange {
	return &Exchange{Upstream: -1, Flags: FlagNone, Details: DetailsViaUpstream}
}

// Context attaches x to ctx, with a trace that notes the upstream
// connection; the request forwarded with it is the one timed.
func (x *Exchange) Context(ctx context.Context) context.Context {
	x.sent = time.Now()
	ctx = context.WithValue(ctx, exchangeKey{}, x)
	return httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GotConn: func(info httptrace.GotConnInfo) { x.UpstreamLocal = info.Conn.LocalAddr().String() },
	})
}

// ExchangeOf returns the Exchange attached to ctx, or nil.
func ExchangeOf(ctx context.Context) *Exchange {
	x, _ := ctx.Value(exchangeKey{}).(*Exchange)
	return x
}

// Answered notes the upstream's response headers: the upstream service
// time, which Envoy's router also passes on in the response's
// x-envoy-upstream-service-time when setHeader is true.
func (x *Exchange) Answered(resp *http.Response, setHeader bool) {
	x.Upstream = time.Since(x.sent)
	if setHeader {
		resp.Header.Set("X-Envoy-Upstream-Service-Time", strconv.FormatInt(x.Upstream.Milliseconds(), 10))
	}
}

// Failed notes a forward that failed: the client went away (DC), or the
// upstream could not be reached (UF).
func (x *Exchange) Failed(clientGone bool) {
	if clientGone {
		x.Flags, x.Details = FlagDownstreamDisconnect, DetailsDownstreamDisconnect
		return
	}
	x.Flags, x.Details = FlagUpstreamConnFailure, DetailsConnectionFailure
}

// Done notes the end of the request: a client that went away before any
// answer was written is a downstream disconnect.
func (x *Exchange) Done(r *http.Request, rec *Recorder) {
	if r.Context().Err() != nil && rec.Code == 0 {
		x.Failed(true)
	}
}

// NoRoute notes that no route matched the request (NR): Envoy answers
// 404 itself.
func (x *Exchange) NoRoute() {
	x.Flags, x.Details = FlagNoRoute, DetailsRouteNotFound
}

// NoUpstream notes that no endpoint was there to forward to (UH).
func (x *Exchange) NoUpstream() {
	x.Flags, x.Details = FlagNoHealthyUpstream, DetailsNoHealthyUpstream
}
