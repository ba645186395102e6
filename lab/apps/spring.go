package apps

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
)

// Spring Boot's default console pattern (docs/real-apps.md, "Spring Boot
// log lines"), without colours (no TTY in a container):
//
//	%d %5p PID --- [%15.15t] %-40.40logger{39} : %m
//
// Boot 2.5 writes the date as "yyyy-MM-dd HH:mm:ss.SSS", Boot 3.0/3.1 as
// "yyyy-MM-dd'T'HH:mm:ss.SSSXXX". The JVM is PID 1 in these images.
const (
	boot25Date = "2006-01-02 15:04:05.000"
	boot31Date = "2006-01-02T15:04:05.000Z07:00"
	springPID  = "1"
)

// springLog writes one Spring Boot app's console lines.
type springLog struct {
	s          *Server
	dateLayout string
	pool       *tomcatPool

	// initOnce writes the DispatcherServlet's lazy-initialisation lines
	// on the first request the servlet handles, as Spring does.
	initOnce sync.Once
}

func newSpringLog(s *Server, dateLayout string) *springLog {
	return &springLog{s: s, dateLayout: dateLayout, pool: newTomcatPool(s.spec.Port)}
}

// format renders one line; level is INFO, WARN or ERROR.
func (l *springLog) format(level, thread, logger, msg string) string {
	return l.s.now().UTC().Format(l.dateLayout) + " " + fmt.Sprintf("%5s", level) + " " + springPID +
		" --- [" + fitLeft(thread, 15) + "] " + fitRight(abbreviateLogger(logger, 39), 40) + " : " + msg
}

func (l *springLog) line(level, thread, logger, msg string) {
	l.s.write(crilog.Stdout, l.format(level, thread, logger, msg))
}

// fitLeft is Logback's %N.Nx: keep the last n characters, pad on the left.
func fitLeft(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return strings.Repeat(" ", n-len(s)) + s
}

// fitRight is Logback's %-N.Nx: keep the last n characters, pad on the right.
func fitRight(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s + strings.Repeat(" ", n-len(s))
}

// abbreviateLogger is Logback's TargetLengthBasedClassNameAbbreviator
// (%logger{target}): package segments are cut to their first character,
// left to right, until the name fits; the class name is kept whole.
func abbreviateLogger(name string, target int) string {
	if len(name) < target {
		return name
	}
	last := strings.LastIndexByte(name, '.')
	if last < 0 {
		return name
	}
	lastSegment := len(name) - last
	leftTarget := max(target-lastSegment, 0)
	maxTrim := last - leftTarget
	var b strings.Builder
	trimmed, atDot, i := 0, true, 0
	for ; i < last; i++ {
		c := name[i]
		if c == '.' {
			if trimmed >= maxTrim {
				break
			}
			b.WriteByte(c)
			atDot = true
			continue
		}
		if atDot {
			b.WriteByte(c)
			atDot = false
		} else {
			trimmed++
		}
	}
	b.WriteString(name[i:])
	return b.String()
}

// tomcatPool names the thread that serves each request as Tomcat's NIO
// executor does: ten threads "http-nio-PORT-exec-N" start with the
// connector, an idle thread takes the next request (the longest idle
// first, so sequential requests rotate through exec-1..exec-10), and
// more threads, up to 200, start while all are busy.
type tomcatPool struct {
	prefix string
	mu     sync.Mutex
	idle   []int
	n      int
}

const (
	tomcatMinSpare = 10
	tomcatMax      = 200
)

func newTomcatPool(port int32) *tomcatPool {
	p := &tomcatPool{prefix: "http-nio-" + strconv.Itoa(int(port)) + "-exec-", n: tomcatMinSpare}
	for i := 1; i <= tomcatMinSpare; i++ {
		p.idle = append(p.idle, i)
	}
	return p
}

// acquire returns the thread serving a request; release it when done.
// Past 200 busy threads Tomcat would queue the request: names are reused
// instead, which only matters for thread names.
func (p *tomcatPool) acquire() (int, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var id int
	switch {
	case len(p.idle) > 0:
		id, p.idle = p.idle[0], p.idle[1:]
	case p.n < tomcatMax:
		p.n++
		id = p.n
	default:
		id = tomcatMax
	}
	return id, p.prefix + strconv.Itoa(id)
}

func (p *tomcatPool) release(id int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, i := range p.idle {
		if i == id {
			return // reused past the maximum: already idle
		}
	}
	p.idle = append(p.idle, id)
}

// dispatcherInit writes the lines Spring logs when its DispatcherServlet
// serves the first request.
func (l *springLog) dispatcherInit(thread string) {
	l.initOnce.Do(func() {
		l.line("INFO", thread, "org.apache.catalina.core.ContainerBase.[Tomcat].[localhost].[/]", "Initializing Spring DispatcherServlet 'dispatcherServlet'")
		l.line("INFO", thread, "org.springframework.web.servlet.DispatcherServlet", "Initializing Servlet 'dispatcherServlet'")
		l.line("INFO", thread, "org.springframework.web.servlet.DispatcherServlet", "Completed initialization in 1 ms")
	})
}

