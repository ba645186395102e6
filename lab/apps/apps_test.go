package apps

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/internal/testutil"
	"github.com/mesh-verify/mesh-verify/lab/loopback"
)

// client is an HTTP client that ignores env proxies; its idle connections
// are closed when the test ends.
func client(t *testing.T) *http.Client {
	t.Helper()
	tr := &http.Transport{Proxy: nil, MaxIdleConnsPerHost: 64}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func start(t *testing.T, s Spec) *Server {
	t.Helper()
	srv, err := Start(context.Background(), s, "127.0.0.1:0")
	if err != nil {
		t.Fatalf("Start(%+v): %v", s, err)
	}
	t.Cleanup(func() {
		if err := srv.Close(); err != nil {
			t.Errorf("Close %s: %v", s.Pod, err)
		}
	})
	return srv
}

func get(t *testing.T, c *http.Client, url string, hdr map[string]string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return resp.StatusCode, string(b), resp.Header
}

// criLine is one parsed CRI log record.
type criLine struct {
	ts     time.Time
	stream string
	tag    string
	msg    string
}

// parseCRI parses "<RFC3339Nano> <stream> <tag> <message>" as the kubelet's
// CRI log reader does, and insists on the kubelet writer's fixed-width
// UTC timestamp.
func parseCRI(line string) (criLine, error) {
	parts := strings.SplitN(line, " ", 4)
	if len(parts) != 4 {
		return criLine{}, fmt.Errorf("want 4 space-separated fields in %q", line)
	}
	ts, err := time.Parse(time.RFC3339Nano, parts[0])
	if err != nil {
		return criLine{}, fmt.Errorf("timestamp of %q: %w", line, err)
	}
	if len(parts[0]) != len("2026-01-02T03:04:05.123456789Z") || !strings.HasSuffix(parts[0], "Z") {
		return criLine{}, fmt.Errorf("timestamp %q is not fixed-width UTC nanoseconds", parts[0])
	}
	if parts[1] != "stdout" || parts[2] != "F" {
		return criLine{}, fmt.Errorf("want stream stdout and tag F in %q", line)
	}
	return criLine{ts, parts[1], parts[2], parts[3]}, nil
}

// readLog parses every line of a pod log; it fails on an unterminated or
// malformed line.
func readLog(t *testing.T, path string) []criLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	if len(b) > 0 && b[len(b)-1] != '\n' {
		t.Fatalf("log %s ends in a partial line: %q", path, b[max(0, len(b)-80):])
	}
	var out []criLine
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		l, err := parseCRI(sc.Text())
		if err != nil {
			t.Fatalf("log %s: %v", path, err)
		}
		out = append(out, l)
	}
	return out
}

