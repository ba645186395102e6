package attack

import (
	"cmp"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func TestParseConnectTo(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []string
		want   []ConnectToEntry
	}{
		{"full", []string{"svc.ns:8080:127.0.0.1:40001"}, []ConnectToEntry{{"svc.ns", 8080, "127.0.0.1", 40001}}},
		{"comma list and repeated values", []string{"a:80:127.0.0.1:1,b:81::2", "c:82:h:"},
			[]ConnectToEntry{{"a", 80, "127.0.0.1", 1}, {"b", 81, "", 2}, {"c", 82, "h", 0}}},
		{"any host, any port", []string{"::127.0.0.1:9"}, []ConnectToEntry{{"", 0, "127.0.0.1", 9}}},
		{"IPv6 in brackets, case folded", []string{"[::1]:443:Example.COM:8443", "A:1:[0:0::1]:2"},
			[]ConnectToEntry{{"::1", 443, "example.com", 8443}, {"a", 1, "::1", 2}}},
		{"empty items skipped", []string{"", " , x:1:y:2 ,"}, []ConnectToEntry{{"x", 1, "y", 2}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ct, err := ParseConnectTo(c.values...)
			if err != nil {
				t.Fatal(err)
			}
			got := ct.Entries()
			if fmt.Sprint(got) != fmt.Sprint(c.want) {
				t.Errorf("ParseConnectTo(%q) = %v, want %v", c.values, got, c.want)
			}
			// An entry prints back as it parses.
			for _, e := range got {
				again, err := ParseConnectTo(e.String())
				if err != nil || len(again.entries) != 1 || again.entries[0] != e {
					t.Errorf("%v printed as %q parses to %v, %v", e, e.String(), again.Entries(), err)
				}
			}
		})
	}
}

func TestParseConnectToErrors(t *testing.T) {
	long := strings.Repeat("a", MaxConnectToHost+1)
	many := strings.TrimSuffix(strings.Repeat("h:1:c:2,", MaxConnectToEntries+1), ",")
	for _, c := range []struct {
		value, want string
	}{
		{"a:1:b", `connect-to entry 1 "a:1:b": want HOST:PORT:CONNECT_HOST:CONNECT_PORT (too few fields)`},
		{"ok:1:b:2,a:1:b:2:3", `connect-to entry 2 "a:1:b:2:3": want HOST:PORT:CONNECT_HOST:CONNECT_PORT (too many fields)`},
		{"a:http:b:2", `connect-to entry 1 "a:http:b:2": PORT: "http" is not a port number (1-65535)`},
		{"a:1:b:65536", `CONNECT_PORT: "65536" is not a port number`},
		{"a:0:b:1", `PORT: "0" is not a port number`},
		{"a b:1:c:2", `HOST: "a b": character ' ' is not allowed`},
		{"[::1:1:c:2", `unclosed '['`},
		{"a:1:[1.2.3.4]:2", `CONNECT_HOST: "[1.2.3.4]" is not an IPv6 address`},
		{"[::1]x:1:c:2", `want ':' after a bracketed host`},
		{long + ":1:c:2", fmt.Sprintf("HOST: longer than %d characters", MaxConnectToHost)},
		{many, fmt.Sprintf("more than %d entries", MaxConnectToEntries)},
		{strings.Repeat("x", MaxConnectToLen), fmt.Sprintf("longer than %d bytes", MaxConnectToLen)},
	} {
		_, err := ParseConnectTo(c.value)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			name := c.value
			if len(name) > 40 {
				name = name[:40] + "…"
			}
			t.Errorf("ParseConnectTo(%q) = %v, want an error containing %q", name, err, c.want)
		}
	}
	// The limits are inclusive: exactly the maximum parses.
	atMax := strings.TrimSuffix(strings.Repeat("h:1:c:2,", MaxConnectToEntries), ",")
	if ct, err := ParseConnectTo(atMax); err != nil || len(ct.entries) != MaxConnectToEntries {
		t.Errorf("%d entries: %v", MaxConnectToEntries, err)
	}
	if _, err := ParseConnectTo(strings.Repeat("a", MaxConnectToHost) + ":1:c:2"); err != nil {
		t.Errorf("a %d-character host: %v", MaxConnectToHost, err)
	}
}

