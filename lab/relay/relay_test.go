package relay

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/internal/testutil"
)

// backend is a real TCP server playing an HTTP/1.1 app whose closing
// behaviour each test chooses, per connection (numbered from 0).
type backend struct {
	ln    net.Listener
	conns atomic.Int64
	reqs  atomic.Int64 // requests read, answered or not
	wg    sync.WaitGroup
	// serve handles connection i; it reads requests with next and
	// answers with answer.
	serve func(i int, c net.Conn, next func() (string, bool))
}

const okAnswer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
const closeAnswer = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok"

func startBackend(t *testing.T, serve func(i int, c net.Conn, next func() (string, bool))) *backend {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &backend{ln: ln, serve: serve}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			i := int(b.conns.Add(1) - 1)
			b.wg.Add(1)
			go func() {
				defer b.wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				next := func() (string, bool) {
					req, err := http.ReadRequest(br)
					if err != nil {
						return "", false
					}
					_, _ = io.Copy(io.Discard, req.Body)
					b.reqs.Add(1)
					return req.Method, true
				}
				b.serve(i, c, next)
			}()
		}
	}()
	t.Cleanup(func() { b.stop(); b.wg.Wait() })
	return b
}

func (b *backend) addr() string { return b.ln.Addr().String() }
func (b *backend) stop()        { b.ln.Close() }

// keepAlive answers every request on the connection.
func keepAlive(_ int, c net.Conn, next func() (string, bool)) {
	for {
		if _, ok := next(); !ok {
			return
		}
		if _, err := io.WriteString(c, okAnswer); err != nil {
			return
		}
	}
}

// oneThenIdleClose answers one request, then closes the connection
// without saying so, as nginx does with idle connections on a reload.
func oneThenIdleClose(_ int, c net.Conn, next func() (string, bool)) {
	if _, ok := next(); ok {
		_, _ = io.WriteString(c, okAnswer)
		time.Sleep(50 * time.Millisecond) // idle for a moment, then the reload
	}
}

