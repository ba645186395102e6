// Package runner carries out one scenario end to end: reach the entry
// point, attack it, attribute and tally every response, judge the
// expectations and assemble the report. It decides nothing itself: who
// served a request is attribution's call, the verdict is assert's.
package runner

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// SetupError means the run could not measure what it was asked to: the
// target was unreachable, every request failed to connect, and so on.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// Options tune a run without changing what it judges.
type Options struct {
	// Progress receives live progress lines; nil for none.
	Progress io.Writer
	// Terminal rewrites one progress line in place instead of printing
	// periodic lines (for logs and CI).
	Terminal bool
	// ProgressEvery is the period of plain progress lines (default 5s).
	ProgressEvery time.Duration
	// Live, when set, is handed the run's tally as the attack starts, so
	// that others can read snapshots while it counts (the metrics
	// endpoint of --metrics-listen; a local run's only).
	Live func(*tally.Tally)
	// RunID overrides the generated run id.
	RunID string
	// Dial reaches the target (a tunnel); nil dials TCP directly.
	Dial attack.DialFunc
	// Kubeconfig lists kubeconfig files merged like kubectl's KUBECONFIG;
	// empty means kubectl's own rules. Kube.Kubeconfig, when set, wins.
	Kubeconfig []string
	// Kube are kubectl's connection flags (contexts per cluster, -n,
	// impersonation, token, timeouts); Kube.Namespace replaces the
	// namespaces the scenario leaves unset (withNamespace).
	Kube kube.Options
	// Tool and Command are recorded in the report (the command redacted)
	// so the run can be reproduced.
	Tool    reports.Tool
	Command []string
	// WaitReady > 0 waits up to that long, before the attack, for the
	// observed workloads and the port-forward target to be ready
	// (run --wait-ready, runner/ready.go); not ready in time is a setup error.
	WaitReady time.Duration
	// Record keeps every result on disk as it is measured (a
	// runlog.Recorder); Run closes it when the attack ends and reports
	// what Close returns as a warning. nil records nothing.
	Record Recorder
	// Abort, when it ends, cuts the requests still in flight short (a
	// second Ctrl-C); ctx ending only stops new requests and lets those in
	// flight finish, up to the attack's timeout.
	Abort context.Context
	// AttributionWorkers read the response bodies off the attack's
	// results loop (default DefaultAttributionWorkers); AttributionQueue
	// bounds the bytes of bodies waiting for them (default
	// DefaultAttributionQueue). A response that finds the queue full is
	// counted unattributed and said so (runner/sink.go). Negative values
	// are invalid.
	AttributionWorkers int
	AttributionQueue   int64
	// Source is the scenario as run (its YAML with --set applied): a
	// distributed run (attack.workers) gives it to its workers.
	Source []byte
}

// Recorder receives every result, with who served it and whether it
// counted as answered, on one goroutine at a time (the sink's collector).
type Recorder interface {
	Record(r *attack.Result, id attribution.Identity, ok bool)
	// RecordUnread records a result whose body was never read.
	RecordUnread(r *attack.Result, ok bool)
	Close() error
}

