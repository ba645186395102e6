package attack

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/internal/nginxbin/nginxtest"
)

// measured is what an attack measured, in the terms the statistics use,
// so that two engines' attacks can be compared: counts, codes, errors,
// bodies, bytes, headers, the connections the requests used and what the
// server received.
type measured struct {
	Results, Requests int
	Codes             map[uint16]int
	Errors            map[string]int
	Bodies            map[string]int
	BytesIn, BytesOut uint64
	// Conns is how many distinct connections carried the requests;
	// Unclosed, how many of them the sink was never told closed.
	Conns, Unclosed int
	Truncated       uint64
	// Headers are the response headers of the first answer, Date left out.
	Headers string
	// IDs says whether the request ids were RUN-0 … RUN-(n-1), each once.
	IDs bool
	// SlowerThanTimeout counts results that took at least the timeout.
	SlowerThanTimeout int
	// Served is what the server received (httptest servers only).
	Served map[string]int
}

func measure(sum Summary, sink *memSink, runID string, timeout time.Duration) measured {
	m := measured{Results: len(sink.results), Requests: int(sum.Requests), Truncated: sum.Truncated,
		Codes: map[uint16]int{}, Errors: map[string]int{}, Bodies: map[string]int{}}
	conns := map[uint64]bool{}
	ids := map[string]bool{}
	for _, r := range sink.results {
		m.Codes[r.Code]++
		if r.Error != "" {
			m.Errors[r.Error]++
		}
		m.Bodies[string(r.Body)]++
		m.BytesIn += r.BytesIn
		m.BytesOut += r.BytesOut
		if r.ConnID != 0 {
			conns[r.ConnID] = true
		}
		ids[r.RequestID] = true
		if timeout > 0 && r.Latency >= timeout {
			m.SlowerThanTimeout++
		}
		if m.Headers == "" && r.Headers != nil {
			h := r.Headers.Clone()
			h.Del("Date")
			var b strings.Builder
			h.Write(&b)
			m.Headers = b.String()
		}
	}
	m.Conns = len(conns)
	// net/http's transport may still be closing connections.
	sink.mu.Lock()
	defer sink.mu.Unlock()
	for id := range conns {
		if !sink.closed[id] {
			m.Unclosed++
		}
	}
	m.IDs = len(ids) == len(sink.results)
	for i := range len(sink.results) {
		m.IDs = m.IDs && ids[runID+"-"+strconv.Itoa(i)]
	}
	return m
}

// recorder is an httptest handler's record of the requests it received,
// less what differs by design from one request to the next.
type recorder struct {
	mu   sync.Mutex
	seen map[string]int
}

func (rc *recorder) note(r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	h := r.Header.Clone()
	h.Del("X-Request-Id")
	h.Del("X-Vegeta-Seq")
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s %s host=%s close=%v body=%q\n", r.Method, r.RequestURI, r.Proto, r.Host, r.Close, body)
	h.Write(&b)
	rc.mu.Lock()
	rc.seen[b.String()]++
	rc.mu.Unlock()
}

func (rc *recorder) take() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	s := rc.seen
	rc.seen = map[string]int{}
	return s
}

// engineServer answers by path, the shapes of answer the engines must
// read alike.
func engineServer(t *testing.T) (*httptest.Server, *recorder, func()) {
	rc := &recorder{seen: map[string]int{}}
	release := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/close" {
			rc.note(r)
		}
		switch r.URL.Path {
		case "/fail":
			w.Header().Set("X-Pod", "p-2")
			http.Error(w, "upstream connect error", http.StatusServiceUnavailable)
		case "/chunked":
			for i := range 3 {
				fmt.Fprintf(w, "chunk %d of pod p-%d;", i, i)
				w.(http.Flusher).Flush()
			}
		case "/big":
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			w.Header().Set("Content-Length", strconv.Itoa(n))
			io.Copy(w, io.LimitReader(repeatReader('y'), int64(n)))
		case "/close":
			c, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				c.Close()
			}
		case "/slow-headers", "/slow-body":
			if r.URL.Path == "/slow-body" {
				w.Write([]byte("partial"))
				w.(http.Flusher).Flush()
			}
			select {
			case <-release:
			case <-r.Context().Done():
			}
		case "/headers":
			w.Header().Add("Set-Cookie", "a=1")
			w.Header().Add("Set-Cookie", "b=2")
			w.Header().Set("Pragma", "no-cache")
			w.Header().Set("X-Served-By", "pod callme-1")
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("pod callme-1"))
		case "/empty":
			w.WriteHeader(http.StatusNoContent)
		default:
			fmt.Fprintf(w, "pod callme-%s in c1 %s", r.URL.Query().Get("v"), strings.Repeat("x", 64))
		}
	}))
	return ts, rc, func() { close(release); ts.Close() }
}