func TestKindsAnswerAndLogLikeTheTutorials(t *testing.T) {
	cases := []struct {
		name     string
		spec     Spec
		path     string
		wantCode int
		wantBody *regexp.Regexp
		wantLog  *regexp.Regexp // the request's log message
	}{
		{
			name:     "callme",
			spec:     Spec{Kind: KindCallme, Version: "v2", Pod: "callme-service-v2-665b876579-rsfks", Cluster: "c2"},
			path:     "/callme/ping",
			wantCode: 200,
			wantBody: regexp.MustCompile(`^I'm callme-service v2$`),
			wantLog:  regexp.MustCompile(`^I'm callme-service v2 request-id=rid-1 host=127\.0\.0\.1:\d+ path=/callme/ping$`),
		},
		{
			name:     "persons by id",
			spec:     Spec{Kind: KindPersons, Pod: "sample-spring-kotlin-microservice-5c7b8f9d4-abcde", Cluster: "c3"},
			path:     "/persons/1",
			wantCode: 200,
			wantBody: regexp.MustCompile(`^\{"id":1,"name":"John Smith","age":33,"gender":"MALE"\}$`),
			wantLog:  regexp.MustCompile(`^\(1\) findById\(1\) request-id=rid-1 host=127\.0\.0\.1:\d+ path=/persons/1$`),
		},
		{
			name:     "persons list",
			spec:     Spec{Kind: KindPersons, Pod: "p"},
			path:     "/persons",
			wantCode: 200,
			wantBody: regexp.MustCompile(`^\[\{"id":1,.*"id":5,.*\}\]$`),
			wantLog:  regexp.MustCompile(`^\(1\) findAll\(\) request-id=rid-1 host=\S+ path=/persons$`),
		},
		{
			name:     "persons unknown id is Spring's null",
			spec:     Spec{Kind: KindPersons, Pod: "p"},
			path:     "/persons/99",
			wantCode: 200,
			wantBody: regexp.MustCompile(`^$`),
			wantLog:  regexp.MustCompile(`^\(1\) findById\(99\) request-id=rid-1 `),
		},
		{
			name:     "echo",
			spec:     Spec{Kind: KindEcho, Version: "v3", Pod: "echo-v3-abc", Cluster: "c2", Namespace: "echo"},
			path:     "/any/path?x=1",
			wantCode: 200,
			wantBody: regexp.MustCompile(`(?s)^StatusCode=200\nServiceVersion=v3\nServicePort=\d+\nHost=127\.0\.0\.1:\d+\nURL=/any/path\?x=1\nCluster=c2\nNamespace=echo\nMethod=GET\nProto=HTTP/1\.1\nIP=127\.0\.0\.1\n.*RequestHeader=X-Request-Id:rid-1\n.*Hostname=echo-v3-abc\n$`),
			wantLog:  regexp.MustCompile(`^ServiceVersion=v3 Hostname=echo-v3-abc Cluster=c2 Method=GET request-id=rid-1 host=\S+ path=/any/path$`),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testutil.NoLeaks(t)
			tc.spec.LogFile = filepath.Join(t.TempDir(), "pods", tc.spec.Pod, "app.log")
			srv := start(t, tc.spec)
			code, body, _ := get(t, client(t), srv.URL()+tc.path, map[string]string{"X-Request-Id": "rid-1"})
			if code != tc.wantCode || !tc.wantBody.MatchString(body) {
				t.Fatalf("GET %s = %d %q, want %d matching %s", tc.path, code, body, tc.wantCode, tc.wantBody)
			}
			lines := readLog(t, tc.spec.LogFile)
			if len(lines) != 2 {
				t.Fatalf("log has %d lines, want startup + 1: %+v", len(lines), lines)
			}
			if !strings.HasPrefix(lines[0].msg, "Started ") || strings.Contains(lines[0].msg, "I'm") {
				t.Errorf("startup line %q: want \"Started …\" that a greeting grep does not count", lines[0].msg)
			}
			if !tc.wantLog.MatchString(lines[1].msg) {
				t.Errorf("request line %q does not match %s", lines[1].msg, tc.wantLog)
			}
			if srv.Hits() != 1 || srv.LogErrors() != 0 {
				t.Errorf("Hits=%d LogErrors=%d, want 1 and 0", srv.Hits(), srv.LogErrors())
			}
		})
	}
}

func TestUnknownPathsAndMethodsAreNotHits(t *testing.T) {
	cases := []struct {
		kind, method, path string
		want               int
	}{
		{KindCallme, http.MethodGet, "/caller/ping", http.StatusNotFound},
		{KindCallme, http.MethodPost, "/callme/ping", http.StatusMethodNotAllowed},
		{KindPersons, http.MethodGet, "/personsX", http.StatusNotFound},
		{KindPersons, http.MethodGet, "/persons/abc", http.StatusBadRequest},
	}
	for _, tc := range cases {
		t.Run(tc.kind+" "+tc.method+" "+tc.path, func(t *testing.T) {
			testutil.NoLeaks(t)
			srv := start(t, Spec{Kind: tc.kind, Pod: "p", LogFile: filepath.Join(t.TempDir(), "log")})
			req, _ := http.NewRequest(tc.method, srv.URL()+tc.path, nil)
			resp, err := client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tc.want || srv.Hits() != 0 {
				t.Errorf("%s %s = %d (hits %d), want %d and no hit", tc.method, tc.path, resp.StatusCode, srv.Hits(), tc.want)
			}
		})
	}
}

