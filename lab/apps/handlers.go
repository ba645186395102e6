package apps

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
)

// callme is callme-service at 4a0d1b1 (Spring Boot 2.5.2, Java 11):
// CallmeController logs "Ping: name=callme-service, version=v1" and
// answers "I'm callme-service v1" (docs/real-apps.md, "callme-service").
type callme struct {
	log *springLog
	// instanceID is the JVM's INSTANCE_ID (UUID.randomUUID() in a static
	// field): one per pod, drawn from the pod's seed.
	instanceID string
}

func newCallme(s *Server) *callme {
	return &callme{log: newSpringLog(s, boot25Date), instanceID: seededUUID(s)}
}

// seededUUID is a version-4 UUID drawn from the pod's seed.
func seededUUID(s *Server) string {
	h := func(digits int) string {
		var b strings.Builder
		for range digits {
			b.WriteByte("0123456789abcdef"[s.randN(16)])
		}
		return b.String()
	}
	return h(8) + "-" + h(4) + "-4" + h(3) + "-" + string("89ab"[s.randN(4)]) + h(3) + "-" + h(12)
}

const callmeController = "pl.piomin.services.callme.controller.CallmeController"

func (c *callme) start(s *Server) error {
	return c.log.startup(bootStartup{mainClass: "pl.piomin.services.callme.CallmeApplication",
		javaVersion: "11.0.11", tomcat: "9.0.48", path: "/app/classes"})
}

func (c *callme) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	c.log.handler(w, r, func(thread string) {
		switch r.URL.Path {
		case actuatorHealth:
			actuatorUp(w)
		case "/callme/ping":
			if !c.log.getOnly(w, r, thread) {
				return
			}
			s.hits.Add(1)
			c.log.line("INFO", thread, callmeController, "Ping: name="+s.spec.Service+", version="+s.spec.Version)
			writeText(w, "I'm "+s.spec.Service+" "+s.spec.Version)
		case "/callme/ping-with-random-error":
			if !c.log.getOnly(w, r, thread) {
				return
			}
			// An even draw of random.nextInt(100) answers 504 "Surprise
			// <instance> v1", an odd one 200 with the instance id glued
			// to the name (no space), as the controller writes them.
			s.hits.Add(1)
			n := s.randN(100)
			code, body := http.StatusOK, "I'm "+s.spec.Service+c.instanceID+" "+s.spec.Version
			if n%2 == 0 {
				code, body = http.StatusGatewayTimeout, "Surprise "+c.instanceID+" "+s.spec.Version
			}
			c.log.line("INFO", thread, callmeController, fmt.Sprintf("Ping with random error: name=%s, version=%s, random=%d, httpCode=%s",
				s.spec.Service, s.spec.Version, n, springStatus(code)))
			w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
			w.Header().Set("Content-Length", strconv.Itoa(len(body)))
			w.WriteHeader(code)
			_, _ = io.WriteString(w, body)
		case "/callme/ping-with-random-delay":
			if !c.log.getOnly(w, r, thread) {
				return
			}
			s.hits.Add(1)
			d := s.randN(3000)
			c.log.line("INFO", thread, callmeController, fmt.Sprintf("Ping with random delay: name=%s, version=%s, delay=%d", s.spec.Service, s.spec.Version, d))
			if sleep(r.Context(), time.Duration(d)*time.Millisecond) {
				writeText(w, "I'm "+s.spec.Service+" "+s.spec.Version)
			}
		default:
			s.springError(w, r, http.StatusNotFound)
		}
	})
}

// caller is caller-service at 4a0d1b1: it logs "Ping: …", calls
// http://callme-service:8080/callme/ping with a plain RestTemplate — no
// inbound header is forwarded — logs "Calling: response=…" and answers
// "I'm caller-service v1. Calling... " followed by the callee's answer.
type caller struct {
	log    *springLog
	callee *url.URL
}

const callerController = "pl.piomin.services.caller.controller.CallerController"