type repeatReader byte

func (b repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}

// TestEnginesAgree runs each attack with both engines against real HTTP
// servers (httptest's, Go's own, and nginx in its own process) and
// requires the same measurements from both: counts, codes, error texts
// (timeouts included), bodies as attribution reads them, bytes, response
// headers, connections used and closed (keep-alive on and off), and the
// requests as the server received them.
func TestEnginesAgree(t *testing.T) {
	ts, rc, stop := engineServer(t)
	t.Cleanup(stop)
	dead := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String() + "/"
	}()
	nginx := nginxtest.Start(t, `    keepalive_requests 10000000;
    location /ok { add_header X-Pod "callme-c1-0"; return 200 "I'm callme-service v1 (pod callme-c1-0 in c1)\n"; }
    location /down { return 503 "no healthy upstream\n"; }
    location /close { keepalive_timeout 0; return 200 "closing\n"; }`)
	const ms = time.Millisecond
	cases := []struct {
		name string
		o    Options
		// openLoop: connections depend on timing; compare their count
		// loosely.
		openLoop bool
		server   bool // an httptest path: compare what it received
		// perWorker: the fast engine uses exactly one connection per
		// worker (a closed loop, keep-alive, answers that keep it).
		perWorker bool
	}{
		{"closed loop, keep-alive", Options{URL: ts.URL + "/ok?v=1", Concurrency: 4, Requests: 200, KeepAlive: true, MaxBody: 1 << 10}, false, true, true},
		{"closed loop, keep-alive off", Options{URL: ts.URL + "/ok?v=2", Concurrency: 2, Requests: 40, MaxBody: 1 << 10}, false, true, false},
		{"error answers", Options{URL: ts.URL + "/fail", Concurrency: 2, Requests: 20, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"chunked body", Options{URL: ts.URL + "/chunked", Concurrency: 2, Requests: 20, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"chunked body beyond maxBody", Options{URL: ts.URL + "/chunked", Concurrency: 2, Requests: 20, KeepAlive: true, MaxBody: 20}, false, true, false},
		{"body beyond maxBody, drained", Options{URL: ts.URL + "/big?n=10000", Concurrency: 2, Requests: 20, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"body beyond the drain, truncated", Options{URL: ts.URL + "/big?n=2000000", Concurrency: 2, Requests: 6, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"whole body, no cap", Options{URL: ts.URL + "/big?n=300000", Concurrency: 2, Requests: 6, KeepAlive: true, MaxBody: -1}, false, true, false},
		{"response headers", Options{URL: ts.URL + "/headers", Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"no content", Options{URL: ts.URL + "/empty", Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"POST with a body and headers", Options{Method: http.MethodPost, URL: ts.URL + "/ok?v=3", Body: []byte(`{"a":1}`),
			Header: http.Header{"Content-Type": {"application/json"}, "X-Tenant": {"t1", "t2"}}, Concurrency: 2, Requests: 20, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"POST without a Content-Type", Options{Method: http.MethodPost, URL: ts.URL + "/ok?v=6", Body: []byte("a=1"), Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"POST, empty body", Options{Method: http.MethodPost, URL: ts.URL + "/ok?v=7", Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"GET with a body", Options{URL: ts.URL + "/ok?v=8", Body: []byte("q"), Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"PUT, empty body", Options{Method: http.MethodPut, URL: ts.URL + "/ok?v=9", Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"path kept as given", Options{URL: ts.URL + "/a/../ok%2Fx//y?v=10", Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"HEAD", Options{Method: http.MethodHead, URL: ts.URL + "/ok?v=4", Concurrency: 1, Requests: 5, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"templated URL and header", Options{URL: ts.URL + "/ok?v={{.Seq}}", Header: http.Header{"X-Seq": {"{{.Seq}}"}}, Concurrency: 2, Requests: 20, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"templated body and header, fixed header kept", Options{Method: http.MethodPost, URL: ts.URL + "/ok?v=11", Body: []byte(`{"id":"{{.RequestID}}"}`),
			Header: http.Header{"X-Seq": {"{{.Seq}}"}, "X-Tenant": {"t1", "t2"}, "Content-Type": {"application/json"}}, Concurrency: 2, Requests: 20, KeepAlive: true, MaxBody: 1 << 10}, false, true, false},
		{"timeout before the headers", Options{URL: ts.URL + "/slow-headers", Concurrency: 2, Requests: 2, KeepAlive: true, Timeout: 200 * ms, MaxBody: -1}, false, true, false},
		{"timeout in the body", Options{URL: ts.URL + "/slow-body", Concurrency: 2, Requests: 2, KeepAlive: true, Timeout: 200 * ms, MaxBody: -1}, false, true, false},
		{"connection closed without an answer", Options{URL: ts.URL + "/close", Concurrency: 1, Requests: 3, KeepAlive: true}, false, false, false},
		{"connection refused", Options{URL: dead, Concurrency: 1, Requests: 3, KeepAlive: true, Timeout: time.Second}, false, false, false},
		{"open loop", Options{URL: ts.URL + "/ok?v=5", Rate: vegeta.Rate{Freq: 200, Per: time.Second}, Requests: 60, KeepAlive: true, MaxBody: 1 << 10}, true, true, false},
		{"nginx, keep-alive", Options{URL: nginx + "/ok", Concurrency: 8, Requests: 2000, KeepAlive: true, MaxBody: 1 << 10}, false, false, true},
		{"nginx, keep-alive off", Options{URL: nginx + "/ok", Concurrency: 4, Requests: 200, MaxBody: 1 << 10}, false, false, false},
		{"nginx, error answers", Options{URL: nginx + "/down", Concurrency: 2, Requests: 100, KeepAlive: true, MaxBody: 1 << 10}, false, false, false},
		{"nginx closes each connection", Options{URL: nginx + "/close", Concurrency: 2, Requests: 50, KeepAlive: true, MaxBody: 1 << 10}, false, false, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]measured{}
			for _, engine := range []string{EngineNetHTTP, EngineFast} {
				o := tc.o
				o.Engine, o.RunID = engine, "agree"
				a, err := New(o)
				if err != nil {
					t.Fatal(err)
				}
				if a.Engine() != engine {
					t.Fatalf("engine %s, want %s", a.Engine(), engine)
				}
				var sink memSink
				sum := a.Run(context.Background(), &sink)
				if sum.Engine != engine {
					t.Errorf("summary says engine %q, want %q", sum.Engine, engine)
				}
				m := measure(sum, &sink, o.RunID, o.Timeout)
				if served := rc.take(); tc.server {
					m.Served = served
				}
				if tc.openLoop {
					// Connections follow the timing of the requests in an
					// open loop: each engine keeps a few per lane.
					bound := m.Results/3 + 1
					if raceEnabled {
						bound = m.Results // one per request at most
					}
					if m.Conns == 0 || m.Conns > bound {
						t.Errorf("%s: %d connections for %d requests", engine, m.Conns, m.Results)
					}
					m.Conns = 0
				}
				got[engine] = m
			}
			n, f := got[EngineNetHTTP], got[EngineFast]
			if n.Results != int(tc.o.Requests) || !n.IDs {
				t.Errorf("net/http: %d results (ids in order: %v), want %d", n.Results, n.IDs, tc.o.Requests)
			}
			if tc.perWorker && f.Conns != tc.o.Concurrency {
				t.Errorf("fasthttp: %d connections for %d workers, want one each", f.Conns, tc.o.Concurrency)
			}
			for _, d := range diffMeasured(n, f, !tc.o.KeepAlive) {
				t.Error(d)
			}
		})
	}
}

func diffMeasured(n, f measured, keepAliveOff bool) []string {
	var out []string
	add := func(what string, a, b any) {
		if fmt.Sprint(a) != fmt.Sprint(b) {
			out = append(out, fmt.Sprintf("%s: net/http %v, fasthttp %v", what, a, b))
		}
	}
	add("results", n.Results, f.Results)
	add("requests", n.Requests, f.Requests)
	add("codes", n.Codes, f.Codes)
	add("errors", n.Errors, f.Errors)
	add("bodies", keysAndCounts(n.Bodies), keysAndCounts(f.Bodies))
	add("bytes in", n.BytesIn, f.BytesIn)
	add("bytes out", n.BytesOut, f.BytesOut)
	// Connections: with keep-alive they follow timing. The fast engine
	// holds one per worker (perWorker checks it exactly); net/http's
	// transport at times dials another for a request while a connection
	// it has is on its way back to the pool (returned by its read loop
	// goroutine), or serves a short run's few requests on fewer when a
	// worker starts late, and closes the last ones after the attack
	// returned. Keep-alive off, every request has its own with both.
	if f.Conns > n.Conns+2 || n.Conns > f.Conns+2 || keepAliveOff && n.Conns != f.Conns {
		out = append(out, fmt.Sprintf("connections: net/http %d, fasthttp %d", n.Conns, f.Conns))
	}
	if f.Unclosed != 0 || n.Unclosed > 2 {
		out = append(out, fmt.Sprintf("connections never closed: net/http %d, fasthttp %d", n.Unclosed, f.Unclosed))
	}
	add("truncated", n.Truncated, f.Truncated)
	add("response headers", n.Headers, f.Headers)
	add("ids in order", n.IDs, f.IDs)
	add("results that took the timeout", n.SlowerThanTimeout, f.SlowerThanTimeout)
	add("served", n.Served, f.Served)
	return out
}

// keysAndCounts shortens long bodies for a readable difference.
func keysAndCounts(m map[string]int) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		s := k
		if len(s) > 80 {
			s = fmt.Sprintf("%s…(%d bytes)", s[:40], len(s))
		}
		fmt.Fprintf(&b, "%q×%d ", s, m[k])
	}
	return b.String()
}

// TestEngineChoice: the fast engine sends plain HTTP/1.1; net/http what
// it cannot (HTTP/2, TLS, gRPC, a templated host), and asking for the
// fast one there is an error.
func TestEngineChoice(t *testing.T) {
	for _, c := range []struct {
		name string
		o    Options
		want string
		// why: what the refusal of a forced fast engine says.
		why string
	}{
		{"plain HTTP/1.1", Options{URL: "http://127.0.0.1:8080/ping"}, EngineFast, ""},
		{"templated path", Options{URL: "http://127.0.0.1:8080/ping?id={{.RequestID}}"}, EngineFast, ""},
		{"no port", Options{URL: "http://localhost/"}, EngineFast, ""},
		{"HTTP/2", Options{URL: "http://127.0.0.1:8080/", HTTP2: true}, EngineNetHTTP, "HTTP/2"},
		{"TLS", Options{URL: "https://127.0.0.1:8443/"}, EngineNetHTTP, "scheme https"},
		{"gRPC", Options{URL: "http://127.0.0.1:8080/", HTTP2: true, GRPC: true}, EngineNetHTTP, "HTTP/2"},
		// url.Parse rejects `{` in a host: the URL is rendered per
		// request, by net/http's path only.
		{"templated host", Options{URL: "http://{{.Seq}}.example:8080/"}, EngineNetHTTP, "URL not parsed"},
		{"credentials", Options{URL: "http://u:p@127.0.0.1:8080/"}, EngineNetHTTP, "credentials in the URL"},
		{"a Host header", Options{URL: "http://127.0.0.1:8080/", Header: http.Header{"Host": {"callme.example"}}}, EngineNetHTTP, "a Host header"},
		{"DELETE", Options{URL: "http://127.0.0.1:8080/", Method: http.MethodDelete}, EngineNetHTTP, "method DELETE"},
		{"capitals in the host", Options{URL: "http://Callme.Local:8080/"}, EngineNetHTTP, "capitals in the host"},
		{"net/http asked for", Options{URL: "http://127.0.0.1:8080/", Engine: EngineNetHTTP}, EngineNetHTTP, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.Concurrency, o.Requests = 1, 1
			a, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			if a.Engine() != c.want {
				t.Errorf("engine %s, want %s", a.Engine(), c.want)
			}
			if c.want == EngineNetHTTP && c.o.Engine == "" {
				o.Engine = EngineFast
				if _, err := New(o); err == nil || !strings.Contains(err.Error(), "cannot send these requests: "+c.why) {
					t.Errorf("fast engine forced: %v, want it refused for %q", err, c.why)
				}
			}
		})
	}
	if _, err := New(Options{URL: "http://127.0.0.1:8080/", Concurrency: 1, Requests: 1, Engine: "curl"}); err == nil {
		t.Error("an unknown engine was accepted")
	}
}