func TestCallerEmbedsCalleeAndPropagatesHeaders(t *testing.T) {
	testutil.NoLeaks(t)
	dir := t.TempDir()
	c := client(t)
	callme := start(t, Spec{Kind: KindCallme, Pod: "callme-service-v1-7b65795f48-w7zlq", LogFile: filepath.Join(dir, "callme.log")})
	echo := start(t, Spec{Kind: KindEcho, Pod: "echo-1", LogFile: filepath.Join(dir, "echo.log")})

	t.Run("embeds the callee's answer", func(t *testing.T) {
		caller := start(t, Spec{Kind: KindCaller, Pod: "caller-service-b9dbbd6c8-q6dpg",
			Callee: callme.URL(), CalleeHost: "callme-service:8080", LogFile: filepath.Join(dir, "caller.log")})
		code, body, _ := get(t, c, caller.URL()+"/caller/ping", map[string]string{"X-Request-Id": "run1-7"})
		if want := "I'm caller-service v1. Calling... I'm callme-service v1"; code != 200 || body != want {
			t.Fatalf("GET /caller/ping = %d %q, want 200 %q", code, body, want)
		}
		lines := readLog(t, filepath.Join(dir, "callme.log"))
		want := "I'm callme-service v1 request-id=run1-7 host=callme-service:8080 path=/callme/ping"
		if got := lines[len(lines)-1].msg; got != want {
			t.Errorf("callee log line %q, want %q", got, want)
		}
		cl := readLog(t, filepath.Join(dir, "caller.log"))
		got := cl[len(cl)-1].msg
		if !strings.HasPrefix(got, "I'm caller-service v1 request-id=run1-7 ") || strings.Contains(got, "callme-service v1") {
			t.Errorf("caller log line %q: want its own greeting and request id, not the callee's answer", got)
		}
	})

	t.Run("propagates tracing headers only", func(t *testing.T) {
		caller := start(t, Spec{Kind: KindCaller, Pod: "caller-2", Callee: echo.URL()})
		_, body, _ := get(t, c, caller.URL()+"/caller/ping", map[string]string{
			"X-Request-Id": "run1-8", "X-B3-Traceid": "abc", "Traceparent": "00-1-2-01", "X-Private": "secret"})
		for _, want := range []string{"RequestHeader=X-Request-Id:run1-8\n", "RequestHeader=X-B3-Traceid:abc\n",
			"RequestHeader=Traceparent:00-1-2-01\n", "\nURL=/callme/ping\n"} {
			if !strings.Contains(body, want) {
				t.Errorf("callee saw no %q in:\n%s", want, body)
			}
		}
		if strings.Contains(body, "X-Private") {
			t.Errorf("a non-tracing header reached the callee:\n%s", body)
		}
	})

	t.Run("callee not ready gives Spring's 500", func(t *testing.T) {
		caller := start(t, Spec{Kind: KindCaller, Pod: "caller-3", Callee: callme.URL(), LogFile: filepath.Join(dir, "caller3.log")})
		callme.SetReady(false)
		defer callme.SetReady(true)
		code, body, _ := get(t, c, caller.URL()+"/caller/ping", nil)
		if code != http.StatusInternalServerError || !strings.Contains(body, `"status":500`) {
			t.Fatalf("GET = %d %q, want 500 with a Spring error body", code, body)
		}
		cl := readLog(t, filepath.Join(dir, "caller3.log"))
		if got := cl[len(cl)-1].msg; !strings.HasSuffix(got, "callee-status=503") {
			t.Errorf("caller log line %q, want callee-status=503", got)
		}
	})
}

func TestSetReady(t *testing.T) {
	testutil.NoLeaks(t)
	log := filepath.Join(t.TempDir(), "log")
	srv := start(t, Spec{Kind: KindCallme, Pod: "p", LogFile: log})
	c := client(t)
	steps := []struct {
		ready      bool
		wantCode   int
		wantHealth int
		wantHits   int64
	}{
		{true, 200, 200, 1},
		{false, 503, 503, 1},
		{true, 200, 200, 2},
	}
	for i, st := range steps {
		srv.SetReady(st.ready)
		if code, _, _ := get(t, c, srv.URL()+"/callme/ping", nil); code != st.wantCode {
			t.Errorf("step %d: ready=%v answered %d, want %d", i, st.ready, code, st.wantCode)
		}
		if code, _, _ := get(t, c, srv.URL()+healthPath, nil); code != st.wantHealth {
			t.Errorf("step %d: health answered %d, want %d", i, code, st.wantHealth)
		}
		if srv.Hits() != st.wantHits {
			t.Errorf("step %d: Hits=%d, want %d", i, srv.Hits(), st.wantHits)
		}
	}
	if n := len(readLog(t, log)); n != 3 {
		t.Errorf("log has %d lines, want startup + 2 answered requests", n)
	}
}

