// Package measure attacks a target and counts what it answered: the
// attack pipeline (attack options, TLS, preflight, the attributor), the
// sink that attributes and tallies every result off the attack's loop, the
// progress line, what counts as answered, and the warnings that say why
// the numbers are less than asked for. A local run measures here (Local);
// a distributed run's workers measure here too (Attack) and its
// coordinator (fleet) merges what they measured behind the same Measurer.
// It judges nothing and knows no report beyond the facts it hands on.
package measure

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Measurer is how a run measures: in this process (Local) or from worker
// pods (fleet). A run chooses one once and uses it the same way whichever
// it is; Close releases what it holds (the workers' Jobs) and may be
// called again.
type Measurer interface {
	// Sequential says whether the measurer can stop at a sequential look
	// (statistics.stop: early); one that cannot attacks to the end and
	// says so in its warnings.
	Sequential() bool
	// Measure attacks and returns what was measured, also when ctx ended
	// midway; err is a *SetupError when nothing could be measured.
	Measure(ctx context.Context, in Input) (Result, error)
	Close(ctx context.Context) error
}

// Input is one measurement's inputs besides the measurer's own.
type Input struct {
	// Prepared is the attack (Prepare) of this process.
	Prepared *Prepared
	// Tally counts this process's results from the attack's start; a live
	// endpoint may read it while it counts.
	Tally *tally.Tally
	// RecordConns keeps each request's connection (Result.SeqConn), for
	// log lines joined by request id.
	RecordConns bool
	// Looks are the requests counted at each sequential look, and OnLook
	// is asked at each but the last whether the evidence so far settled:
	// true stops the attack. Nil Looks: no early stop.
	Looks  []int64
	OnLook func(look int, so Interim) bool
	// Progress prints the attack's state while it runs.
	Progress Progress
	// Abort, when it ends, stops waiting for what is in flight.
	Abort context.Context
}

// Interim is what was measured at a sequential look.
type Interim struct {
	// Body is the tally of the responses so far.
	Body tally.Snapshot
	// BySource is each source's tally apart (a fleet's attack.sources).
	BySource map[string]tally.Snapshot
}

// Progress is where and how the progress of an attack is printed.
type Progress struct {
	// W receives the lines; nil prints none.
	W io.Writer
	// Terminal rewrites one line in place instead of printing periodic
	// lines (for logs and CI).
	Terminal bool
	// Every is the period of plain lines (default 5s).
	Every time.Duration
}

// Result is what a measurement measured.
type Result struct {
	Summary attack.Summary
	// Body is the tally of the responses: who answered, by the bodies,
	// headers and addresses.
	Body tally.Snapshot
	// BySource is each source's tally apart (a fleet's attack.sources).
	BySource map[string]tally.Snapshot
	// Rules are the statistics of this process's attribution rules; nil
	// when others read the bodies (a fleet's workers).
	Rules *attribution.Stats
	// SeqConn is each request's connection, by request sequence number
	// (Input.RecordConns).
	SeqConn []uint32
	// BehindRate says why an open-loop attack achieved clearly less than
	// its rate, "" when it kept it; the run leaves it out when it was
	// interrupted (a Ctrl-C, also while the evidence settled).
	BehindRate string
	// Warnings say what else made the numbers less than asked for.
	Warnings []string
	// Workers is the fleet's per-worker table; nil for a local run.
	Workers *reports.Workers
}

// SetupError means the run could not measure what it was asked to: the
// target was unreachable, every request failed to connect, and so on.
type SetupError struct{ Err error }

func (e *SetupError) Error() string { return e.Err.Error() }
func (e *SetupError) Unwrap() error { return e.Err }

// Recorder receives every result, with who served it and whether it
// counted as answered, on one goroutine at a time (the sink's collector).
type Recorder interface {
	Record(r *attack.Result, id attribution.Identity, ok bool)
	// RecordUnread records a result whose body was never read.
	RecordUnread(r *attack.Result, ok bool)
	Close() error
}

// Local measures in this process: the attack, its sink and the progress
// line. Its results go to Record as they are counted.
type Local struct {
	Scenario *scenarios.Scenario
	RunID    string
	Record   Recorder
	Queue    Queue
}

// Sequential: a local attack stops at any look.
func (l *Local) Sequential() bool { return true }

// Close has nothing to release.
func (l *Local) Close(context.Context) error { return nil }

// Measure runs the attack to its end, a settled look or ctx's end, then
// reads what waits in the attribution queue.
func (l *Local) Measure(ctx context.Context, in Input) (Result, error) {
	p, tl := in.Prepared, in.Tally
	sink := newSink(p.Attributor, tl, l.Scenario.Attack.SuccessCodes, l.RunID, l.Record, l.Queue)
	sink.recordConns = in.RecordConns
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if in.Looks != nil {
		sink.looks = in.Looks
		sink.onLook = func(look int) {
			if look == len(in.Looks)-1 {
				return // the final look is the ordinary end of the run
			}
			if in.OnLook(look, Interim{Body: tl.Snapshot()}) {
				stop()
			}
		}
	}
	progressDone := make(chan struct{})
	if in.Progress.W != nil {
		go progress(runCtx, in.Progress, tl, p.Options, progressDone)
	} else {
		close(progressDone)
	}
	sink.start()
	sum := p.Attack.Run(runCtx, sink)
	// The attack is over: what waits in the attribution queue is read
	// now, bounded by the queue's size (or dropped after an abort).
	drainStart := time.Now()
	sink.close()
	drained := time.Since(drainStart)
	stop()
	<-progressDone

	rules := p.Attributor.Stats()
	res := Result{Summary: sum, Body: tl.Snapshot(), Rules: &rules, SeqConn: sink.seqConn}
	qs := sink.stats()
	res.BehindRate = behindRate(sum, qs)
	if w := unreadWarning(qs, l.Scenario.Attack.MaxBody); w != "" {
		res.Warnings = append(res.Warnings, w)
	}
	if drained > drainReported && qs.attributed > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("attribution read the last queued responses %s after the attack ended (the rules took %s per response): the report waited for them, the attack did not",
			drained.Round(100*time.Millisecond), (qs.attributing/time.Duration(qs.attributed)).Round(time.Microsecond)))
	}
	if sum.Truncated > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d responses were longer than attack.maxBody (%s) by more than %d KiB: the rest was not read and each closed its connection, so those requests did not reuse a keep-alive connection",
			sum.Truncated, l.Scenario.Attack.MaxBody, attack.DrainLimit>>10))
	}
	return res, nil
}

// BehindRate says why an open-loop attack achieved clearly less than the
// rate asked for, with no queue of this process behind it (a fleet's
// merged attack); "" when it kept the rate or was interrupted.
func BehindRate(sum attack.Summary) string { return behindRate(sum, queueStats{}) }

// behindRate says why an open-loop attack achieved clearly less than the
// rate asked for. Attribution runs beside the results loop (measure/sink.go)
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
// INCONCLUSIVE.
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

// SetupFailure tells a broken setup from a broken mesh: when not a single
// response came back, there is nothing to judge.
func SetupFailure(s tally.Snapshot) error {
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
