package apps

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// testServer is Kuma's test-server in echo mode (test/server/cmd/echo.go,
// docs/real-apps.md, "Kuma test-server"): every request is answered with
// compact JSON naming the instance (the pod) and what was received. It
// logs nothing at all. The x-set-response-delay-ms and x-set-response-code
// request headers delay the answer and set its status.
type testServer struct{}

type testServerResponse struct {
	Instance string             `json:"instance"`
	Received testServerReceived `json:"received"`
}

type testServerReceived struct {
	StatusCode int                 `json:"status,omitempty"` // never set by the server
	Method     string              `json:"method"`
	Path       string              `json:"path"`
	Headers    map[string][]string `json:"headers"`
}

func (testServer) start(*Server) error { return nil }

func (testServer) serve(s *Server, w http.ResponseWriter, r *http.Request) {
	headers := r.Header.Clone()
	if v := headers.Get("x-set-response-delay-ms"); v != "" {
		// The real server ignores a value it cannot parse.
		if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			if !sleep(r.Context(), min(time.Duration(ms)*time.Millisecond, maxRequestDelay)) {
				return
			}
		}
	}
	code := http.StatusOK
	if v := headers.Get("x-set-response-code"); v != "" {
		c, err := strconv.Atoi(v)
		if err != nil || c < 100 || c > 999 {
			c = http.StatusInternalServerError
		}
		code = c
	}
	headers.Add("host", r.Host)
	body, err := json.Marshal(testServerResponse{
		Instance: s.spec.Pod,
		Received: testServerReceived{Method: r.Method, Path: r.URL.Path, Headers: headers},
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.hits.Add(1)
	w.WriteHeader(code)
	_, _ = w.Write(body)
}