// TestConcurrentRequestsLogCompleteLines hammers one app from many
// goroutines while a reader tails the file, then parses every line back.
func TestConcurrentRequestsLogCompleteLines(t *testing.T) {
	testutil.NoLeaks(t)
	const workers, perWorker = 16, 50
	log := filepath.Join(t.TempDir(), "callme.log")
	srv := start(t, Spec{Kind: KindCallme, Pod: "p", LogFile: log})
	c := client(t)

	// The tailer checks every newline-terminated line it ever sees; an
	// unterminated tail is what a follower re-reads later (the kubelet
	// seeks back over it), so it is skipped, not judged.
	stop := make(chan struct{})
	tailErr := make(chan error, 1)
	go func() {
		defer close(tailErr)
		for {
			select {
			case <-stop:
				return
			default:
			}
			b, err := os.ReadFile(log)
			if err != nil {
				tailErr <- err
				return
			}
			if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
				for _, l := range strings.Split(string(b[:i]), "\n") {
					if _, err := parseCRI(l); err != nil {
						tailErr <- err
						return
					}
				}
			}
			time.Sleep(time.Millisecond)
		}
	}()

	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				req, _ := http.NewRequest(http.MethodGet, srv.URL()+"/callme/ping", nil)
				req.Header.Set("X-Request-Id", fmt.Sprintf("w%d-%d", w, i))
				resp, err := c.Do(req)
				if err != nil {
					errs <- err
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs <- fmt.Errorf("status %d", resp.StatusCode)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	if err := <-tailErr; err != nil {
		t.Fatalf("concurrent reader saw a broken line: %v", err)
	}
	close(errs)
	for err := range errs {
		t.Fatalf("request failed: %v", err)
	}

	lines := readLog(t, log)
	if want := 1 + workers*perWorker; len(lines) != want {
		t.Fatalf("log has %d lines, want %d", len(lines), want)
	}
	re := regexp.MustCompile(`^I'm callme-service v1 request-id=(w\d+-\d+) host=127\.0\.0\.1:\d+ path=/callme/ping$`)
	seen := map[string]bool{}
	for i, l := range lines[1:] {
		m := re.FindStringSubmatch(l.msg)
		if m == nil {
			t.Fatalf("line %d: %q is not a callme request line", i+1, l.msg)
		}
		if seen[m[1]] {
			t.Fatalf("request id %s logged twice", m[1])
		}
		seen[m[1]] = true
		if l.ts.Before(lines[i].ts) {
			t.Fatalf("line %d timestamp %v before the previous line's %v: followers resume by timestamp", i+1, l.ts, lines[i].ts)
		}
	}
	if srv.Hits() != workers*perWorker {
		t.Errorf("Hits=%d, want %d", srv.Hits(), workers*perWorker)
	}
}

// TestLineVisibleBeforeAnswer checks there is no buffering: the line of a
// request is in the file by the time its response arrives.
func TestLineVisibleBeforeAnswer(t *testing.T) {
	testutil.NoLeaks(t)
	log := filepath.Join(t.TempDir(), "log")
	srv := start(t, Spec{Kind: KindPersons, Pod: "p", LogFile: log})
	c := client(t)
	for i := 1; i <= 20; i++ {
		get(t, c, srv.URL()+"/persons/2", nil)
		if n := len(readLog(t, log)); n != 1+i {
			t.Fatalf("after %d answers the log has %d lines, want %d", i, n, 1+i)
		}
	}
}

func TestLogSanitizesControlCharacters(t *testing.T) {
	testutil.NoLeaks(t)
	log := filepath.Join(t.TempDir(), "log")
	srv := start(t, Spec{Kind: KindEcho, Pod: "p", LogFile: log})
	// %0A decodes to a newline in URL.Path, which must not split the record.
	get(t, client(t), srv.URL()+"/a%0Afake%20stdout%20F%20I'm%20callme-service%20v9", nil)
	lines := readLog(t, log)
	if len(lines) != 2 || !strings.Contains(lines[1].msg, "path=/a?fake stdout F I'm callme-service v9") {
		t.Fatalf("want one sanitized request line, got %+v", lines)
	}
}