func newCaller(s *Server) (*caller, error) {
	u, err := calleeURL(s.spec.Callee)
	if err != nil {
		return nil, err
	}
	return &caller{log: newSpringLog(s, boot25Date), callee: u}, nil
}

func (c *caller) start(s *Server) error {
	return c.log.startup(bootStartup{mainClass: "pl.piomin.services.caller.CallerApplication",
		javaVersion: "11.0.11", tomcat: "9.0.48", path: "/app/classes"})
}

func (c *caller) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	c.log.handler(w, r, func(thread string) {
		var ep callerEndpoint
		switch r.URL.Path {
		case actuatorHealth:
			actuatorUp(w)
			return
		case "/caller/ping":
			ep = callerEndpoint{"Ping", "/callme/ping", callerStack}
		case "/caller/ping-with-random-delay":
			ep = callerEndpoint{"Ping with random delay", "/callme/ping-with-random-delay", callerDelayStack}
		case "/caller/ping-with-random-error":
			ep = callerEndpoint{"Ping with random error", "/callme/ping-with-random-error", callerErrorStack}
		default:
			s.springError(w, r, http.StatusNotFound)
			return
		}
		if !c.log.getOnly(w, r, thread) {
			return
		}
		s.hits.Add(1)
		c.log.line("INFO", thread, callerController, ep.verb+": name="+s.spec.Service+", version="+s.spec.Version)
		code, body, err := c.call(s, r, ep.path)
		if err != nil {
			// RestTemplate threw: Spring answers 500 and Tomcat logs the
			// exception with its stack trace.
			c.log.line("ERROR", thread, "org.apache.catalina.core.ContainerBase.[Tomcat].[localhost].[/].[dispatcherServlet]",
				"Servlet.service() for servlet [dispatcherServlet] in context with path [] threw exception [Request processing failed; nested exception is "+err.Error()+"] with root cause")
			for _, l := range strings.Split(err.Error()+"\n"+ep.stack, "\n") {
				s.write(crilog.Stdout, l)
			}
			s.springError(w, r, http.StatusInternalServerError)
			return
		}
		answer := "I'm " + s.spec.Service + " " + s.spec.Version + ". Calling... " + body
		if ep.path != "/callme/ping-with-random-error" {
			c.log.line("INFO", thread, callerController, "Calling: response="+body)
			writeText(w, answer)
			return
		}
		// getForEntity: the callee's status is logged and passed on.
		c.log.line("INFO", thread, callerController, "Calling: responseCode="+springStatus(code)+", response="+body)
		w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		w.WriteHeader(code)
		_, _ = io.WriteString(w, answer)
	})
}

// callerEndpoint is one CallerController method: the verb it logs, the
// callme path it calls and the stack trace's tail when the call throws.
type callerEndpoint struct{ verb, path, stack string }

// springStatus is Spring 5.3's HttpStatus.toString(): "504 GATEWAY_TIMEOUT".
func springStatus(code int) string {
	return strconv.Itoa(code) + " " + strings.ToUpper(strings.ReplaceAll(http.StatusText(code), " ", "_"))
}

// callerStack is the tail of the stack trace Tomcat prints when
// RestTemplate throws in CallerController.ping (Spring Framework 5.3.8).
const callerStack = "\tat org.springframework.web.client.DefaultResponseErrorHandler.handleError(DefaultResponseErrorHandler.java:184) ~[spring-web-5.3.8.jar:5.3.8]\n" +
	"\tat org.springframework.web.client.DefaultResponseErrorHandler.handleError(DefaultResponseErrorHandler.java:125) ~[spring-web-5.3.8.jar:5.3.8]\n" +
	"\tat org.springframework.web.client.RestTemplate.getForObject(RestTemplate.java:335) ~[spring-web-5.3.8.jar:5.3.8]\n" +
	"\tat pl.piomin.services.caller.controller.CallerController.ping(CallerController.java:31) ~[classes/:na]"

