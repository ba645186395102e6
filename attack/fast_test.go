package attack

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/internal/rawtest"
)

// rawTarget answers every request on a connection with answer, for
// answers no well-behaved server sends; once: it closes each connection
// after one answer.
func rawTarget(t testing.TB, answer []byte, once bool) string {
	return rawtest.Target(t, answer, once) + "/"
}

// TestFastHeaderLimit: a header block larger than the connection's read
// buffer grows it and is read as net/http reads it; one over
// maxFastHeaderBytes fails the request with an error naming the limit,
// and the connection is not reused.
func TestFastHeaderLimit(t *testing.T) {
	answer := func(headerBytes int) []byte {
		return []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nX-Big: %s\r\nContent-Length: 2\r\n\r\nok", strings.Repeat("h", headerBytes)))
	}
	for _, c := range []struct {
		name    string
		size    int
		wantErr string
	}{
		{"4 KiB read buffer outgrown", 100 << 10, ""},
		{"just under the limit", maxFastHeaderBytes - 1024, ""},
		{"over the limit", maxFastHeaderBytes + 1, fmt.Sprintf("response headers exceed %d bytes", maxFastHeaderBytes)},
	} {
		t.Run(c.name, func(t *testing.T) {
			url := rawTarget(t, answer(c.size), false)
			sum, sink, conns := runToSink(t, Options{URL: url, Concurrency: 1, Requests: 3, KeepAlive: true, RunID: "h", MaxBody: 1 << 10, Engine: EngineFast})
			for _, r := range sink.results {
				switch {
				case c.wantErr == "" && (r.Error != "" || string(r.Body) != "ok" || len(r.Headers.Get("X-Big")) != c.size):
					t.Errorf("result: error %q, body %q, X-Big of %d bytes", r.Error, r.Body, len(r.Headers.Get("X-Big")))
				case c.wantErr != "" && (!strings.Contains(r.Error, c.wantErr) || r.Code != 0):
					t.Errorf("result: code %d, error %q, want %q", r.Code, r.Error, c.wantErr)
				}
			}
			wantConns := 1
			if c.wantErr != "" {
				wantConns = 3
			}
			if sum.Requests != 3 || len(conns) != wantConns {
				t.Errorf("%d requests on %d connections, want 3 on %d", sum.Requests, len(conns), wantConns)
			}
		})
	}
}

// TestFastMaxConnections: attack.maxConnections bounds the connections
// the fast engine opens, the workers waiting for one as net/http's
// MaxConnsPerHost makes them; a wait beyond the timeout is a timeout.
func TestFastMaxConnections(t *testing.T) {
	_, ts := newServer(t)
	for _, c := range []struct {
		name      string
		o         Options
		wantConns int
	}{
		{"closed loop", Options{Concurrency: 8, Requests: 200, KeepAlive: true, MaxConnections: 2}, 2},
		{"open loop over lanes", Options{Rate: vegeta.Rate{Freq: 400, Per: time.Second}, Requests: 200, KeepAlive: true, MaxConnections: 3}, 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			o := c.o
			o.URL, o.RunID, o.Engine = ts.URL, "m", EngineFast
			sum, sink, conns := runToSink(t, o)
			for _, r := range sink.results {
				if r.Error != "" {
					t.Fatalf("request failed: %s", r.Error)
				}
			}
			if len(sink.results) != 200 || len(conns) > c.wantConns || sum.Connections > uint64(c.wantConns) {
				t.Errorf("%d results on %d connections (%d opened), want at most %d", len(sink.results), len(conns), sum.Connections, c.wantConns)
			}
		})
	}
}

// TestFastIdleRetire: through a tunnel (Options.Dial), a connection idle
// for longer than 5 s is closed rather than reused, as the net/http
// engine's IdleConnTimeout does, since a kwok port-forward never passes
// a backend's close of an idle connection on.
func TestFastIdleRetire(t *testing.T) {
	_, ts := newServer(t)
	d := &net.Dialer{}
	a, err := New(Options{URL: ts.URL, Concurrency: 1, Requests: 1, KeepAlive: true, RunID: "i", Engine: EngineFast, Dial: d.DialContext})
	if err != nil {
		t.Fatal(err)
	}
	e := a.fast
	e.stopCh = make(chan struct{})
	p := e.lanes[0]
	deadline := time.Now().Add(time.Second)
	c1, err := p.acquire(deadline)
	if err != nil {
		t.Fatal(err)
	}
	p.release(c1)
	if c2, _ := p.acquire(deadline); c2 != c1 {
		t.Fatal("a connection idle for no time was not reused")
	}
	c1.lastUsed = time.Now().Add(-6 * time.Second)
	p.mu.Lock()
	p.idle = append(p.idle, c1)
	p.mu.Unlock()
	c3, err := p.acquire(deadline)
	if err != nil {
		t.Fatal(err)
	}
	if c3 == c1 {
		t.Error("a connection idle for 6 s through a tunnel was reused")
	}
	e.closeConn(c3)
}