// Run executes the scenario. It returns a report whenever anything was
// measured, even when ctx was cancelled midway; err is a *SetupError when
// the target could not be measured at all.
func Run(ctx context.Context, sc *scenarios.Scenario, o Options) (*reports.Report, error) {
	entered := time.Now()
	if o.AttributionWorkers < 0 || o.AttributionQueue < 0 {
		return nil, fmt.Errorf("runner: attribution workers %d, queue %d bytes: want positive numbers (0: the defaults)", o.AttributionWorkers, o.AttributionQueue)
	}
	runID := o.RunID
	if runID == "" {
		runID = NewRunID(time.Now())
	}
	sc = withNamespace(sc, o.Kube.Namespace)
	var kp *kubePath
	target := sc.Target.URL
	dial := o.Dial
	distributed := sc.Attack.Workers > 0
	if distributed {
		// The workers attack the target's in-cluster address; this
		// process dials nothing (runner/distributed.go).
		var err error
		if target, err = sc.InClusterURL(); err != nil {
			return nil, fmt.Errorf("attack.workers: %w", err)
		}
		dial = func(context.Context, string, string) (net.Conn, error) {
			return nil, errors.New("a distributed run's coordinator sends no request")
		}
	}
	if needsKube(sc) {
		var err error
		if kp, err = openKube(ctx, sc, o); err != nil {
			return nil, &SetupError{err}
		}
		defer kp.close()
		if kp.tunnel != nil {
			target, dial = kp.targetURL(), kp.tunnel.DialContext
		}
	}
	var fl *fleetRun
	if distributed {
		var err error
		if fl, err = startFleet(ctx, kp, sc, runID, o.Source, o.Tool.Version, o.Progress); err != nil {
			return nil, &SetupError{fmt.Errorf("workers: %w", err)}
		}
		// Ctrl-C, a failed run and a panic all delete the Job; the normal
		// end deletes it before the report and says if that failed.
		defer fl.close(ctx)
		if err := fl.awaitReady(ctx, workerReadyTimeout); err != nil {
			if ctx.Err() != nil {
				err = fmt.Errorf("interrupted while waiting for the workers: %w", err)
			}
			return nil, &SetupError{fmt.Errorf("workers: %w", err)}
		}
	}
	var res attribution.Resolver
	if kp != nil && kp.inv != nil {
		res = kp // a pod a response names maps to its cluster
	}
	atk, ao, attr, insecure, err := prepareAttack(ctx, sc, target, runID, dial, o.Abort, res)
	if err != nil {
		return nil, err
	}

	// The logs' window opens skew before the attack, and a young pod's
	// background is told from a previous run's burst by the quiet seconds
	// just before the window (podlogs/window.go). A run started right
	// after another (a CI gate, a test) must not open its window inside
	// the other's last lines: the attack starts at least skew plus two
	// seconds after this run began, when the other's lines were over.
	if skew := logSkew(sc); skew > 0 {
		if wait := time.Until(entered.Add(skew + 2*time.Second)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
			}
		}
	}
	start := time.Now()
	grace := ao.Timeout + 5*time.Second
	tl := tally.New(start, grace)
	if o.Live != nil {
		o.Live(tl)
	}
	j := newJudge(sc, ao)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	// Log followers and watches outlive the attack until the logs settle.
	kubeCtx, stopKube := context.WithCancel(ctx)
	defer stopKube()

	sink := newSink(attr, tl, sc.Attack.SuccessCodes, runID, o.Record,
		sinkConfig{workers: o.AttributionWorkers, budget: o.AttributionQueue, abort: o.Abort})
	if attr.Empty() {
		// Logs or metrics attribute; bodies are not expected to say anything.
		tl.DisableSamples()
	}
	if kp != nil {
		if err := kp.start(kubeCtx, runID, start); err != nil {
			return nil, &SetupError{err}
		}
		if kp.logs != nil {
			sink.recordConns = true
		}
		if kp.metricsBefore, err = kp.scrapeAll(ctx); err != nil {
			if kube.IsDenied(err) {
				return nil, &SetupError{err}
			}
			kp.warnings = append(kp.warnings, "metrics before the attack: "+err.Error())
		}
	}
	var seq *reports.Sequential
	if sc.Statistics.Stop == "early" && fl == nil {
		if n := plannedRequests(ao); n > 0 {
			plan := assert.PlanSequential(n, sc.Statistics.Looks, sc.Statistics.Confidence)
			seq = &reports.Sequential{Plan: plan, Rule: plan.Rule}
			sink.looks = plan.Looks
			j.looks = len(plan.Looks)
			sink.onLook = func(look int) {
				if look == len(plan.Looks)-1 {
					return // the final look is the ordinary end of the run
				}
				if j.settled(evidence{body: tl.Snapshot(), readyPods: kp.readyPods()}, look) {
					seq.StoppedAt = look + 1
					stop()
				}
			}
		}
	}

	progressDone := make(chan struct{})
	if o.Progress != nil && fl == nil {
		go progress(runCtx, o, tl, ao, progressDone)
	} else {
		close(progressDone)
	}
	var sum attack.Summary
	var drained time.Duration
	var fr fleetResult
	var body tally.Snapshot
	if fl != nil {
		// The start lies ahead, so that every worker sees the signal
		// before it; the log window opened at start, earlier.
		var err error
		if fr, err = fl.attack(runCtx, o.Abort, time.Now().Add(startLead), o.ProgressEvery); err != nil {
			return nil, &SetupError{fmt.Errorf("workers: %w", err)}
		}
		sum, body = fr.summary, fr.body
	} else {
		sink.start()
		sum = atk.Run(runCtx, sink)
		// The attack is over: what waits in the attribution queue is read
		// now, bounded by the queue's size (or dropped after an abort).
		drainStart := time.Now()
		sink.close()
		drained = time.Since(drainStart)
		body = tl.Snapshot()
	}
	stop()
	var recErr error
	if o.Record != nil {
		recErr = o.Record.Close()
	}
	<-progressDone
	sum.Interrupted = ctx.Err() != nil

	ev := evidence{body: body, from: fr.bySource, recon: map[string]*reports.Reconciliation{}, config: map[string][]reports.ConfigError{}}
	var warnings []string
	if kp != nil {
		warnings = kp.collect(ctx, &ev, start, sum.Ended, grace, sink.seqConn)
		// A Ctrl-C while the logs settle or the metrics are scraped cut
		// that evidence short: the run is interrupted (130), not judged
		// as if the evidence were whole.
		sum.Interrupted = sum.Interrupted || ctx.Err() != nil
	}
	stopKube()
	if fl == nil {
		ev.config[scenarios.SourceBody] = bodyConfigErrors(sc, attr.Stats(), ev.body, kp != nil && kp.inv != nil)
	}

	// Every expectation is judged at its own spending level for the look
	// that ends the run: the look it stopped at, or the last one, which
	// spends what the earlier looks left (docs/statistics.md §6).
	look := -1
	if seq != nil {
		look = len(seq.Plan.Looks) - 1
		if seq.StoppedAt > 0 {
			look = seq.StoppedAt - 1
		}
	}
	rules := attr.Stats()
	if fl != nil {
		// The workers attributed the bodies; this process's attributor
		// read none (docs/distributed.md).
		rules = attribution.Stats{}
	}
	rep := assemble(sc, runID, redact.URL(target), ao, sum, ev, rules)
	rep.Sequential = seq
	rep.Tool, rep.Command = o.Tool, redact.Args(o.Command)
	rep.Warnings = append(rep.Warnings, warnings...)
	if insecure {
		rep.Warnings = append(rep.Warnings, "the target's TLS certificate was not verified (target.tls.insecureSkipVerify: true)")
	}
	if ao.HTTP2 && sc.Statistics.Balancing == scenarios.BalancingConnection {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("HTTP/2 multiplexes the %d requests over %d connections: a balancer that routes connections (L4, Skupper's router) made only that many choices, which is what the statistics count; set attack.http2: false (and keepAlive: false) for one choice per request",
			sum.Requests, sum.Connections))
	}
	qs := sink.stats()
	// A lost worker's missing requests are said by its own warning, not
	// blamed on the target.
	if w := behindRate(sum, qs); w != "" && fr.lost == 0 {
		rep.Warnings = append(rep.Warnings, w)
	}
	if w := unreadWarning(qs, sc.Attack.MaxBody); w != "" {
		rep.Warnings = append(rep.Warnings, w)
	}
	if drained > drainReported && qs.attributed > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("attribution read the last queued responses %s after the attack ended (the rules took %s per response): the report waited for them, the attack did not",
			drained.Round(100*time.Millisecond), (qs.attributing/time.Duration(qs.attributed)).Round(time.Microsecond)))
	}
	if sum.Truncated > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d responses were longer than attack.maxBody (%s) by more than %d KiB: the rest was not read and each closed its connection, so those requests did not reuse a keep-alive connection",
			sum.Truncated, sc.Attack.MaxBody, attack.DrainLimit>>10))
	}
	if recErr != nil {
		rep.Warnings = append(rep.Warnings, recErr.Error())
	}
	if kp != nil {
		rep.Kubernetes = kp.reportInfo()
	}
	if fl != nil {
		rep.Workers = fl.workersReport(fr.rows)
		rep.Warnings = append(rep.Warnings, fr.warnings...)
		if sc.Statistics.Stop == "early" {
			rep.Warnings = append(rep.Warnings, "statistics.stop: early is not applied to a distributed run: the workers attacked to the end")
		}
		if err := fl.close(ctx); err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("delete the workers' Jobs: %v (they expire by themselves: ttlSecondsAfterFinished, and the next run removes them)", err))
		}
	}
	rep.Expectation = j.evaluate(ev, look)
	j.plan(rep.Expectation)
	finish(rep, sc)
	if err := kp.denied(); err != nil {
		rep.SetupError = err.Error()
		rep.ExitCode = exitcode.Setup
		return rep, &SetupError{err}
	}
	// An interrupted run keeps its exit code (130) even when nothing was
	// answered: the user stopped it, the setup did not fail.
	if err := setupFailure(ev.body); err != nil && !sum.Interrupted {
		rep.SetupError = err.Error()
		rep.ExitCode = exitcode.Setup
		return rep, &SetupError{err}
	}
	return rep, nil
}