// callerDelayStack and callerErrorStack end the same trace in the other
// two methods (CallerController.java at 4a0d1b1: lines 47 and 39; the
// getForEntity frame's line is representative).
const (
	callerDelayStack = "\tat org.springframework.web.client.DefaultResponseErrorHandler.handleError(DefaultResponseErrorHandler.java:184) ~[spring-web-5.3.8.jar:5.3.8]\n" +
		"\tat org.springframework.web.client.DefaultResponseErrorHandler.handleError(DefaultResponseErrorHandler.java:125) ~[spring-web-5.3.8.jar:5.3.8]\n" +
		"\tat org.springframework.web.client.RestTemplate.getForObject(RestTemplate.java:335) ~[spring-web-5.3.8.jar:5.3.8]\n" +
		"\tat pl.piomin.services.caller.controller.CallerController.pingWithRandomDelay(CallerController.java:47) ~[classes/:na]"
	callerErrorStack = "\tat org.springframework.web.client.DefaultResponseErrorHandler.handleError(DefaultResponseErrorHandler.java:184) ~[spring-web-5.3.8.jar:5.3.8]\n" +
		"\tat org.springframework.web.client.DefaultResponseErrorHandler.handleError(DefaultResponseErrorHandler.java:125) ~[spring-web-5.3.8.jar:5.3.8]\n" +
		"\tat org.springframework.web.client.RestTemplate.getForEntity(RestTemplate.java:359) ~[spring-web-5.3.8.jar:5.3.8]\n" +
		"\tat pl.piomin.services.caller.controller.CallerController.pingWithRandomError(CallerController.java:39) ~[classes/:na]"
)

// restError is what RestTemplate throws, as its message reads.
type restError struct{ msg string }

func (e restError) Error() string { return e.msg }

// call is RestTemplate.getForObject(url, String.class) through
// HttpURLConnection: its own headers only, nothing of the inbound request.
func (c *caller) call(s *Server, in *http.Request, path string) (int, string, error) {
	target := "http://callme-service:8080" + path
	u := *c.callee
	if path != "/callme/ping" {
		u.Path = path
	}
	req, err := http.NewRequestWithContext(in.Context(), http.MethodGet, u.String(), nil)
	if err != nil {
		return 0, "", restError{"org.springframework.web.client.ResourceAccessException: I/O error on GET request for \"" + target + "\": " + err.Error()}
	}
	req.Host = s.spec.CalleeHost
	req.Header.Set("Accept", "text/plain, application/json, application/*+json, */*")
	req.Header.Set("User-Agent", "Java/11.0.11")
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, "", restError{"org.springframework.web.client.ResourceAccessException: I/O error on GET request for \"" + target +
			"\": Connection refused (Connection refused); nested exception is java.net.ConnectException: Connection refused (Connection refused)"}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxCalleeBody))
	if err != nil {
		return 0, "", restError{"org.springframework.web.client.ResourceAccessException: I/O error on GET request for \"" + target + "\": " + err.Error()}
	}
	// Drain what is left (bounded) so the keep-alive connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxCalleeBody))
	if resp.StatusCode >= 400 {
		return 0, "", restError{httpStatusException(resp.StatusCode, string(b))}
	}
	return resp.StatusCode, string(b), nil
}

// httpStatusException is the message of the HttpStatusCodeException
// Spring 5.3's DefaultResponseErrorHandler throws for a 4xx or 5xx answer.
func httpStatusException(code int, body string) string {
	class := "HttpServerErrorException"
	if code < 500 {
		class = "HttpClientErrorException"
	}
	if sub := strings.ReplaceAll(http.StatusText(code), " ", ""); sub != "" && (code == 400 || code == 401 || code == 403 ||
		code == 404 || code == 405 || code == 409 || code == 429 || code == 500 || code == 502 || code == 503 || code == 504) {
		class += "$" + sub
	}
	if body == "" {
		body = "no body"
	}
	return "org.springframework.web.client." + class + ": " + strconv.Itoa(code) + " " + http.StatusText(code) + ": [" + body + "]"
}