func startRelay(t *testing.T, target string, linger time.Duration) *Relay {
	t.Helper()
	r, err := Start(target, linger)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// dial is one raw keep-alive connection to the relay; a request that
// hangs fails after 3 s.
func dial(t *testing.T, addr string) *testutil.RawConn { return testutil.Dial(t, addr, 3*time.Second) }

func TestRelay(t *testing.T) {
	cases := []struct {
		name  string
		serve func(i int, c net.Conn, next func() (string, bool))
		// steps are the client's requests on one connection and, for each,
		// whether it gets an answer ("ok") or an error ("err"), or whether
		// the connection is closed after the answer ("eof").
		steps       []string
		wantConns   int64
		wantStats   Stats
		wantBackend int64 // requests the backend read
		// atMost compares backend connections and replays as upper
		// bounds: a write may find the backend's close already there.
		atMost bool
	}{
		{
			name:  "keep-alive passes through on one backend connection",
			serve: keepAlive, steps: []string{"GET ok", "GET ok", "POST ok"},
			wantConns: 1, wantStats: Stats{Connections: 1}, wantBackend: 3,
		},
		{
			name:  "an idle close is not passed on: the next request goes on a new backend connection",
			serve: oneThenIdleClose, steps: []string{"GET ok", "sleep", "GET ok", "sleep", "POST ok"},
			wantConns: 3, wantStats: Stats{Connections: 1, Redials: 2}, wantBackend: 3,
		},
		{
			name: "an announced close is passed on",
			serve: func(_ int, c net.Conn, next func() (string, bool)) {
				if _, ok := next(); ok {
					_, _ = io.WriteString(c, closeAnswer)
				}
			},
			steps: []string{"GET eof"}, wantConns: 1, wantStats: Stats{Connections: 1}, wantBackend: 1,
		},
		{
			name: "a GET the backend closed on unanswered is sent again",
			serve: func(i int, c net.Conn, next func() (string, bool)) {
				if i == 0 {
					next()
					return // read it, answered nothing: the idle close raced it
				}
				keepAlive(i, c, next)
			},
			steps: []string{"GET ok", "GET ok"}, wantConns: 2, wantStats: Stats{Connections: 1, Replays: 1}, wantBackend: 3,
		},
		{
			name: "a POST the backend closed on unanswered resets the client",
			serve: func(i int, c net.Conn, next func() (string, bool)) {
				if i == 0 {
					next()
					return
				}
				keepAlive(i, c, next)
			},
			steps: []string{"POST err"}, wantConns: 1, wantStats: Stats{Connections: 1, Resets: 1}, wantBackend: 1,
		},
		{
			name: "a backend that accepts and closes without answering is given up",
			serve: func(int, net.Conn, func() (string, bool)) {
				// closes at once, having read nothing
			},
			// The first connection closes idle before the GET (a redial when
			// it comes), the rest with the GET unanswered (replays).
			steps: []string{"sleep", "GET err"}, wantConns: MaxIdleRedials + 1, atMost: true,
			wantStats: Stats{Connections: 1, Redials: 1, Replays: MaxIdleRedials - 1, Resets: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.NoLeaks(t)
			b := startBackend(t, tc.serve)
			r := startRelay(t, b.addr(), 0)
			cl := dial(t, r.Addr())
			for i, step := range tc.steps {
				if step == "sleep" {
					time.Sleep(150 * time.Millisecond) // the backend's idle close happens
					continue
				}
				method, want, _ := strings.Cut(step, " ")
				resp, _, err := cl.Do(method, "/", "pod")
				switch want {
				case "ok", "eof":
					if err != nil || resp.StatusCode != http.StatusOK {
						t.Fatalf("step %d (%s): %v %v; want the backend's answer", i, step, resp, err)
					}
					if want == "eof" {
						_ = cl.SetReadDeadline(time.Now().Add(2 * time.Second))
						if _, err := cl.R.ReadByte(); !errors.Is(err, io.EOF) {
							t.Fatalf("step %d: after an answer announcing the close, read %v; want EOF", i, err)
						}
					}
				case "err":
					var ne net.Error
					if err == nil || errors.As(err, &ne) && ne.Timeout() {
						t.Fatalf("step %d (%s): %v, %v; want a prompt connection error, not an answer or a hang", i, step, resp, err)
					}
				}
			}
			waitFor(t, "the backend to count", func() bool {
				if tc.atMost {
					return r.Stats().Open == 0 && b.conns.Load() <= tc.wantConns
				}
				return b.conns.Load() == tc.wantConns && b.reqs.Load() == tc.wantBackend
			}, func() string {
				return fmt.Sprintf("backend connections %d, requests %d", b.conns.Load(), b.reqs.Load())
			})
			got := r.Stats()
			got.Open = 0
			if tc.atMost && got.Replays <= tc.wantStats.Replays {
				got.Replays = tc.wantStats.Replays
			}
			if got != tc.wantStats {
				t.Errorf("stats %+v, want %+v", got, tc.wantStats)
			}
		})
	}
}

// A client that half-closes after its request gets the answer and then
// the close.
func TestRelayHalfClose(t *testing.T) {
	testutil.NoLeaks(t)
	b := startBackend(t, keepAlive)
	r := startRelay(t, b.addr(), 0)
	cl := dial(t, r.Addr())
	if _, err := io.WriteString(cl, "GET / HTTP/1.1\r\nHost: pod\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if err := cl.Conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(cl.R)
	if err != nil || !strings.HasSuffix(string(rest), "ok") {
		t.Fatalf("after a half-close read %q, %v; want the answer, then EOF", rest, err)
	}
	waitFor(t, "the pipe to end", func() bool { return r.Stats().Open == 0 }, func() string { return "open pipes" })
}

// An idle-closed connection the client does not use again is closed
// after the linger time, so a client that left does not keep kwok's
// stream open.
func TestRelayLinger(t *testing.T) {
	testutil.NoLeaks(t)
	b := startBackend(t, oneThenIdleClose)
	r := startRelay(t, b.addr(), 200*time.Millisecond)
	cl := dial(t, r.Addr())
	if resp, _, err := cl.Do("GET", "/", "pod"); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", resp, err)
	}
	begin := time.Now()
	_ = cl.SetReadDeadline(time.Now().Add(3 * time.Second))
	if _, err := cl.R.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("read %v; want EOF once the linger time passed", err)
	}
	if d := time.Since(begin); d < 150*time.Millisecond {
		t.Errorf("closed after %v: before the backend's idle close (50 ms) plus the linger (200 ms)", d)
	}
	if b.conns.Load() != 1 {
		t.Errorf("backend got %d connections; an idle close must not dial again by itself", b.conns.Load())
	}
}

