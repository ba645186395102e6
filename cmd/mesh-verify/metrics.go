package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	dto "github.com/prometheus/client_model/go"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/metricsout"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Environment variables of the remote write: credentials stay out of the
// command line, which report.json records and ps shows.
const (
	envRemoteWriteHeaders = "MESH_VERIFY_REMOTE_WRITE_HEADERS"
	envRemoteWriteToken   = "MESH_VERIFY_REMOTE_WRITE_BEARER_TOKEN"
)

// metricsFlags are run's Prometheus outputs (docs/metrics.md).
type metricsFlags struct {
	listen      string
	remoteWrite string
	headers     []string
	timeout     time.Duration
	retries     int
}

func addMetricsFlags(cmd *cobra.Command, m *metricsFlags) {
	fl := cmd.Flags()
	fl.StringVar(&m.listen, "metrics-listen", "", "serve the run's live counts as Prometheus metrics on HOST:PORT/metrics while it runs (e.g. 127.0.0.1:9464; docs/metrics.md)")
	fl.StringVar(&m.remoteWrite, "remote-write", "", "at the end of the run, write its shares, verdicts, success and latency to this Prometheus remote-write URL (e.g. http://prometheus:9090/api/v1/write)")
	fl.StringArrayVar(&m.headers, "remote-write-header", nil, "'Name: value' header for the remote write, such as X-Scope-OrgID (repeatable); credentials go in $"+envRemoteWriteHeaders+" or $"+envRemoteWriteToken)
	fl.DurationVar(&m.timeout, "remote-write-timeout", metricsout.DefaultTimeout, "time limit of each remote-write attempt")
	fl.IntVar(&m.retries, "remote-write-retries", metricsout.DefaultRetries, "retries of a remote write that met a 5xx, a 429 or a network error")
}

// remote checks the flags and the environment into a metricsout.Remote;
// ok is false without --remote-write.
func (m metricsFlags) remote() (r metricsout.Remote, ok bool, err error) {
	if m.remoteWrite == "" {
		if len(m.headers) > 0 {
			return r, false, exitcode.InvalidInputf("--remote-write-header needs --remote-write URL")
		}
		return r, false, nil
	}
	h := http.Header{}
	for _, raw := range m.headers {
		name, value, err := parseHeader(raw)
		if err != nil {
			return r, false, exitcode.InvalidInputf("--remote-write-header %q: %v", redact.Set(raw), err)
		}
		if credentialHeader(name) {
			return r, false, exitcode.InvalidInputf("--remote-write-header %s: a credential on the command line is recorded in report.json and shown by ps; put it in $%s", name, envRemoteWriteHeaders)
		}
		h.Add(name, value)
	}
	if env := os.Getenv(envRemoteWriteHeaders); env != "" {
		for i, line := range strings.Split(strings.ReplaceAll(env, "\r\n", "\n"), "\n") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			name, value, err := parseHeader(line)
			if err != nil {
				// Never echo the line: it may hold a token.
				return r, false, exitcode.InvalidInputf("$%s line %d: %v", envRemoteWriteHeaders, i+1, err)
			}
			h.Add(name, value)
		}
	}
	if tok := os.Getenv(envRemoteWriteToken); tok != "" {
		h.Set("Authorization", "Bearer "+strings.TrimSpace(tok))
	}
	r = metricsout.Remote{URL: m.remoteWrite, Headers: h, Timeout: m.timeout, Retries: m.retries}
	if err := r.Validate(); err != nil {
		return r, false, exitcode.InvalidInputf("--remote-write: %v", err)
	}
	return r, true, nil
}

// parseHeader reads "Name: value" (value may be empty, the name not).
func parseHeader(raw string) (string, string, error) {
	name, value, ok := strings.Cut(raw, ":")
	name = strings.TrimSpace(name)
	if !ok || name == "" || strings.ContainsAny(name, " \t") {
		return "", "", fmt.Errorf("want 'Name: value'")
	}
	if strings.ContainsAny(value, "\r\n\x00") {
		return "", "", fmt.Errorf("a header value cannot hold a line break or NUL")
	}
	return textproto.CanonicalMIMEHeaderKey(name), strings.TrimSpace(value), nil
}

func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"authorization", "token", "key", "secret", "password", "cookie", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// liveMetrics serves --metrics-listen for one run: from the moment the
// attack starts it reads the run's tally at each scrape; before that it
// serves the run's identity with zero counts.
type liveMetrics struct {
	srv   *metricsout.Server
	tally atomic.Pointer[tally.Tally]
}

// startMetrics starts the endpoint, wiring it to the run's options; nil
// without --metrics-listen.
func (m metricsFlags) startMetrics(o *runner.Options, run metricsout.Run) (*liveMetrics, error) {
	if m.listen == "" {
		return nil, nil
	}
	lm := &liveMetrics{}
	srv, err := metricsout.Listen(m.listen, func() []*dto.MetricFamily {
		var s tally.Snapshot
		if t := lm.tally.Load(); t != nil {
			s = t.Snapshot()
		}
		return metricsout.FromSnapshot(run, s)
	})
	if err != nil {
		return nil, &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("--metrics-listen: %w", err)}
	}
	lm.srv = srv
	o.Live = func(t *tally.Tally) { lm.tally.Store(t) }
	return lm, nil
}

func (lm *liveMetrics) stop() {
	if lm != nil {
		_ = lm.srv.Close(context.Background())
	}
}

// pushMetrics writes the judged run to the remote-write receiver. A
// receiver that is down is said on stderr and does not change the exit
// code: the verdict is about the mesh, and the report on disk has it all.
func pushMetrics(r metricsout.Remote, rep *reports.Report, stderr io.Writer) {
	at := rep.Attack.Ended
	if at.IsZero() {
		at = time.Now()
	}
	// Not the run's context: an interrupted run still publishes what it
	// measured, within the remote write's own time limits.
	if err := metricsout.Write(context.Background(), r, metricsout.FromReport(rep), at); err != nil {
		fmt.Fprintf(stderr, "warning: %s (the verdict and the run's files are unaffected)\n", reports.Printable(err.Error()))
		return
	}
	fmt.Fprintf(stderr, "wrote metrics to %s\n", redact.URL(r.URL))
}