// bootStartup is what a Boot app logs from `java` to "Started".
type bootStartup struct {
	mainClass   string // fully qualified
	boot3       bool
	javaVersion string
	tomcat      string // Tomcat version
	path        string // the classpath root StartupInfoLogger names
	actuator    int    // exposed actuator endpoints; 0 = not logged
}

func (l *springLog) startup(b bootStartup) error {
	s := l.s
	simple := b.mainClass[strings.LastIndexByte(b.mainClass, '.')+1:]
	port := strconv.Itoa(int(s.spec.Port))
	start := "Starting " + simple + " using Java " + b.javaVersion + " on " + s.spec.Pod + " with PID " + springPID + " (" + b.path + " started by root in /)"
	profile := "No active profile set, falling back to default profiles: default"
	ran := fmt.Sprintf("(JVM running for %.3f)", 2.4+float64(s.randN(900))/1000)
	if b.boot3 {
		start = "Starting " + simple + " using Java " + b.javaVersion + " with PID " + springPID + " (" + b.path + " started by root in /)"
		profile = `No active profile set, falling back to 1 default profile: "default"`
		ran = fmt.Sprintf("(process running for %.3f)", 3.1+float64(s.randN(900))/1000)
	}
	lines := [][2]string{
		{b.mainClass, start},
		{b.mainClass, profile},
		{"org.springframework.boot.web.embedded.tomcat.TomcatWebServer", "Tomcat initialized with port(s): " + port + " (http)"},
		{"org.apache.catalina.core.StandardService", "Starting service [Tomcat]"},
		{"org.apache.catalina.core.StandardEngine", "Starting Servlet engine: [Apache Tomcat/" + b.tomcat + "]"},
		{"org.apache.catalina.core.ContainerBase.[Tomcat].[localhost].[/]", "Initializing Spring embedded WebApplicationContext"},
		{"org.springframework.boot.web.servlet.context.ServletWebServerApplicationContext",
			fmt.Sprintf("Root WebApplicationContext: initialization completed in %d ms", 900+s.randN(600))},
	}
	if b.actuator > 0 {
		lines = append(lines, [2]string{"org.springframework.boot.actuate.endpoint.web.EndpointLinksResolver",
			fmt.Sprintf("Exposing %d endpoint(s) beneath base path '/actuator'", b.actuator)})
	}
	lines = append(lines,
		[2]string{"org.springframework.boot.web.embedded.tomcat.TomcatWebServer", "Tomcat started on port(s): " + port + " (http) with context path ''"},
		[2]string{b.mainClass, fmt.Sprintf("Started %s in %.3f seconds %s", simple, 1.8+float64(s.randN(900))/1000, ran)})
	for _, ln := range lines {
		if err := s.startupLine(crilog.Stdout, l.format("INFO", "main", ln[0], ln[1])); err != nil {
			return err
		}
	}
	return nil
}

// handler runs one request on a Tomcat thread through Spring's
// dispatcher: the thread name is fixed for the whole request, as a
// servlet thread is.
func (l *springLog) handler(w http.ResponseWriter, r *http.Request, f func(thread string)) {
	id, thread := l.pool.acquire()
	defer l.pool.release(id)
	if r.URL.Path != actuatorHealth {
		// The actuator's own endpoints go through the dispatcher too, but
		// the lab's checks of them must not be what initialises it.
		l.dispatcherInit(thread)
	}
	f(thread)
}

// actuatorHealth is Spring Boot's health endpoint; the real apps answer it
// without logging.
const actuatorHealth = "/actuator/health"

func actuatorUp(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/vnd.spring-boot.actuator.v3+json")
	_, _ = io.WriteString(w, `{"status":"UP"}`)
}

// springError answers like Spring Boot's BasicErrorController (Boot 2.3
// and later leave out the message): {"timestamp", "status", "error", "path"}.
func (s *Server) springError(w http.ResponseWriter, r *http.Request, code int) {
	b, _ := json.Marshal(struct {
		Timestamp string `json:"timestamp"`
		Status    int    `json:"status"`
		Error     string `json:"error"`
		Path      string `json:"path"`
	}{s.now().UTC().Format("2006-01-02T15:04:05.000+00:00"), code, http.StatusText(code), r.URL.Path})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// getOnly enforces a Spring @GetMapping (which also serves HEAD): any other
// method is answered 405 and logged as Spring's DefaultHandlerExceptionResolver does.
func (l *springLog) getOnly(w http.ResponseWriter, r *http.Request, thread string) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	l.line("WARN", thread, "org.springframework.web.servlet.mvc.support.DefaultHandlerExceptionResolver",
		"Resolved [org.springframework.web.HttpRequestMethodNotSupportedException: Request method '"+r.Method+"' not supported]")
	w.Header().Set("Allow", "GET, HEAD")
	l.s.springError(w, r, http.StatusMethodNotAllowed)
	return false
}

// writeText answers a String from a @RestController: Spring's
// StringHttpMessageConverter sets the type and the length.
func writeText(w http.ResponseWriter, s string) {
	w.Header().Set("Content-Type", "text/plain;charset=UTF-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(s)))
	_, _ = io.WriteString(w, s)
}