// The backend gone: the client's next request is refused with a reset,
// never left waiting.
func TestRelayBackendGone(t *testing.T) {
	testutil.NoLeaks(t)
	b := startBackend(t, oneThenIdleClose)
	r := startRelay(t, b.addr(), 0)
	cl := dial(t, r.Addr())
	if _, _, err := cl.Do("GET", "/", "pod"); err != nil {
		t.Fatal(err)
	}
	b.stop()
	time.Sleep(150 * time.Millisecond)
	resp, _, err := cl.Do("GET", "/", "pod")
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("GET to a backend that is gone: %v, %v; want a prompt connection error", resp, err)
	}
}

// Close resets the connections still open and stops accepting.
func TestRelayClose(t *testing.T) {
	testutil.NoLeaks(t)
	b := startBackend(t, keepAlive)
	r := startRelay(t, b.addr(), 0)
	cl := dial(t, r.Addr())
	if _, _, err := cl.Do("GET", "/", "pod"); err != nil {
		t.Fatal(err)
	}
	r.Close()
	_ = cl.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := cl.R.ReadByte(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read after Close: %v; want the connection ended", err)
	}
	if c, err := net.DialTimeout("tcp", r.Addr(), time.Second); err == nil {
		c.Close()
		t.Error("the relay still accepts after Close")
	}
}

func TestStartRejects(t *testing.T) {
	for _, c := range []struct {
		target string
		linger time.Duration
		want   string
	}{
		{"192.0.2.1:80", 0, "not a loopback"},
		{"localhost:80", 0, "not a loopback"},
		{"127.0.0.1", 0, "missing port"},
		{"127.0.0.1:80", -time.Second, "negative"},
	} {
		if _, err := Start(c.target, c.linger); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Start(%q, %v) = %v, want an error containing %q", c.target, c.linger, err, c.want)
		}
	}
}

func TestAnnouncesClose(t *testing.T) {
	for head, want := range map[string]bool{
		closeAnswer: true,
		"HTTP/1.1 200 OK\r\nconnection: Keep-Alive, CLOSE\r\n\r\n": true,
		okAnswer: false,
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nConnection: close\r\n": false, // in the body
		"HTTP/1.1 200 OK\r\nX-Connection: close\r\n\r\n":                    false,
		"": false,
	} {
		if got := announcesClose([]byte(head)); got != want {
			t.Errorf("announcesClose(%q) = %v, want %v", head, got, want)
		}
	}
}

// FuzzAnnouncesClose: any bytes are parsed without panic, and a yes
// always rests on a Connection header naming close.
func FuzzAnnouncesClose(f *testing.F) {
	f.Add([]byte(closeAnswer))
	f.Add([]byte(okAnswer))
	f.Add([]byte("Connection:close"))
	f.Fuzz(func(t *testing.T, b []byte) {
		if announcesClose(b) && !strings.Contains(strings.ToLower(string(b)), "close") {
			t.Fatalf("announcesClose(%q) without any close", b)
		}
	})
}

func waitFor(t *testing.T, what string, cond func() bool, state func() string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s: %s", what, state())
		}
	}
}
