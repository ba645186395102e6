// Package runner carries out one scenario end to end: reach the entry
// point, attack it, attribute and tally every response, judge the
// expectations and assemble the report. It decides nothing itself: who
// served a request is attribution's call, the verdict is assert's.
package runner

import (
	"context"
	"crypto/rand"
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
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Exit codes of a run; the CLI passes them through.
const (
	ExitPass         = 0
	ExitFail         = 1
	ExitInconclusive = 2
	ExitSetup        = 3
	ExitInvalidInput = 4
	ExitInterrupted  = 130
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
	// RunID overrides the generated run id.
	RunID string
	// Dial reaches the target (a tunnel); nil dials TCP directly.
	Dial attack.DialFunc
}

// Run executes the scenario. It returns a report whenever anything was
// measured, even when ctx was cancelled midway; err is a *SetupError when
// the target could not be measured at all.
func Run(ctx context.Context, sc *scenarios.Scenario, o Options) (*reports.Report, error) {
	runID := o.RunID
	if runID == "" {
		runID = NewRunID(time.Now())
	}
	target, err := targetURL(sc)
	if err != nil {
		return nil, err
	}
	ao := attackOptions(sc, target, runID)
	ao.Dial = o.Dial
	attr, err := attributor(sc)
	if err != nil {
		return nil, err
	}
	if o.Dial == nil {
		if err := preflight(ctx, target, ao.Timeout); err != nil {
			return nil, &SetupError{err}
		}
	}
	atk, err := attack.New(ao)
	if err != nil {
		return nil, err
	}

	start := time.Now()
	tl := tally.New(start, ao.Timeout+5*time.Second)
	j := newJudge(sc, ao)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()

	sink := &sink{attr: attr, tally: tl}
	var seq *reports.Sequential
	if sc.Statistics.Stop == "early" {
		if n := plannedRequests(ao); n > 0 {
			plan := assert.PlanSequential(n, sc.Statistics.Looks, sc.Statistics.Confidence)
			seq = &reports.Sequential{Plan: plan, Rule: plan.Rule}
			sink.looks = plan.Looks
			sink.onLook = func(look int) {
				conf := plan.Confidence[look]
				if look == len(plan.Looks)-1 {
					return // the final look is the ordinary end of the run
				}
				if j.settled(tl.Snapshot(), conf) {
					seq.StoppedAt = look + 1
					stop()
				}
			}
		}
	}

	progressDone := make(chan struct{})
	if o.Progress != nil {
		go progress(runCtx, o, tl, ao, progressDone)
	} else {
		close(progressDone)
	}
	sum := atk.Run(runCtx, sink)
	stop()
	<-progressDone
	sum.Interrupted = ctx.Err() != nil

	snap := tl.Snapshot()
	conf := sc.Statistics.Confidence
	if seq != nil && seq.StoppedAt > 0 {
		conf = seq.Plan.Confidence[seq.StoppedAt-1]
	}
	rep := assemble(sc, runID, target, ao, sum, snap)
	rep.Sequential = seq
	rep.Expectation = j.evaluate(snap, conf)
	finish(rep, sc)
	if err := setupFailure(snap); err != nil {
		rep.SetupError = err.Error()
		rep.ExitCode = ExitSetup
		return rep, &SetupError{err}
	}
	return rep, nil
}

// NewRunID is sortable by time and unique enough to join logs to one run.
func NewRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

func targetURL(sc *scenarios.Scenario) (string, error) {
	if sc.Target.URL != "" {
		return sc.Target.URL, nil
	}
	return "", errors.New("target.portForward needs the Kubernetes path, which this build does not include yet")
}

// preflight dials the target once so an unreachable URL is a setup error
// in seconds, not an attack of timeouts. It sends no HTTP request, so the
// servers' own counts stay comparable with the report's.
func preflight(ctx context.Context, target string, timeout time.Duration) error {
	u, err := url.Parse(target)
	if err != nil {
		return fmt.Errorf("target %s: %w", target, err)
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
		return fmt.Errorf("cannot reach target %s: %w", target, err)
	}
	return c.Close()
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

// sink attributes each result and counts it; it runs on the attack's
// consumer goroutine, so the interim looks need no extra locking.
type sink struct {
	attr   *attribution.Attributor
	tally  *tally.Tally
	looks  []int64
	next   int
	seen   int64
	onLook func(int)
}

func (s *sink) Add(r *attack.Result) {
	var id attribution.Identity
	if r.Error == "" {
		id = s.attr.Attribute(r.Body, r.Headers)
	}
	r.Body = nil // attributed; the body is not kept
	s.tally.Add(r, id)
	s.seen++
	if s.onLook != nil && s.next < len(s.looks) && s.seen >= s.looks[s.next] {
		look := s.next
		s.next++
		s.onLook(look)
	}
}

func (s *sink) ConnClosed(id uint64) { s.tally.ConnClosed(id) }
