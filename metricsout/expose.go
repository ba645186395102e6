package metricsout

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Handler serves the families gather returns at each scrape, in the text
// or protobuf exposition format the scraper asks for (expfmt.NegotiateAccept
// over the default formats: text and protobuf, no OpenMetrics).
func Handler(gather func() []*dto.MetricFamily) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		format := expfmt.NegotiateAccept(r.Header, expfmt.DefaultAcceptedFormats()...)
		w.Header().Set("Content-Type", string(format))
		enc := expfmt.NewEncoder(w, format)
		for _, f := range gather() {
			if err := enc.Encode(f); err != nil {
				// Headers are out; the scraper sees a truncated body and
				// says so itself.
				return
			}
		}
		if c, ok := enc.(expfmt.Closer); ok {
			_ = c.Close()
		}
	})
}

// Server is the exposition endpoint of one run.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan error
}

// Listen serves /metrics on addr until Close. It refuses an address that
// does not say which interface to listen on: the default elsewhere in
// mesh-verify is 127.0.0.1, and exposing a run's numbers on every
// interface must be asked for by naming one (0.0.0.0:9464 in a pod).
func Listen(addr string, gather func() []*dto.MetricFamily) (*Server, error) {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %q: want HOST:PORT such as 127.0.0.1:9464: %w", addr, err)
	}
	if host == "" {
		return nil, fmt.Errorf("metrics address %q: name the interface (127.0.0.1:PORT, or 0.0.0.0:PORT to listen on all)", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics address %s: %w", addr, err)
	}
	s := &Server{srv: &http.Server{Handler: Handler(gather), ReadHeaderTimeout: 10 * time.Second}, ln: ln, done: make(chan error, 1)}
	go func() { s.done <- s.srv.Serve(ln) }()
	return s, nil
}

// Addr is the address the endpoint listens on (with the port a :0 got).
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving, letting a scrape in progress finish for up to a
// few seconds.
func (s *Server) Close(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.done; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
