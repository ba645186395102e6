package apps

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
)

// rebelBase is Cilium's rebel-base (examples/kubernetes/clustermesh/
// global-service-example, docs/real-apps.md, "Cilium rebel-base"): the
// docker.io/nginx:1.15.8 image serving a ConfigMap's message as
// index.html. Every request — the kubelet's liveness probe every second
// included — writes nginx's "main" access-log line to stdout; a missing
// file also writes an error-log line to stderr.
type rebelBase struct {
	body     string
	modified time.Time
	conn     atomic.Int64 // nginx's connection serial, *N in error lines
}

// nginxWorkerPID is the pid of nginx's single worker in the container
// (the master is 1).
const nginxWorkerPID = "6"

func newRebelBase(s *Server) *rebelBase {
	return &rebelBase{
		body:     `{"Galaxy": "Alderaan", "Cluster": "` + s.spec.ClusterName + `"}` + "\n",
		modified: s.start.UTC().Truncate(time.Second),
	}
}

// nginx 1.15.8 (Debian stretch image) prints nothing when it starts.
func (*rebelBase) start(*Server) error { return nil }

func (b *rebelBase) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", "nginx/1.15.8")
	code, size := http.StatusOK, len(b.body)
	switch {
	case r.URL.Path != "/" && r.URL.Path != "/index.html":
		code, size = http.StatusNotFound, len(nginxNotFound)
		remote, _, _ := net.SplitHostPort(r.RemoteAddr)
		s.write(crilog.Stderr, fmt.Sprintf(`%s [error] %s#%s: *%d open() "/usr/share/nginx/html%s" failed (2: No such file or directory), client: %s, server: localhost, request: "%s", host: "%s"`,
			s.now().UTC().Format("2006/01/02 15:04:05"), nginxWorkerPID, nginxWorkerPID, b.conn.Add(1), r.URL.Path, remote, requestLine(r), r.Host))
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, nginxNotFound)
	case r.Method != http.MethodGet && r.Method != http.MethodHead:
		code, size = http.StatusMethodNotAllowed, len(nginxNotAllowed)
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(code)
		_, _ = io.WriteString(w, nginxNotAllowed)
	default:
		s.hits.Add(1)
		w.Header().Set("Content-Type", "text/html")
		w.Header().Set("Content-Length", strconv.Itoa(len(b.body)))
		w.Header().Set("Last-Modified", b.modified.Format(http.TimeFormat))
		w.Header().Set("ETag", fmt.Sprintf(`"%x-%x"`, b.modified.Unix(), len(b.body)))
		w.Header().Set("Accept-Ranges", "bytes")
		if r.Method == http.MethodHead {
			size = 0
		} else {
			_, _ = io.WriteString(w, b.body)
		}
	}
	s.write(crilog.Stdout, nginxAccessLine(s.now(), r, code, size))
}

// nginxAccessLine is the image's log_format main:
//
//	$remote_addr - $remote_user [$time_local] "$request" $status $body_bytes_sent "$http_referer" "$http_user_agent" "$http_x_forwarded_for"
func nginxAccessLine(t time.Time, r *http.Request, code, size int) string {
	remote, _, _ := net.SplitHostPort(r.RemoteAddr)
	return fmt.Sprintf(`%s - - [%s] "%s" %d %d "%s" "%s" "%s"`, remote, t.UTC().Format("02/Jan/2006:15:04:05 -0700"),
		requestLine(r), code, size, dashIfEmpty(r.Referer()), dashIfEmpty(r.UserAgent()), dashIfEmpty(r.Header.Get("X-Forwarded-For")))
}

func requestLine(r *http.Request) string { return r.Method + " " + r.RequestURI + " " + r.Proto }

func dashIfEmpty(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// nginx 1.15.8's built-in error pages.
const (
	nginxNotFound = "<html>\r\n<head><title>404 Not Found</title></head>\r\n<body>\r\n<center><h1>404 Not Found</h1></center>\r\n" +
		"<hr><center>nginx/1.15.8</center>\r\n</body>\r\n</html>\r\n"
	nginxNotAllowed = "<html>\r\n<head><title>405 Not Allowed</title></head>\r\n<body>\r\n<center><h1>405 Not Allowed</h1></center>\r\n" +
		"<hr><center>nginx/1.15.8</center>\r\n</body>\r\n</html>\r\n"
)