func TestDelayAndCloseAbortsInFlight(t *testing.T) {
	testutil.NoLeaks(t)
	c := client(t)
	t.Run("delay is service time", func(t *testing.T) {
		srv := start(t, Spec{Kind: KindCallme, Pod: "p", Delay: 80 * time.Millisecond})
		t0 := time.Now()
		get(t, c, srv.URL()+"/callme/ping", nil)
		if d := time.Since(t0); d < 80*time.Millisecond {
			t.Errorf("answered in %v, want >= 80ms", d)
		}
	})
	t.Run("close does not wait out a long delay", func(t *testing.T) {
		srv, err := Start(context.Background(), Spec{Kind: KindCallme, Pod: "p", Delay: time.Minute}, "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			resp, err := c.Get(srv.URL() + "/callme/ping")
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		waitFor(t, func() bool { return srv.active.Load() == 1 })
		t0 := time.Now()
		if err := srv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if d := time.Since(t0); d > 2*time.Second {
			t.Errorf("Close took %v", d)
		}
		if err := <-done; err == nil {
			t.Errorf("the delayed request succeeded after Close")
		}
	})
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 3s")
}

func TestContextCancelStopsServer(t *testing.T) {
	testutil.NoLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	log := filepath.Join(t.TempDir(), "log")
	srv, err := Start(ctx, Spec{Kind: KindCallme, Pod: "p", LogFile: log}, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr()
	cancel()
	waitFor(t, func() bool {
		conn, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return true
		}
		conn.Close()
		return false
	})
	if err := srv.Close(); err != nil {
		t.Errorf("Close after cancel: %v", err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Errorf("Shutdown after Close: %v", err)
	}
}

func TestStartRejects(t *testing.T) {
	testutil.NoLeaks(t)
	cases := []struct {
		name string
		spec Spec
		addr string
		want string
	}{
		{"unknown kind", Spec{Kind: "nginx", Pod: "p"}, "127.0.0.1:0", `unknown kind "nginx"`},
		{"caller without callee", Spec{Kind: KindCaller, Pod: "p"}, "127.0.0.1:0", "Callee is required"},
		{"callee off loopback", Spec{Kind: KindCaller, Pod: "p", Callee: "http://10.1.2.3:8080"}, "127.0.0.1:0", "not a loopback IP"},
		{"callee not http", Spec{Kind: KindCaller, Pod: "p", Callee: "https://127.0.0.1:8080"}, "127.0.0.1:0", "want http://"},
		{"listen off loopback", Spec{Kind: KindCallme, Pod: "p"}, "0.0.0.0:0", "not a loopback IP"},
		{"negative delay", Spec{Kind: KindCallme, Pod: "p", Delay: -time.Second}, "127.0.0.1:0", "negative Delay"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv, err := Start(context.Background(), tc.spec, tc.addr)
			if err == nil {
				srv.Close()
				t.Fatalf("Start succeeded, want error containing %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "pod") {
				t.Errorf("error %q: want %q and the pod named", err, tc.want)
			}
		})
	}
}

// "localhost" is accepted as a name; what Listen resolved it to is checked.
func TestListenerMustBeLoopback(t *testing.T) {
	testutil.NoLeaks(t)
	srv, err := Start(context.Background(), Spec{Kind: KindCallme, Pod: "p"}, "localhost:0")
	if err != nil {
		t.Fatalf("Start on localhost:0: %v", err)
	}
	if a, ok := srv.ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		t.Errorf("localhost:0 bound %v", srv.ln.Addr())
	}
	srv.Close()
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 8080},
		&net.TCPAddr{IP: net.IPv4zero, Port: 8080},
		&net.UnixAddr{Name: "/tmp/x.sock", Net: "unix"},
	} {
		if err := loopback.CheckListener(a); err == nil {
			t.Errorf("loopback.CheckListener(%v) accepted it", a)
		}
	}
	for _, a := range []net.Addr{
		&net.TCPAddr{IP: net.ParseIP("127.0.0.1"), Port: 8080},
		&net.TCPAddr{IP: net.IPv6loopback, Port: 8080},
	} {
		if err := loopback.CheckListener(a); err != nil {
			t.Errorf("loopback.CheckListener(%v): %v", a, err)
		}
	}
}

func TestPersonsJSON(t *testing.T) {
	testutil.NoLeaks(t)
	srv := start(t, Spec{Kind: KindPersons, Pod: "p"})
	_, body, hdr := get(t, client(t), srv.URL()+"/persons/ages/33", nil)
	var got []person
	if err := json.Unmarshal([]byte(body), &got); err != nil || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("decode %q (%s): %v", body, hdr.Get("Content-Type"), err)
	}
	if len(got) != 2 || got[0].ID != 1 || got[1].ID != 4 {
		t.Errorf("findByAge(33) = %+v, want persons 1 and 4", got)
	}
}