// FuzzFastResponse feeds arbitrary bytes to the fast engine as a server's
// answer: it must not panic or hang, every request gets one result, a
// result with a code has no transport error and its body is within
// maxBody, and an answer net/http reads as a whole response with a
// status code is read with the same code.
func FuzzFastResponse(f *testing.F) {
	for _, s := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\nX-Pod: p\r\n\r\nnope",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-T\r\n\r\n2\r\nok\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.0 200 OK\r\n\r\nuntil close",
		"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 204 No Content\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\nok",
		"HTTP/1.1 200\r\nPragma: no-cache\r\nConnection: close\r\nContent-Length: 0\r\n\r\n",
		"HTTP/1.1 200 OK\n\n", // bare LF: net/http reads it, fasthttp does not
		"garbage\r\n\r\n",
		"",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, answer []byte) {
		url := rawTarget(t, answer, true)
		a, err := New(Options{URL: url, Concurrency: 1, Requests: 2, KeepAlive: true, RunID: "f", MaxBody: 64,
			Timeout: time.Second, Engine: EngineFast})
		if err != nil {
			t.Fatal(err)
		}
		var sink memSink
		a.Run(context.Background(), &sink)
		if len(sink.results) != 2 {
			t.Fatalf("%d results for 2 requests", len(sink.results))
		}
		want := 0
		// Header lines that end in a bare LF are left out: net/http takes
		// them, fasthttp does not (a known difference between the engines,
		// which no server in front of a mesh sends).
		if resp, err := http.ReadResponse(bufio.NewReader(bytes.NewReader(answer)), nil); err == nil && crlfHead(answer) {
			if _, err := io.Copy(io.Discard, resp.Body); err == nil && resp.StatusCode >= 200 {
				want = resp.StatusCode
			}
		}
		// Every answer is the same (a new connection each): every result
		// is checked, and an answer net/http reads must be read by the
		// fast engine too, not failed.
		for i, r := range sink.results {
			if r.Code != 0 && (len(r.Body) > 64 || r.Headers == nil) {
				t.Errorf("result %d: code %d with a body of %d bytes, headers %v", i, r.Code, len(r.Body), r.Headers)
			}
			if want != 0 && int(r.Code) != want {
				t.Errorf("result %d: code %d (error %q), net/http reads %d", i, r.Code, r.Error, want)
			}
		}
	})
}

// crlfHead says whether every line of answer's header block, up to its
// first empty line, ends in CRLF.
func crlfHead(answer []byte) bool {
	for {
		i := bytes.IndexByte(answer, '\n')
		if i < 1 || answer[i-1] != '\r' {
			return false
		}
		if i == 1 {
			return true
		}
		answer = answer[i+1:]
	}
}

// TestFastHeaderGrowthDoesNotNest: a connection whose reader grew for a
// large header block reads the next large answers on it whole, and its
// reader reads the connection (through the carry-over of the previous
// buffer), not through the previous, smaller readers. Over a real TCP
// connection to rawTarget.
func TestFastHeaderGrowthDoesNotNest(t *testing.T) {
	const big = 100 << 10
	answer := []byte(fmt.Sprintf("HTTP/1.1 200 OK\r\nX-Big: %s\r\nContent-Length: 2\r\n\r\nok", strings.Repeat("h", big)))
	url := rawTarget(t, answer, false)
	nc, err := net.Dial("tcp", strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &fconn{Conn: nc, br: bufio.NewReaderSize(nc, fastReadBuffer)}
	w := &fastWorker{}
	for i := range 3 {
		if _, err := nc.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		w.resp.Reset()
		w.resp.StreamBody = true
		if err := w.readHeader(c); err != nil {
			t.Fatalf("answer %d: %v", i, err)
		}
		if got := len(w.resp.Header.Peek("X-Big")); got != big {
			t.Fatalf("answer %d: X-Big of %d bytes, want %d", i, got, big)
		}
		body, err := io.ReadAll(w.resp.BodyStream())
		if err != nil || string(body) != "ok" {
			t.Fatalf("answer %d: body %q, %v", i, body, err)
		}
		w.resp.CloseBodyStream() //nolint:errcheck
		// bufio.Reader keeps its source in the unexported field rd: its
		// dynamic type shows whether readers nest.
		if rd := reflect.ValueOf(c.br).Elem().FieldByName("rd").Elem().Type(); rd == reflect.TypeOf(c.br) {
			t.Fatalf("answer %d: the reader reads through another %v", i, rd)
		}
	}
}
