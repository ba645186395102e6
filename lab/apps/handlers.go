package apps

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"
)

// healthPath is Spring Boot's actuator health endpoint, which the lab may
// probe to tell readiness; it is neither logged nor counted as a hit.
const healthPath = "/actuator/health"

// ServeHTTP dispatches to the app's kind.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		http.Error(w, "shutting down", http.StatusServiceUnavailable)
		return
	}
	defer s.leave()
	if r.URL.Path == healthPath {
		s.health(w)
		return
	}
	if !s.Ready() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	if s.spec.Delay > 0 {
		t := time.NewTimer(s.spec.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	switch s.spec.Kind {
	case KindCallme:
		s.callme(w, r)
	case KindCaller:
		s.caller(w, r)
	case KindPersons:
		s.persons(w, r)
	case KindEcho:
		s.echo(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	if !s.Ready() {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = io.WriteString(w, `{"status":"OUT_OF_SERVICE"}`)
		return
	}
	_, _ = io.WriteString(w, `{"status":"UP"}`)
}

// greeting is the tutorial apps' answer, "I'm callme-service v1".
func (s *Server) greeting() string {
	return "I'm " + s.spec.Service + " " + s.spec.Version
}

// requestTail is appended to every request's log message so log lines can
// be joined to requests (request id) and to the mesh's routing (the Host a
// mirror rewrote to "…-shadow").
func requestTail(r *http.Request) string {
	rid := r.Header.Get("X-Request-Id")
	if rid == "" {
		rid = "-"
	}
	return " request-id=" + rid + " host=" + r.Host + " path=" + r.URL.Path
}

func (s *Server) callme(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/callme/ping", "/callme/ping-with-random-delay":
	default:
		springError(w, r, http.StatusNotFound)
		return
	}
	if !getOrHead(w, r) {
		return
	}
	msg := s.greeting()
	s.hit(msg + requestTail(r))
	writeText(w, msg)
}

func (s *Server) caller(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/caller/ping" {
		springError(w, r, http.StatusNotFound)
		return
	}
	if !getOrHead(w, r) {
		return
	}
	body, status, err := s.call(r)
	// The caller logs its own greeting and the callee's status, never the
	// callee's answer: a grep for "I'm callme-service v2" over a cluster's
	// logs must count the callee's lines only.
	msg := s.greeting()
	switch {
	case err != nil:
		s.hit(msg + requestTail(r) + " callee-error=" + strconv.Quote(err.Error()))
		springError(w, r, http.StatusInternalServerError)
	case status < 200 || status > 299:
		s.hit(msg + requestTail(r) + " callee-status=" + strconv.Itoa(status))
		// RestTemplate throws on a non-2xx answer and Spring answers 500.
		springError(w, r, http.StatusInternalServerError)
	default:
		s.hit(msg + requestTail(r) + " callee-status=" + strconv.Itoa(status))
		writeText(w, msg+". Calling... "+body)
	}
}

// call performs the caller's GET of its callee, propagating the request id
// and trace headers the way Istio asks applications to.
func (s *Server) call(in *http.Request) (string, int, error) {
	ctx := in.Context()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.callee.String(), nil)
	if err != nil {
		return "", 0, fmt.Errorf("build request to callee %s: %w", s.callee, err)
	}
	for name, vals := range in.Header {
		if propagated(name) {
			req.Header[name] = append([]string(nil), vals...)
		}
	}
	if s.spec.CalleeHost != "" {
		req.Host = s.spec.CalleeHost
	}
	client := &http.Client{Transport: s.transport, Timeout: calleeTimeout}
	resp, err := client.Do(req)
	if err != nil {
		return "", 0, fmt.Errorf("call callee %s: %w", s.callee, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCalleeBody))
	if err != nil {
		return "", resp.StatusCode, fmt.Errorf("read answer of callee %s: %w", s.callee, err)
	}
	// Drain what is left (bounded) so the keep-alive connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxCalleeBody))
	return string(b), resp.StatusCode, nil
}

// propagated lists the headers Istio's distributed-tracing docs tell apps
// to copy from the inbound to the outbound request (canonical names).
func propagated(name string) bool {
	switch name {
	case "X-Request-Id", "X-B3-Traceid", "X-B3-Spanid", "X-B3-Parentspanid",
		"X-B3-Sampled", "X-B3-Flags", "B3", "X-Ot-Span-Context",
		"Traceparent", "Tracestate":
		return true
	}
	return false
}

