package apps

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
)

// helloworld is Istio's helloworld sample (samples/helloworld/src/app.py,
// docs/real-apps.md, "Istio helloworld"): Flask behind gunicorn 22 with one
// gevent worker. GET /hello spins a CPU loop of about 0.1 s, then answers
// "Hello version: v2, instance: <pod>\n". Nothing is logged per request
// (gunicorn has no access log by default); its startup goes to stderr.
type helloworld struct {
	// cpu serialises the CPU loop: with one gevent worker, requests wait
	// for each other.
	cpu sync.Mutex
}

// helloworldCPU is the time the real app's loop of 10^6 square roots takes.
const helloworldCPU = 100 * time.Millisecond

func (*helloworld) start(s *Server) error {
	ts := s.now().UTC().Format("[2006-01-02 15:04:05 -0700]")
	port := strconv.Itoa(int(s.spec.Port))
	worker := strconv.Itoa(7 + int(s.randN(5)))
	for _, l := range []string{
		ts + " [1] [INFO] Starting gunicorn 22.0.0",
		ts + " [1] [INFO] Listening at: http://[::]:" + port + " (1)",
		ts + " [1] [INFO] Using worker: gevent",
		ts + " [" + worker + "] [INFO] Booting worker with pid: " + worker,
	} {
		if err := s.startupLine(crilog.Stderr, l); err != nil {
			return err
		}
	}
	return nil
}

func (h *helloworld) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Server", "gunicorn")
	switch r.URL.Path {
	case "/hello":
	case "/health":
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = io.WriteString(w, "Helloworld is healthy")
		return
	default:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, flaskNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead && r.Method != http.MethodOptions {
		w.Header().Set("Allow", "GET, HEAD, OPTIONS")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = io.WriteString(w, flaskMethodNotAllowed)
		return
	}
	h.cpu.Lock()
	ok := sleep(r.Context(), helloworldCPU)
	h.cpu.Unlock()
	if !ok {
		return
	}
	s.hits.Add(1)
	body := fmt.Sprintf("Hello version: %s, instance: %s\n", s.spec.Version, s.spec.Pod)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = io.WriteString(w, body)
}

// Werkzeug 3's error pages.
const (
	flaskNotFound = "<!doctype html>\n<html lang=en>\n<title>404 Not Found</title>\n<h1>Not Found</h1>\n" +
		"<p>The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again.</p>\n"
	flaskMethodNotAllowed = "<!doctype html>\n<html lang=en>\n<title>405 Method Not Allowed</title>\n<h1>Method Not Allowed</h1>\n" +
		"<p>The method is not allowed for the requested URL.</p>\n"
)