// behindRate says why an open-loop attack achieved clearly less than the
// rate asked for. Attribution runs beside the results loop (runner/sink.go)
// and cannot hold it back; the loop still waits for the collector, which
// counts and records each result (a disk slower than the attack), and the
// workers wait for the target's answers. A run that fell behind measured
// fewer requests than planned, and the load it put on the mesh was not the
// load asked for.
func behindRate(sum attack.Summary, qs queueStats) string {
	if sum.RequestedRate <= 0 || sum.Interrupted || sum.Requests == 0 || sum.AchievedRate >= 0.9*sum.RequestedRate {
		return ""
	}
	if sum.Elapsed > 0 && float64(sum.Attributing) > 0.5*float64(sum.Elapsed) {
		return fmt.Sprintf("achieved %.1f/s of the %.1f/s requested: handing the results on took %s of the attack's %s, so counting and recording them (the run directory's disk) held the attack back",
			sum.AchievedRate, sum.RequestedRate, sum.Attributing.Round(time.Millisecond), sum.Elapsed.Round(time.Millisecond))
	}
	w := fmt.Sprintf("achieved %.1f/s of the %.1f/s requested: the target (or the tunnel) answered too slowly for the workers to keep the rate",
		sum.AchievedRate, sum.RequestedRate)
	if qs.attributed > 0 {
		w += fmt.Sprintf(" (attribution, off the attack's path, took %s per response)", (qs.attributing / time.Duration(qs.attributed)).Round(time.Microsecond))
	}
	return w
}