func TestConnectToResolve(t *testing.T) {
	ct, err := ParseConnectTo(
		"svc.ns:8080:127.0.0.1:1",
		"other:8080:127.0.0.1:2",
		"svc.ns:8080:127.0.0.1:3", // same HOST:PORT as the first: a candidate too
		"svc.ns::127.0.0.1:4",     // matches svc.ns on any port, but comes after the first match
		"keep:90::",
		":9999:127.0.0.9:",
	)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		addr string
		want []string // any of these
		ok   bool
	}{
		{"svc.ns:8080", []string{"127.0.0.1:1", "127.0.0.1:3"}, true},
		{"SVC.NS:8080", []string{"127.0.0.1:1", "127.0.0.1:3"}, true},
		{"svc.ns:81", []string{"127.0.0.1:4"}, true},
		{"keep:90", []string{"keep:90"}, true},
		{"anything:9999", []string{"127.0.0.9:9999"}, true},
		{"nomatch:8080", []string{"nomatch:8080"}, false},
	} {
		seen := map[string]int{}
		for range 200 {
			got, ok := ct.Resolve(c.addr)
			if ok != c.ok {
				t.Fatalf("Resolve(%s) ok = %v, want %v", c.addr, ok, c.ok)
			}
			seen[got]++
		}
		if len(seen) != len(c.want) {
			t.Errorf("Resolve(%s) gave %v, want each of %v", c.addr, seen, c.want)
		}
		for _, w := range c.want {
			if seen[w] == 0 {
				t.Errorf("Resolve(%s) never gave %s in 200 tries: %v", c.addr, w, seen)
			}
		}
	}
	var none *ConnectTo
	if got, ok := none.Resolve("a:1"); ok || got != "a:1" {
		t.Errorf("nil list: %s %v", got, ok)
	}
}

// countingServer counts the connections and requests it serves.
type countingServer struct {
	mu    sync.Mutex
	conns int
	reqs  int
	proto map[string]int
}

func (s *countingServer) start(t *testing.T, h2c bool) *httptest.Server {
	s.proto = map[string]int{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.reqs++
		s.proto[r.Proto]++
		s.mu.Unlock()
		if r.Header.Get("Content-Type") == "application/grpc" {
			w.Header().Set("Content-Type", "application/grpc")
			w.Header().Set("Trailer", "Grpc-Status")
			w.Write([]byte{0, 0, 0, 0, 0})
			w.Header().Set("Grpc-Status", "0")
			return
		}
		fmt.Fprintf(w, "served for host %s", r.Host)
	}))
	if h2c {
		ts.Config.Protocols = new(http.Protocols)
		ts.Config.Protocols.SetHTTP1(true)
		ts.Config.Protocols.SetUnencryptedHTTP2(true)
	}
	ts.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			s.mu.Lock()
			s.conns++
			s.mu.Unlock()
		}
	}
	ts.Start()
	t.Cleanup(ts.Close)
	return ts
}

// Every path the attack opens connections on (HTTP/1.1 without and with
// keep-alive lanes, h2c, gRPC over h2c, HTTPS) reaches the address the
// list names for a host nobody resolves, spreading connections over the
// candidates, while the request keeps its own Host (and TLS server name).
func TestConnectToEveryAttackPath(t *testing.T) {
	for _, c := range []struct {
		name      string
		keepAlive bool
		http2     bool
		grpc      bool
		proto     string
	}{
		{"HTTP/1.1, a connection per request", false, false, false, "HTTP/1.1"},
		{"HTTP/1.1 keep-alive lanes", true, false, false, "HTTP/1.1"},
		{"h2c", true, true, false, "HTTP/2.0"},
		{"gRPC over h2c", true, true, true, "HTTP/2.0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var a1, a2 countingServer
			s1, s2 := a1.start(t, true), a2.start(t, true)
			p1, p2 := s1.Listener.Addr().(*net.TCPAddr).Port, s2.Listener.Addr().(*net.TCPAddr).Port
			ct, err := ParseConnectTo(fmt.Sprintf("echo.default.svc.cluster.local:8080:127.0.0.1:%d,echo.default.svc.cluster.local:8080:127.0.0.1:%d", p1, p2))
			if err != nil {
				t.Fatal(err)
			}
			o := Options{URL: "http://echo.default.svc.cluster.local:8080/", Rate: vegeta.Rate{Freq: 400, Per: time.Second},
				Requests: 200, KeepAlive: c.keepAlive, HTTP2: c.http2, Connections: 20, MaxBody: -1, Dial: ct.Dial(nil)}
			if c.grpc {
				o.Method, o.GRPC = http.MethodPost, true
				o.Header = http.Header{"Content-Type": {"application/grpc"}, "Te": {"trailers"}}
				o.Body = []byte{0, 0, 0, 0, 0}
			}
			a, err := New(o)
			if err != nil {
				t.Fatal(err)
			}
			var sink memSink
			sum := a.Run(context.Background(), &sink)
			failed := 0
			for _, r := range sink.results {
				if r.Error != "" || r.Code != http.StatusOK {
					failed++
				} else if !c.grpc && string(r.Body) != "served for host echo.default.svc.cluster.local:8080" {
					t.Fatalf("body %q: the request lost its Host", r.Body)
				}
				if c.grpc && r.Trailer.Get("Grpc-Status") != "0" {
					t.Fatalf("gRPC result without its status trailer: %v", r.Trailer)
				}
			}
			if sum.Requests != 200 || failed > 0 {
				t.Fatalf("%d requests, %d failed: %+v", sum.Requests, failed, sink.results[0])
			}
			a1.mu.Lock()
			a2.mu.Lock()
			defer a1.mu.Unlock()
			defer a2.mu.Unlock()
			if a1.reqs+a2.reqs != 200 || a1.proto[c.proto]+a2.proto[c.proto] != 200 {
				t.Errorf("backends served %d+%d requests (%v, %v), want 200 over %s", a1.reqs, a2.reqs, a1.proto, a2.proto, c.proto)
			}
			// Several connections: each backend got some (a random pick
			// per connection; 2^-k for k connections all on one side).
			if sum.Connections >= 10 && (a1.conns == 0 || a2.conns == 0) {
				t.Errorf("%d connections, %d and %d on the two candidates: not spread", sum.Connections, a1.conns, a2.conns)
			}
		})
	}
}