// person mirrors the sample app's Person data class.
type person struct {
	ID     int    `json:"id"`
	Name   string `json:"name"`
	Age    int    `json:"age"`
	Gender string `json:"gender"`
}

// samplePeople is the app's repository content, built per server so no
// package-level slice can be shared and mutated.
func samplePeople() []person {
	return []person{
		{1, "John Smith", 33, "MALE"},
		{2, "Darren Smith", 18, "MALE"},
		{3, "Tom Hamilton", 45, "MALE"},
		{4, "Anna Wiśniewska", 33, "FEMALE"},
		{5, "Lisa Shaw", 27, "FEMALE"},
	}
}

func (s *Server) persons(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/persons")
	if !ok || (rest != "" && rest[0] != '/') {
		springError(w, r, http.StatusNotFound)
		return
	}
	if !getOrHead(w, r) {
		return
	}
	rest = strings.TrimPrefix(rest, "/")
	// The counter advances only when the controller method runs: Spring
	// rejects an unparsable path variable before calling it.
	switch {
	case rest == "":
		s.hit(fmt.Sprintf("(%d) findAll()", s.findSeq.Add(1)) + requestTail(r))
		writeJSON(w, s.people)
	case strings.HasPrefix(rest, "ages/"):
		age, err := strconv.Atoi(strings.TrimPrefix(rest, "ages/"))
		if err != nil {
			springError(w, r, http.StatusBadRequest)
			return
		}
		s.hit(fmt.Sprintf("(%d) findByAge(%d)", s.findSeq.Add(1), age) + requestTail(r))
		found := []person{}
		for _, p := range s.people {
			if p.Age == age {
				found = append(found, p)
			}
		}
		writeJSON(w, found)
	default:
		id, err := strconv.Atoi(rest)
		if err != nil {
			springError(w, r, http.StatusBadRequest)
			return
		}
		s.hit(fmt.Sprintf("(%d) findById(%d)", s.findSeq.Add(1), id) + requestTail(r))
		for _, p := range s.people {
			if p.ID == id {
				writeJSON(w, p)
				return
			}
		}
		// Spring answers a null return value with 200 and an empty body.
		w.WriteHeader(http.StatusOK)
	}
}

// echo answers like Istio's echo app: one Key=value field per line, request
// headers sorted, Hostname last.
func (s *Server) echo(w http.ResponseWriter, r *http.Request) {
	var b strings.Builder
	field := func(k, v string) { b.WriteString(k + "=" + v + "\n") }
	_, port, _ := net.SplitHostPort(s.Addr())
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	field("StatusCode", "200")
	field("ServiceVersion", s.spec.Version)
	field("ServicePort", port)
	field("Host", r.Host)
	field("URL", r.RequestURI)
	field("Cluster", s.spec.Cluster)
	field("Namespace", s.spec.Namespace)
	field("Method", r.Method)
	field("Proto", r.Proto)
	field("IP", ip)
	names := make([]string, 0, len(r.Header))
	for name := range r.Header {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, v := range r.Header[name] {
			field("RequestHeader", name+":"+v)
		}
	}
	field("Hostname", s.spec.Pod)
	s.hit("ServiceVersion=" + s.spec.Version + " Hostname=" + s.spec.Pod + " Cluster=" + s.spec.Cluster +
		" Method=" + r.Method + requestTail(r))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, b.String())
}

// getOrHead enforces a Spring @GetMapping (which also serves HEAD).
func getOrHead(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	springError(w, r, http.StatusMethodNotAllowed)
	return false
}

func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(s)))
	_, _ = io.WriteString(w, s)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// springError answers like Spring Boot's default error controller.
func springError(w http.ResponseWriter, r *http.Request, code int) {
	b, _ := json.Marshal(struct {
		Timestamp string `json:"timestamp"`
		Status    int    `json:"status"`
		Error     string `json:"error"`
		Path      string `json:"path"`
	}{time.Now().UTC().Format("2006-01-02T15:04:05.000Z07:00"), code, http.StatusText(code), r.URL.Path})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}