// drainReported is how long reading the queue after the attack may take
// before the report says so: a run that ends long after its attack has a
// reason, and it is the rules.
const drainReported = 5 * time.Second

// unreadWarning says how many responses attribution never read and why:
// the queue was full (the rules are slower than the rate, on these bodies)
// or the run was aborted. Expectations judged from the bodies are then
// INCONCLUSIVE (evidence.unusable).
func unreadWarning(qs queueStats, maxBody scenarios.Size) string {
	var w string
	if qs.overloaded > 0 {
		per := "n/a"
		if qs.attributed > 0 {
			per = (qs.attributing / time.Duration(qs.attributed)).Round(time.Microsecond).String()
		}
		w = fmt.Sprintf("not attributed: attribution overloaded: %d responses found the attribution queue full (%s of bodies, %d workers; the rules took %s per response) and were counted with their bodies unread, so the attack kept its rate; expectations judged from the bodies must hold wherever they went (INCONCLUSIVE when they decide it). Simplify the rules, lower attack.maxBody (%s) or the rate",
			qs.overloaded, scenarios.Size(qs.budget), qs.workers, per, maxBody)
	}
	if qs.abort > 0 {
		if w != "" {
			w += "; "
		}
		w += fmt.Sprintf("not attributed: %d responses still waiting for attribution when the run was aborted", qs.abort)
	}
	return w
}

// NewRunID is sortable by time and unique enough to join logs to one run.
func NewRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// preflight dials the target once so an unreachable URL is a setup error
// in seconds, not an attack of timeouts. It sends no HTTP request, so the
// servers' own counts stay comparable with the report's.
func preflight(ctx context.Context, target string, timeout time.Duration, tlsCfg *tls.Config) error {
	shown := redact.URL(target) // the raw URL may carry credentials
	u, err := url.Parse(target)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // its message quotes the raw URL
		}
		return fmt.Errorf("target %s: %w", shown, err)
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "https" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	d := net.Dialer{Timeout: min(timeout, 10*time.Second)}
	c, err := d.DialContext(ctx, "tcp", host)
	if err != nil {
		return fmt.Errorf("cannot reach target %s: %w", shown, err)
	}
	defer c.Close()
	if u.Scheme != "https" {
		return nil
	}
	// The handshake checks the certificate as the attack will, so a
	// certificate nobody trusts is one clear setup error, not a run of
	// failed requests.
	cfg := tlsCfg.Clone()
	if cfg.ServerName == "" {
		cfg.ServerName = u.Hostname()
	}
	hctx, cancel := context.WithTimeout(ctx, min(timeout, 10*time.Second))
	defer cancel()
	if err := tls.Client(c, cfg).HandshakeContext(hctx); err != nil {
		return fmt.Errorf("TLS with target %s: %w (trust its authority with target.tls.ca, name the certificate's host with target.tls.serverName, or accept any certificate with target.tls.insecureSkipVerify: true)", shown, err)
	}
	return nil
}

// setupFailure tells a broken setup from a broken mesh: when not a single
// response came back, there is nothing to judge.
func setupFailure(s tally.Snapshot) error {
	if s.Total == 0 {
		return errors.New("no request was sent")
	}
	out := s.Dimensions[tally.Outcome]
	for i, b := range out.Buckets {
		if b == tally.Success && out.N[i] > 0 {
			return nil
		}
	}
	if s.Metrics.StatusCodes["0"] == int(s.Total) {
		msgs := make([]string, 0, len(s.Errors))
		for m := range s.Errors {
			msgs = append(msgs, m)
		}
		sort.Strings(msgs)
		if len(msgs) > 3 {
			msgs = msgs[:3]
		}
		return fmt.Errorf("all %d requests failed without a response: %s", s.Total, strings.Join(msgs, "; "))
	}
	return nil
}