// HTTPS through connect-to verifies the certificate for the URL's host,
// not the address connected to, as curl does.
func TestConnectToKeepsTheTLSServerName(t *testing.T) {
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, r.TLS.ServerName) }))
	t.Cleanup(ts.Close)
	port := ts.Listener.Addr().(*net.TCPAddr).Port
	ct, err := ParseConnectTo(fmt.Sprintf("example.com:443:127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	tlsCfg := ts.Client().Transport.(*http.Transport).TLSClientConfig.Clone() // trusts the test server's CA, which signed example.com
	a, err := New(Options{URL: "https://example.com/", Requests: 5, Rate: vegeta.Rate{Freq: 100, Per: time.Second}, TLS: tlsCfg, MaxBody: -1, Dial: ct.Dial(nil)})
	if err != nil {
		t.Fatal(err)
	}
	var sink memSink
	a.Run(context.Background(), &sink)
	for _, r := range sink.results {
		if r.Error != "" || string(r.Body) != "example.com" {
			t.Fatalf("result %d %q %s: want the answer for server name example.com", r.Code, r.Body, r.Error)
		}
	}
	if len(sink.results) != 5 {
		t.Fatalf("%d results", len(sink.results))
	}
}

// A failed dial names both addresses.
func TestConnectToDialError(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more
	ct, err := ParseConnectTo("svc:80:" + addr)
	if err != nil {
		t.Fatal(err)
	}
	_, err = ct.Dial(nil)(context.Background(), "tcp", "svc:80")
	if err == nil || !strings.Contains(err.Error(), "connect to "+addr+" for svc:80 (connect-to)") {
		t.Errorf("dial error %v, want one naming %s and svc:80", err, addr)
	}
}

func FuzzParseConnectTo(f *testing.F) {
	for _, s := range []string{"svc.ns:8080:127.0.0.1:40001", "::h:", "[::1]:1:[::2]:2", "a:1:b:2,c:3:d:4", "[", "a:1:[", ":::", "a:99999:b:1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ct, err := ParseConnectTo(s)
		if err != nil {
			return
		}
		if len(ct.entries) > MaxConnectToEntries {
			t.Fatalf("%d entries", len(ct.entries))
		}
		for _, e := range ct.entries {
			if len(e.Host) > MaxConnectToHost || e.Port < 0 || e.Port > 65535 || e.ConnectPort < 0 || e.ConnectPort > 65535 {
				t.Fatalf("entry %+v out of bounds", e)
			}
			again, err := ParseConnectTo(e.String())
			if err != nil || len(again.entries) != 1 || again.entries[0] != e {
				t.Fatalf("%+v prints as %q, which parses to %v, %v", e, e.String(), again.Entries(), err)
			}
			target, ok := ct.Resolve(net.JoinHostPort(cmp.Or(e.Host, "x"), "1"))
			if !ok {
				continue
			}
			if _, _, err := net.SplitHostPort(target); err != nil {
				t.Fatalf("Resolve gave %q: %v", target, err)
			}
		}
	})
}