// persons is sample-spring-kotlin-microservice on branch delayed
// (Spring Boot 3.1.2): PersonController numbers its calls with one
// AtomicInteger, logs "(n) findById(id)" before the lookup, then sleeps a
// uniform [20, 100) ms; its repository holds 1000 persons made up at
// startup (docs/real-apps.md, "sample-spring-kotlin-microservice").
type persons struct {
	log    *springLog
	people []person
	seq    atomic.Int64
}

const personController = "pl.piomin.services.controller.PersonController"

func newPersons(s *Server) *persons {
	return &persons{log: newSpringLog(s, boot31Date), people: makePeople(s.spec.Seed, 1000)}
}

func (p *persons) start(s *Server) error {
	return p.log.startup(bootStartup{mainClass: "pl.piomin.services.SampleSpringKotlinMicroserviceApplicationKt",
		boot3: true, javaVersion: "17.0.8", tomcat: "10.1.11", path: "/app.jar", actuator: 14})
}

func (p *persons) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	p.log.handler(w, r, func(thread string) {
		if r.URL.Path == actuatorHealth {
			actuatorUp(w)
			return
		}
		rest, ok := strings.CutPrefix(r.URL.Path, "/persons")
		if !ok || (rest != "" && rest[0] != '/') {
			s.springError(w, r, http.StatusNotFound)
			return
		}
		if !p.log.getOnly(w, r, thread) {
			return
		}
		rest = strings.TrimPrefix(rest, "/")
		// The counter advances only when the controller method runs: Spring
		// rejects an unparsable path variable before calling it.
		switch {
		case rest == "":
			if p.called(s, r, thread, "findAll()") {
				writeJSON(w, p.people)
			}
		case strings.HasPrefix(rest, "ages/"):
			age, ok := p.intVar(w, r, thread, strings.TrimPrefix(rest, "ages/"))
			if !ok {
				return
			}
			if !p.called(s, r, thread, fmt.Sprintf("findByAge(%d)", age)) {
				return
			}
			found := []person{}
			for _, x := range p.people {
				if x.Age == age {
					found = append(found, x)
				}
			}
			writeJSON(w, found)
		default:
			id, ok := p.intVar(w, r, thread, rest)
			if !ok {
				return
			}
			if !p.called(s, r, thread, fmt.Sprintf("findById(%d)", id)) {
				return
			}
			if id >= 1 && id <= len(p.people) {
				writeJSON(w, p.people[id-1])
				return
			}
			// Spring answers a null return value with 200 and an empty body.
			w.WriteHeader(http.StatusOK)
		}
	})
}

// called logs the controller's line, then sleeps its random delay; false
// means the client went away meanwhile.
func (p *persons) called(s *Server, r *http.Request, thread, what string) bool {
	s.hits.Add(1)
	p.log.line("INFO", thread, personController, fmt.Sprintf("(%d) %s", p.seq.Add(1), what))
	return sleep(r.Context(), time.Duration(20+s.randN(80))*time.Millisecond)
}

// intVar converts a path variable as Spring does for an Int parameter,
// answering 400 (and logging the resolver's warning) when it is not one.
func (p *persons) intVar(w http.ResponseWriter, r *http.Request, thread, v string) (int, bool) {
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		p.log.line("WARN", thread, "org.springframework.web.servlet.mvc.support.DefaultHandlerExceptionResolver",
			"Resolved [org.springframework.web.method.annotation.MethodArgumentTypeMismatchException: Failed to convert value of type 'java.lang.String' to required type 'int'; For input string: \""+v+"\"]")
		p.log.s.springError(w, r, http.StatusBadRequest)
		return 0, false
	}
	return int(n), true
}

// writeJSON answers like Jackson behind Spring MVC: compact, no newline.
func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
