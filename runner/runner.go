// Package runner carries out one scenario end to end: reach the entry
// point, attack it, attribute and tally every response, judge the
// expectations and assemble the report. It decides nothing itself: who
// served a request is attribution's call, the verdict is assert's.
package runner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/converge"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/redact"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// SetupError means the run could not measure what it was asked to: the
// target was unreachable, every request failed to connect, and so on.
type SetupError = measure.SetupError

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
	// counted unattributed and said so (measure/sink.go). Negative values
	// are invalid.
	AttributionWorkers int
	AttributionQueue   int64
	// Source is the scenario as run (its YAML with --set applied): a
	// distributed run (attack.workers) gives it to its workers.
	Source []byte
	// Gate, when set, is a converge gate judging the windows of this run
	// as they seal (run --converge with a split GateSplit names): the
	// attack lasts Gate.Within, or until the gate converges or spends its
	// looks, and report.json's converge says which (runner/gate.go).
	Gate *converge.Gate
}

// Recorder receives every result as it is measured (measure.Recorder).
type Recorder = measure.Recorder

// Run executes the scenario: it reaches the target, measures (in this
// process or from worker pods, one measure.Measurer either way), collects
// the evidence, judges and assembles the report. It returns a report
// whenever anything was measured, even when ctx was cancelled midway; err
// is a *SetupError when the target could not be measured at all.
func Run(ctx context.Context, sc *scenarios.Scenario, o Options) (*reports.Report, error) {
	entered := time.Now()
	if o.AttributionWorkers < 0 || o.AttributionQueue < 0 {
		return nil, fmt.Errorf("runner: attribution workers %d, queue %d bytes: want positive numbers (0: the defaults)", o.AttributionWorkers, o.AttributionQueue)
	}
	if o.Gate != nil {
		if name, why := GateSplit(sc); name != o.Gate.Expectation {
			return nil, fmt.Errorf("runner: converge gate on expectation %q: %s", o.Gate.Expectation, why)
		}
	}
	runID := o.RunID
	if runID == "" {
		runID = NewRunID(time.Now())
	}
	sc = withNamespace(sc, o.Kube.Namespace)
	var kp *kubePath
	if needsKube(sc) {
		var err error
		if kp, err = openKube(ctx, sc, o); err != nil {
			return nil, &SetupError{Err: err}
		}
		defer kp.close()
	}
	// The expected splits the mesh's objects define are read once, as
	// the clusters are connected: the report names the objects'
	// resourceVersions, the configuration the verdicts are judged against.
	var mesh judge.Mesh
	var follow []meshQuery
	if kp != nil {
		var err error
		if mesh, follow, err = readMesh(ctx, sc, kp.clusters, attackConcurrency(measure.AttackConfig(sc, "", "")), o.Progress); err != nil {
			return nil, &SetupError{Err: err}
		}
	}
	if o.Gate != nil && gateFollowed(follow, o.Gate) {
		// The attack lasts --within, unless the gate stops it. A split
		// whose object defined no split at the start is not followed:
		// the run keeps the scenario's attack and judges it as such.
		sc = gateScenario(sc, o.Gate)
	}
	m, target, err := openMeasurer(ctx, sc, kp, runID, o)
	if err != nil {
		return nil, err
	}
	// Ctrl-C, a failed run and a panic all release what the measurer
	// holds (a fleet's Jobs); the normal end releases it before the
	// report and says if that failed.
	defer m.Close(ctx)
	var res attribution.Resolver
	if kp != nil && kp.inv != nil {
		res = kp // a pod a response names maps to its cluster
	}
	p, err := measure.Prepare(ctx, sc, target, runID, o.Abort, res)
	if err != nil {
		return nil, err
	}
	ao := p.Options

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
	if p.Attributor.Empty() {
		// Logs or metrics attribute; bodies are not expected to say anything.
		tl.DisableSamples()
	}
	j := newJudge(sc, ao)
	j.WithMesh(mesh)
	if o.Gate != nil {
		j.WithGateLooks(o.Gate.Looks())
	}
	if err := cutFixedWindows(sc, tl, start); err != nil {
		return nil, &SetupError{Err: err}
	}
	var followers []*follower
	var gw *gateWatch
	for _, mq := range follow {
		var win *scenarios.Windows
		for _, e := range sc.Expect {
			if e.Split != nil && e.Split.FromMesh == mq.src {
				win = e.Split.Windows
			}
		}
		var every time.Duration
		if o.Gate != nil && o.Gate.Expectation == mq.name {
			every = o.Gate.Window
		}
		f, err := startFollow(ctx, mq, mesh[mq.src].Expected, win, every, tl, start, o.Progress)
		if err != nil {
			return nil, &SetupError{Err: err}
		}
		defer f.stop()
		followers = append(followers, f)
		if every > 0 {
			gw = newGateWatch(o, sc, ao, mesh, mq, f, tl, start)
		}
	}
	// Log followers and watches outlive the attack until the logs settle.
	kubeCtx, stopKube := context.WithCancel(ctx)
	defer stopKube()
	in := measure.Input{Prepared: p, Tally: tl, Abort: o.Abort,
		Progress: measure.Progress{W: o.Progress, Terminal: o.Terminal, Every: o.ProgressEvery}}
	if kp != nil {
		if err := kp.start(kubeCtx, runID, start); err != nil {
			return nil, &SetupError{Err: err}
		}
		in.RecordConns = kp.logs != nil
		if kp.metricsBefore, err = kp.scrapeAll(ctx); err != nil {
			if kube.IsDenied(err) {
				return nil, &SetupError{Err: err}
			}
			kp.warnings = append(kp.warnings, "metrics before the attack: "+err.Error())
		}
	}
	seq := sequential(sc, m, ao, j, kp, &in)

	// A converge gate stops the attack once it is decided: the run then
	// ends as at its duration's end, not interrupted.
	mctx, stopAttack := context.WithCancel(ctx)
	defer stopAttack()
	gateDone := make(chan struct{})
	if gw != nil {
		watchCtx, stopWatch := context.WithCancel(mctx)
		defer stopWatch()
		go func() { defer close(gateDone); gw.run(watchCtx, gateTick, stopAttack) }()
	} else {
		close(gateDone)
	}
	mr, err := m.Measure(mctx, in)
	stopAttack()
	<-gateDone
	if err != nil {
		return nil, err
	}
	sum := mr.Summary
	var followWarnings []string
	var settling []bool // per window of the followed split
	followed := make([][]judge.MeshWindow, len(followers))
	for i, f := range followers {
		var warn []string
		followed[i], warn = f.stop()
		followWarnings = append(followWarnings, warn...)
	}
	if len(followers) > 0 {
		// The followers held the last answers back for a cut in the past
		// (docs/statistics.md §10); none comes now, so every answer goes
		// to its window, and the windows are counted again with them.
		tl.ReleaseHeld()
		mr.Body.Windows, mr.Body.WindowsHeldEarly = tl.Windows()
		if n := mr.Body.WindowsHeldEarly; n > 0 {
			followWarnings = append(followWarnings, fmt.Sprintf("%d answers were counted in a window before their hold was over (more than %d held at once): a settling window opened in the past did not move them", n, tally.MaxHeld))
		}
	}
	for i, ws := range followed {
		// A cut after the tally's last snapshot is in no window counted:
		// the windows pair up in order, so the extra versions are dropped.
		ws = ws[:min(len(ws), len(mr.Body.Windows))]
		ms := mesh[follow[i].src]
		ms.Windows = ws
		mesh[follow[i].src] = ms
		for _, w := range ws {
			settling = append(settling, w.Settling)
		}
	}
	var recErr error
	if o.Record != nil {
		recErr = o.Record.Close()
	}
	sum.Interrupted = ctx.Err() != nil

	ev := evidence{body: mr.Body, from: mr.BySource, recon: map[string]*reports.Reconciliation{}, config: map[string][]reports.ConfigError{}}
	var warnings []string
	if kp != nil {
		warnings = kp.collect(ctx, &ev, start, sum.Ended, grace, mr.SeqConn)
		if ev.logs != nil && len(mr.Body.Windows) > 0 && logsWindowed(sc) {
			// A split in windows counted from the logs (Skupper's app
			// names no cluster in its answer).
			windowLogs(ev.logs, ev.logSeconds, mr.Body, settling)
		}
		// A Ctrl-C while the logs settle or the metrics are scraped cut
		// that evidence short: the run is interrupted (130), not judged
		// as if the evidence were whole.
		sum.Interrupted = sum.Interrupted || ctx.Err() != nil
	}
	stopKube()
	// The rules' statistics are this process's attributor's; a fleet's
	// workers attributed the bodies and this process read none
	// (docs/distributed.md).
	var rules attribution.Stats
	if mr.Rules != nil {
		rules = *mr.Rules
		ev.config[scenarios.SourceBody] = bodyConfigErrors(sc, rules, ev.body, kp != nil && kp.inv != nil)
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
	rep := assemble(sc, runID, redact.URL(target.URL), ao, sum, ev, rules)
	rep.Sequential = seq
	rep.Tool, rep.Command = o.Tool, redact.Args(o.Command)
	rep.Warnings = append(rep.Warnings, warnings...)
	rep.Warnings = append(rep.Warnings, followWarnings...)
	if p.Insecure {
		rep.Warnings = append(rep.Warnings, "the target's TLS certificate was not verified (target.tls.insecureSkipVerify: true)")
	}
	if ao.HTTP2 && sc.Statistics.Balancing == scenarios.BalancingConnection {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("HTTP/2 multiplexes the %d requests over %d connections: a balancer that routes connections (L4, Skupper's router) made only that many choices, which is what the statistics count; set attack.http2: false (and keepAlive: false) for one choice per request",
			sum.Requests, sum.Connections))
	}
	if mr.BehindRate != "" && !sum.Interrupted {
		rep.Warnings = append(rep.Warnings, mr.BehindRate)
	}
	rep.Warnings = append(rep.Warnings, mr.Warnings...)
	if recErr != nil {
		rep.Warnings = append(rep.Warnings, recErr.Error())
	}
	if kp != nil {
		rep.Kubernetes = kp.reportInfo()
	}
	rep.Workers = mr.Workers
	if err := m.Close(ctx); err != nil {
		rep.Warnings = append(rep.Warnings, err.Error())
	}
	rep.Expectation = j.evaluate(ev, look)
	j.plan(rep.Expectation)
	if o.Gate != nil {
		var live *converge.Decision
		stopped := converge.StopNotFollowed
		if gw != nil {
			live, stopped = gw.decision, gw.stopped(ctx)
		}
		o.Gate.Finish(rep, stopped, live)
	}
	finish(rep, sc)
	if err := kp.denied(); err != nil {
		rep.SetupError = err.Error()
		rep.ExitCode = exitcode.Setup
		return rep, &SetupError{Err: err}
	}
	// An interrupted run keeps its exit code (130) even when nothing was
	// answered: the user stopped it, the setup did not fail.
	if err := measure.SetupFailure(ev.body); err != nil && !sum.Interrupted {
		rep.SetupError = err.Error()
		rep.ExitCode = exitcode.Setup
		return rep, &SetupError{Err: err}
	}
	return rep, nil
}

// sequential plans the looks of statistics.stop: early when the measurer
// can stop at one, and sets in to take them: at each look but the last,
// the run stops once every expectation is settled. nil: the attack runs
// to its end.
func sequential(sc *scenarios.Scenario, m measure.Measurer, ao attack.Options, j *judging, kp *kubePath, in *measure.Input) *reports.Sequential {
	if sc.Statistics.Stop != "early" || !m.Sequential() {
		return nil
	}
	n := measure.PlannedRequests(ao)
	if n <= 0 {
		return nil
	}
	plan := assert.PlanSequential(n, sc.Statistics.Looks, sc.Statistics.Confidence)
	seq := &reports.Sequential{Plan: plan, Rule: plan.Rule}
	j.looks = len(plan.Looks)
	in.Looks = plan.Looks
	in.OnLook = func(look int, so measure.Interim) bool {
		if !j.settled(evidence{body: so.Body, from: so.BySource, readyPods: kp.readyPods()}, look) {
			return false
		}
		seq.StoppedAt = look + 1
		return true
	}
	return seq
}

// NewRunID is sortable by time and unique enough to join logs to one run.
func NewRunID(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}
