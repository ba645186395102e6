// Package promtest starts a real Prometheus server for tests: Debian's
// prometheus package (.ci/run installs it), listening on 127.0.0.1 with
// its remote-write receiver on, optionally scraping one target, stopped
// by its process id when the test ends. Where no prometheus binary exists
// the test is skipped, unless MESH_VERIFY_REQUIRE_PROMETHEUS is set (CI),
// where that is a failure.
package promtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Server is one running Prometheus.
type Server struct {
	// URL is its HTTP API, http://127.0.0.1:PORT.
	URL string
}

// WriteURL is its remote-write receiver.
func (s *Server) WriteURL() string { return s.URL + "/api/v1/write" }

// Start starts Prometheus; scrape, when not empty, is a HOST:PORT it
// scrapes /metrics of every 500ms.
func Start(t testing.TB, scrape string) *Server {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("MESH_VERIFY_REQUIRE_PROMETHEUS") != "" {
			t.Fatalf("no prometheus binary on PATH, and MESH_VERIFY_REQUIRE_PROMETHEUS is set (.ci/run installs Debian's prometheus)")
		}
		t.Skip("no prometheus binary on PATH (Debian: apt-get install prometheus)")
	}
	dir := t.TempDir()
	cfg := "global:\n  scrape_interval: 500ms\n  evaluation_interval: 10s\n"
	if scrape != "" {
		cfg += fmt.Sprintf("scrape_configs:\n  - job_name: mesh-verify\n    scrape_interval: 500ms\n    static_configs:\n      - targets: [%q]\n", scrape)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		var logs strings.Builder
		cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"),
			"--storage.tsdb.path="+filepath.Join(dir, "data"+strconv.Itoa(attempt)),
			"--web.listen-address="+addr, "--web.enable-remote-write-receiver", "--log.level=warn")
		cmd.Stdout, cmd.Stderr = &logs, &logs
		if err := cmd.Start(); err != nil {
			t.Fatalf("start prometheus: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		stop := func() {
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(10 * time.Second):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		s := &Server{URL: "http://" + addr}
		if ready(s.URL, exited) {
			t.Cleanup(stop)
			return s
		}
		stop()
		if !strings.Contains(logs.String(), "address already in use") {
			t.Fatalf("prometheus did not become ready:\n%s", logs.String())
		}
	}
	t.Fatal("prometheus: no free port after 3 attempts")
	return nil
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// ready waits for /-/ready, or for the process to exit.
func ready(base string, exited <-chan struct{}) bool {
	deadline := time.After(60 * time.Second)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			return false
		case <-deadline:
			return false
		case <-tick.C:
			resp, err := http.Get(base + "/-/ready")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					return true
				}
			}
		}
	}
}

// Sample is one series of an instant query's answer.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Query runs an instant PromQL query now.
func (s *Server) Query(ctx context.Context, promql string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+"/api/v1/query?query="+url.QueryEscape(promql), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var body struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Metric map[string]string
				Value  [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %s: %w", promql, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %s: %s", promql, body.Error)
	}
	var out []Sample
	for _, r := range body.Data.Result {
		str, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(str, 64)
		if err != nil {
			return nil, fmt.Errorf("query %s: value %v: %w", promql, r.Value[1], err)
		}
		out = append(out, Sample{Labels: r.Metric, Value: v})
	}
	return out, nil
}

// Eventually queries until cond holds for the answer or the deadline
// passes, and returns the last answer.
func (s *Server) Eventually(t testing.TB, promql string, within time.Duration, cond func([]Sample) bool) []Sample {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	var last []Sample
	var lastErr error
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		last, lastErr = s.Query(ctx, promql)
		if lastErr == nil && cond(last) {
			return last
		}
		select {
		case <-ctx.Done():
			t.Fatalf("prometheus: %s: condition not met within %s; last answer %v (error %v)", promql, within, last, lastErr)
			return last
		case <-tick.C:
		}
	}
}
