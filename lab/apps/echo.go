package apps

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
)

// echo is Istio's echo test app (pkg/test/echo, docs/real-apps.md, "Istio
// echo"): any path answers Key=value lines about the request and the
// instance, and every request logs two lines (zap console encoding, scope
// "endpoint"): the request with its headers, and the response.
type echo struct{}

// echoTime is Istio's log time format: UTC with microseconds.
const echoTime = "2006-01-02T15:04:05.000000Z"

func (echo) start(s *Server) error {
	port := strconv.Itoa(int(s.spec.Port))
	// The message has an embedded newline: the log shows an empty line after it.
	for _, msg := range []string{
		"info\tendpoint\tListening HTTP/1.1 on " + port, "",
		"info\tendpoint\tready for HTTP endpoint http://[::]:" + port,
	} {
		if msg != "" {
			msg = s.now().UTC().Format(echoTime) + "\t" + msg
		}
		if err := s.startupLine(crilog.Stdout, msg); err != nil {
			return err
		}
	}
	return nil
}

func (echo) logf(s *Server, msg string, labels ...any) {
	var b strings.Builder
	b.WriteString(s.now().UTC().Format(echoTime) + "\tinfo\tendpoint\t" + msg)
	for i := 0; i+1 < len(labels); i += 2 {
		if i == 0 {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%v=%v", labels[i], labels[i+1])
	}
	s.write(crilog.Stdout, b.String())
}

func (e echo) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	id := uuid.New()
	remote, _, _ := net.SplitHostPort(r.RemoteAddr)
	e.logf(s, r.Proto+" Request", "remoteAddr", remote, "method", r.Method, "url", r.URL, "host", r.Host, "headers", r.Header, "id", id)
	s.hits.Add(1)
	var body strings.Builder
	if err := r.ParseForm(); err != nil {
		body.WriteString("ParseForm() error: " + err.Error() + "\n")
	}
	if d := r.FormValue("delay"); d != "" {
		t, err := time.ParseDuration(d)
		switch {
		case err != nil:
			body.WriteString("error delaying response error: " + err.Error() + "\n")
		case t > maxRequestDelay:
			body.WriteString(fmt.Sprintf("error delaying response error: delay %v exceeds the lab's bound of %v\n", t, maxRequestDelay))
		default:
			if !sleep(r.Context(), t) {
				return
			}
		}
	}
	if err := echoResponseHeaders(r.FormValue("headers"), w.Header()); err != nil {
		body.WriteString("response headers error: " + err.Error() + "\n")
	}
	codes, err := parseEchoCodes(r.FormValue("codes"))
	if err != nil {
		body.WriteString("codes error: " + err.Error() + "\n")
	}
	code := pickEchoCode(s, codes)
	// As the real app: the status is written before Content-Type is set,
	// so the header set afterwards never reaches the client (Go sniffs
	// text/plain; charset=utf-8), while the Response log line shows it.
	w.WriteHeader(code)
	e.payload(s, r, &body)
	w.Header().Set("Content-Type", "application/text")
	_, _ = w.Write([]byte(body.String()))
	e.logf(s, r.Proto+" Response", "code", code, "headers", w.Header(), "id", id)
}

// payload is addResponsePayload: the fields in their order, current
// releases leaving out the unset optional ones.
func (echo) payload(s *Server, r *http.Request, b *strings.Builder) {
	legacy := s.spec.Variant == Echo118
	field := func(k, v string) { b.WriteString(k + "=" + v + "\n") }
	optional := func(k, v string) {
		if v != "" || legacy {
			field(k, v)
		}
	}
	field("ServiceVersion", s.spec.Version)
	field("ServicePort", strconv.Itoa(int(s.spec.Port)))
	field("Host", r.Host)
	field("URL", r.RequestURI)
	optional("Cluster", s.spec.ClusterName)
	optional("IstioVersion", "")
	if !legacy {
		optional("Namespace", s.spec.Namespace)
	}
	field("Method", r.Method)
	field("Proto", r.Proto)
	ip, _, _ := net.SplitHostPort(r.RemoteAddr)
	field("IP", ip)
	if legacy {
		field("Alpn", "") // plain HTTP: no negotiated protocol
	}
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range r.Header {
			if !yield(k) {
				return
			}
		}
	}) {
		for _, v := range r.Header[k] {
			field("RequestHeader", k+":"+v)
		}
	}
	field("Hostname", s.spec.Pod)
}

// echoCode is one slice of ?codes=: a status and its weight.
type echoCode struct{ code, slices int }

// maxEchoCodes bounds how many code:weight pairs ?codes= may list.
const maxEchoCodes = 100

// parseEchoCodes reads ?codes=code[:weight][,code[:weight]]*, as the echo
// app's validateCodes does: "" is 200:1; a bad list answers 400.
func parseEchoCodes(v string) ([]echoCode, error) {
	if v == "" {
		return []echoCode{{http.StatusOK, 1}}, nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxEchoCodes {
		return []echoCode{{http.StatusBadRequest, 1}}, fmt.Errorf("%d codes: the lab reads at most %d", len(parts), maxEchoCodes)
	}
	out := make([]echoCode, 0, len(parts))
	for _, p := range parts {
		f := strings.Split(p, ":")
		if len(f) > 2 {
			return []echoCode{{http.StatusBadRequest, 1}}, fmt.Errorf("invalid %q (want code or code:count)", p)
		}
		n, err := strconv.Atoi(f[0])
		if err != nil {
			return []echoCode{{http.StatusBadRequest, 1}}, err
		}
		if n < http.StatusOK || n >= 600 {
			return []echoCode{{http.StatusBadRequest, 1}}, fmt.Errorf("invalid HTTP response code %v", n)
		}
		count := 1
		if len(f) == 2 {
			if count, err = strconv.Atoi(f[1]); err != nil {
				return []echoCode{{http.StatusBadRequest, 1}}, err
			}
			if count < 0 || count > 1<<20 {
				return []echoCode{{http.StatusBadRequest, 1}}, fmt.Errorf("invalid count %v", count)
			}
		}
		out = append(out, echoCode{n, count})
	}
	return out, nil
}

// pickEchoCode chooses a status with probability weight/total, seeded.
func pickEchoCode(s *Server, codes []echoCode) int {
	total := 0
	for _, c := range codes {
		total += c.slices
	}
	if total <= 0 {
		return codes[len(codes)-1].code
	}
	slice := int(s.randN(int64(total)))
	for _, c := range codes {
		if slice < c.slices {
			return c.code
		}
		slice -= c.slices
	}
	return codes[len(codes)-1].code
}

// maxEchoHeaders bounds how many headers ?headers= may set.
const maxEchoHeaders = 32

// echoResponseHeaders applies ?headers=name:value[,name:value]*.
func echoResponseHeaders(v string, h http.Header) error {
	if v == "" {
		return nil
	}
	parts := strings.Split(v, ",")
	if len(parts) > maxEchoHeaders {
		return fmt.Errorf("%d headers: the lab sets at most %d", len(parts), maxEchoHeaders)
	}
	for _, p := range parts {
		kv := strings.Split(p, ":")
		if len(kv) != 2 {
			return fmt.Errorf("invalid %q (want name:value)", p)
		}
		if !validHeaderName(kv[0]) || strings.ContainsAny(kv[1], "\r\n") {
			// The real app would write it and break the response; the lab
			// refuses to forge headers.
			return fmt.Errorf("invalid header %q", p)
		}
		// Not Set: the app keeps the name as given.
		h[kv[0]] = []string{kv[1]}
	}
	return nil
}

// validHeaderName reports whether name is an HTTP token (RFC 9110).
func validHeaderName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		if c > 0x7e || c <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, c) {
			return false
		}
	}
	return true
}
