package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// A distributed run (attack.workers > 0, docs/distributed.md) attacks from
// an Indexed Job of `mesh-verify worker` pods instead of this process. The
// coordinator here creates the Job, follows the pods' logs, gives the
// start once every worker is ready, merges the workers' records as they
// arrive, and hands the run the merged tally as a measure.Measurer: the
// rest of the run (log attribution joined through the workers' request
// ids, judging, the report) is a local run's.

// Limits and pacing of a distributed run.
const (
	// workerReadyTimeout bounds the wait for every worker's ready record
	// (the image pulled, the pod scheduled, the ConfigMap read).
	workerReadyTimeout = 3 * time.Minute
	// workerStartMargin is what the coordinator may take between the last
	// ready record and the start signal besides the log window's lead: log
	// followers opened, metrics scraped, the start 2 s ahead.
	workerStartMargin = 2 * time.Minute
	// startLead is how far ahead of the start signal the start lies, so
	// that every worker has seen the annotation before it.
	startLead = 2 * time.Second
	// workerEndGrace is how long after its attack should have ended (the
	// duration and the request timeout) a worker may take to print its
	// final record before it counts as lost.
	workerEndGrace = 30 * time.Second
	// maxLogReconnects bounds how often one worker's log is opened again
	// after its stream ended before its final record.
	maxLogReconnects = 5
	// lastRecordGrace is how long after its pod is seen ended a
	// worker's last records may take to arrive through its log.
	lastRecordGrace = 3 * time.Second
	// deleteTimeout bounds the Job's deletion at the end, also after a
	// Ctrl-C.
	deleteTimeout = 30 * time.Second
	// unschedulableGrace is how long a worker pod may stay Unschedulable
	// before the run stops: the scheduler also says so of a pod that
	// waits for others to leave a full node, which takes seconds; no node
	// that fits at all is not a matter of seconds. An image that cannot
	// be pulled stops the run at once.
	unschedulableGrace = 10 * time.Second
)

// fleetRun is one distributed run's Job and what its pods printed.
type fleetRun struct {
	sc     *scenarios.Scenario
	runID  string
	record ResultSink
	// sources are the Jobs, one per cluster the workers attack from,
	// numbering the run's workers in order (attack.sources).
	sources []*sourceRun
	image   string
	workers int
	events  chan fleetEvent
	// follow ends the log followers and the pod watch.
	follow   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	followed map[string]bool // pod names whose log is followed
	pods     map[int]kube.WorkerPod
	progress io.Writer
	warnings []string
	closing  sync.Once
	closeErr error
	// unschedulableGrace is the constant's, shorter in tests.
	unschedulableGrace time.Duration
}

// sourceRun is one source's Job: workers offset to offset+count-1.
type sourceRun struct {
	cluster       string
	offset, count int
	run           *kube.WorkerRun
}

// of is the source of worker i.
func (f *fleetRun) of(i int) *sourceRun {
	for _, src := range f.sources {
		if i >= src.offset && i < src.offset+src.count {
			return src
		}
	}
	return nil
}

// fleetEvent is a record from a worker's log, or a pod's change.
type fleetEvent struct {
	src *sourceRun
	pod string
	rec Record
	err error // the log could not be read or a line decoded
	// pods is set on a pod change: the Job's pods as last seen, their
	// Index the run's (the Job's completion index plus its offset).
	pods []kube.WorkerPod
	// logEnded: the pod's log was read to its end without a final or
	// error record (the worker was killed).
	logEnded bool
	// warning is for the report only (record lines skipped).
	warning string
}

// Namespace is where the workers run: the target Service's namespace, so
// that its short name resolves there too (and the namespace's sidecar
// injection applies to them, as to the tutorials' client pods). A url
// target names it as cluster DNS resolves Services: NAME.NAMESPACE,
// NAME.NAMESPACE.svc or NAME.NAMESPACE.svc.cluster.local; any other
// host (an IP, a longer name) leaves the default namespace.
func Namespace(sc *scenarios.Scenario) string {
	if f := sc.Target.Forward; f != nil && f.Namespace != "" {
		return f.Namespace
	}
	if sc.Target.Forward == nil && sc.Target.URL != "" {
		if ns := urlNamespace(sc.Target.URL); ns != "" {
			return ns
		}
	}
	return scenarios.DefaultNamespace
}

// urlNamespace is the namespace a Service URL's host names, "" if none.
func urlNamespace(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	host := strings.TrimSuffix(u.Hostname(), ".")
	if net.ParseIP(host) != nil {
		return ""
	}
	labels := strings.Split(host, ".")
	switch {
	case len(labels) == 2,
		len(labels) == 3 && labels[2] == "svc",
		len(labels) > 3 && labels[2] == "svc" && strings.Join(labels[3:], ".") == scenarios.ClusterDomain:
	default:
		return ""
	}
	if errs := validation.IsDNS1123Label(labels[1]); len(errs) > 0 {
		return ""
	}
	return labels[1]
}

// Spec is what the coordinator of one distributed run is given.
type Spec struct {
	Scenario *scenarios.Scenario
	RunID    string
	// Source is the scenario as run (scenario.yaml in the run directory),
	// what the workers run; Version the image's tag when attack.image is
	// unset.
	Source  []byte
	Version string
	// Clusters are the connected clusters by scenario name; Pods the
	// observed pods (the workers' inventory.json).
	Clusters map[string]*kube.Cluster
	Pods     []kube.Pod
	// LogLead is how long before the attack the logs' window opens (the
	// largest logs.skew): a ready worker waits that long for the start.
	LogLead time.Duration
	// Record receives the workers' results, merged in timestamp order
	// (the run directory's recorder: results.bin, attribution.jsonl); nil
	// for none.
	Record ResultSink
	// Progress receives a line whenever the workers' phases change while
	// they get ready (pending, pulling, running, done, failed); nil for
	// none.
	Progress io.Writer
}

// Start creates the workers' Jobs and waits until every worker is ready.
// A worker that cannot start ends the wait at once with a
// *measure.SetupError naming it; on any error, what was created is
// deleted again.
func Start(ctx context.Context, s Spec) (*Coordinator, error) {
	f, err := startFleet(ctx, s)
	if err != nil {
		return nil, &measure.SetupError{Err: fmt.Errorf("workers: %w", err)}
	}
	if err := f.awaitReady(ctx, workerReadyTimeout); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("interrupted while waiting for the workers: %w", err)
		}
		_ = f.close(ctx)
		return nil, &measure.SetupError{Err: fmt.Errorf("workers: %w", err)}
	}
	return &Coordinator{f: f}, nil
}

// Coordinator is a distributed run's measurer: the workers ready, it
// gives the start and merges what they measured.
type Coordinator struct{ f *fleetRun }

// Sequential: the coordinator takes the sequential looks on the merged
// records and stops the workers when the evidence settled.
func (c *Coordinator) Sequential() bool { return true }

// Measure gives the start, so that every worker sees the signal before
// it, and merges the workers' records until each has printed its last
// one or is lost. ctx ending (Ctrl-C) stops the workers; in.Abort ending
// stops the wait for them.
func (c *Coordinator) Measure(ctx context.Context, in measure.Input) (measure.Result, error) {
	f := c.f
	if in.Progress.W != nil {
		f.progress = in.Progress.W
	}
	wt := windowTally(f.sc, in.Tally)
	fr, err := f.attack(ctx, in.Abort, time.Now().Add(startLead), in.Progress.Every, looks{at: in.Looks, on: in.OnLook}, wt)
	if err != nil {
		return measure.Result{}, &measure.SetupError{Err: fmt.Errorf("workers: %w", err)}
	}
	res := measure.Result{Summary: fr.summary, Body: fr.body, BySource: fr.bySource, Rules: fr.rules, Workers: f.workersReport(fr.rows)}
	if wt != nil {
		// The windows were counted here, in the merged results; the
		// runner counts them again once the follower has stopped and
		// the answers it held back are in (tally.Tally.ReleaseHeld).
		res.Body.Windows, _ = wt.Windows()
	}
	// A lost worker's missing requests are said by its own warning, not
	// blamed on the target.
	if fr.lost == 0 {
		res.BehindRate = measure.BehindRate(fr.summary)
	}
	res.Warnings = append(res.Warnings, fr.warnings...)
	return res, nil
}

// Close deletes the workers' Jobs, also after a Ctrl-C; Ctrl-C, a failed
// run and a panic all end here, and the second call returns the first's
// error.
func (c *Coordinator) Close(ctx context.Context) error {
	if err := c.f.close(ctx); err != nil {
		return fmt.Errorf("delete the workers' Jobs: %w (they expire by themselves: ttlSecondsAfterFinished, and the next run removes them)", err)
	}
	return nil
}

// startFleet creates the workers' Job in every source cluster
// (attack.from, or each of attack.sources) and follows their pods. On an
// error, what was created is deleted again.
func startFleet(ctx context.Context, spec Spec) (_ *fleetRun, err error) {
	sc, runID, source := spec.Scenario, spec.RunID, spec.Source
	if len(source) == 0 {
		return nil, errors.New("distributed run without the scenario's source (Spec.Source)")
	}
	target, err := sc.InClusterURL()
	if err != nil {
		return nil, fmt.Errorf("attack.workers: %w", err)
	}
	ns := Namespace(sc)
	f := &fleetRun{sc: sc, runID: runID, record: spec.Record, progress: spec.Progress, workers: sc.Attack.Workers, image: sc.Attack.WorkerImage(spec.Version),
		events: make(chan fleetEvent, 4*sc.Attack.Workers+16), followed: map[string]bool{}, pods: map[int]kube.WorkerPod{},
		unschedulableGrace: unschedulableGrace}
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	f.follow = cancel
	defer func() {
		if err != nil {
			_ = f.close(ctx)
		}
	}()
	pods := spec.Pods
	if pods == nil {
		pods = []kube.Pod{}
	}
	inv, err := json.Marshal(pods)
	if err != nil {
		return nil, fmt.Errorf("encode inventory.json: %w", err)
	}
	// The pods do not have the coordinator's files: target.tls.ca's
	// certificates (never a key: ReadCA refuses a file with one) go in
	// the workers' Secret (ca.pem).
	ca, err := measure.ReadCA(sc)
	if err != nil {
		return nil, err
	}
	offset := 0
	for _, s := range sc.Attack.WorkerSources() {
		cl := spec.Clusters[s.Cluster]
		if cl == nil {
			return nil, fmt.Errorf("cluster %q of the workers is not connected", s.Cluster)
		}
		// Runs whose coordinator died (a crash, a kill -9) left their Job:
		// it expires with its annotation, and the next run removes it.
		swept, err := cl.SweepWorkers(ctx, ns, time.Now())
		if err != nil && kube.IsDenied(err) {
			return nil, Denied(err, s.Cluster, ns, sc.Attack.Workers)
		}
		if err != nil {
			f.warnings = append(f.warnings, "sweeping expired worker Jobs: "+err.Error())
		} else if len(swept) > 0 {
			f.warnings = append(f.warnings, fmt.Sprintf("removed worker Jobs of earlier runs that had expired in cluster %s namespace %s: %s", cl.Name, ns, strings.Join(swept, ", ")))
		}
		rc, err := json.Marshal(RunConfig{RunID: runID, Workers: f.workers, Target: target, Interval: RecordInterval(f.workers).String()})
		if err != nil {
			return nil, fmt.Errorf("encode run.json: %w", err)
		}
		pod, err := workerPodTemplate(&sc.Attack)
		if err != nil {
			return nil, err
		}
		run, err := cl.CreateWorkers(ctx, kube.WorkerSpec{
			RunID: runID, Namespace: ns, Workers: s.Workers, IndexOffset: offset, Image: f.image, ServiceAccount: sc.Attack.ServiceAccount, Pod: pod,
			Scenario: source, Inventory: inv, Run: rc, CA: ca, Deadline: jobDeadline(sc, spec.LogLead),
			// A worker ready first waits for the last one, then for the
			// log window's lead and the metrics scrape before the start.
			StartTimeout: workerReadyTimeout + spec.LogLead + workerStartMargin,
		})
		if err != nil {
			return nil, Denied(err, s.Cluster, ns, sc.Attack.Workers)
		}
		src := &sourceRun{cluster: s.Cluster, offset: offset, count: s.Workers, run: run}
		f.sources = append(f.sources, src)
		offset += s.Workers
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			err := src.run.WatchPods(wctx, func(ps []kube.WorkerPod) {
				ps = slices.Clone(ps)
				for i := range ps {
					if ps[i].Index >= 0 {
						ps[i].Index += src.offset
					}
					f.followPod(wctx, src, ps[i])
				}
				f.send(wctx, fleetEvent{src: src, pods: ps})
			})
			if err != nil {
				f.send(wctx, fleetEvent{src: src, err: Denied(err, src.cluster, src.run.Namespace, sc.Attack.Workers)})
			}
		}()
	}
	return f, nil
}

// jobDeadline is the Job's activeDeadlineSeconds: a coordinator that dies
// cannot leave workers attacking longer than the run would have.
func jobDeadline(sc *scenarios.Scenario, logLead time.Duration) time.Duration {
	return min(plannedLength(sc)+workerReadyTimeout+logLead+workerStartMargin+2*sc.Attack.Timeout.Duration+workerEndGrace, kube.MaxWorkerDeadline)
}

// plannedLength is how long the attack should take: its duration, a
// request count at its rate, or a ramp's length; kube.MaxWorkerDeadline
// for a closed loop by request count, which no rate bounds.
func plannedLength(sc *scenarios.Scenario) time.Duration {
	a := sc.Attack
	switch {
	case a.Duration.Duration > 0:
		return a.Duration.Duration
	case a.Ramp != nil:
		return a.Ramp.Duration.Duration
	case a.Requests > 0 && a.Rate != nil && a.Rate.Freq > 0:
		return time.Duration(float64(a.Requests) / float64(a.Rate.Freq) * float64(a.Rate.Per))
	}
	return kube.MaxWorkerDeadline
}

func (f *fleetRun) send(ctx context.Context, ev fleetEvent) {
	select {
	case f.events <- ev:
	case <-ctx.Done():
	}
}

// followPod starts reading a pod's log once its container has started
// (a pod still waiting has no log yet).
func (f *fleetRun) followPod(ctx context.Context, src *sourceRun, p kube.WorkerPod) {
	if p.State == "" || p.State == "waiting" {
		return
	}
	f.mu.Lock()
	if f.followed[p.Name] {
		f.mu.Unlock()
		return
	}
	f.followed[p.Name] = true
	f.mu.Unlock()
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		f.readLog(ctx, src, p.Name)
	}()
}

// readLog follows one pod's log into records. A stream that ends before
// the worker's last record (the API server cut it) is opened again from
// the start: the merger ignores the records it already took (their seq).
// Once the pod has ended, the log is read once more without following,
// to its end, before it counts as ended without a last record: a cut
// stream's EOF does not prove the log was read whole. maxLogReconnects
// bounds the openings in a row that brought no new record.
func (f *fleetRun) readLog(ctx context.Context, src *sourceRun, pod string) {
	logs := src.run.Cluster.Client.CoreV1().Pods(src.run.Namespace)
	var lastErr error
	var seq int64 = -1 // the last record's, to tell a stream that brought new ones
	follow := true
	for failures := 0; failures <= maxLogReconnects && ctx.Err() == nil; {
		stream, err := logs.GetLogs(pod, &corev1.PodLogOptions{Container: "worker", Follow: follow}).Stream(ctx)
		if err != nil {
			lastErr = err
			failures++
			sleep(ctx, time.Duration(failures)*500*time.Millisecond)
			continue
		}
		progressed, done := false, false
		dec := NewDecoder(stream)
		for {
			rec, err := dec.Next()
			if errors.Is(err, ErrVersion) {
				// Permanent: another major version will not read better.
				stream.Close()
				f.send(ctx, fleetEvent{src: src, pod: pod, err: fmt.Errorf("worker pod %s in cluster %s: %w", pod, src.cluster, err)})
				return
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					lastErr = err
				}
				break
			}
			if rec.Seq > seq {
				seq, progressed = rec.Seq, true
			}
			f.send(ctx, fleetEvent{src: src, pod: pod, rec: rec})
			done = done || rec.Kind == KindFinal || rec.Kind == KindError
		}
		stream.Close()
		if sk := dec.Skipped(); sk.Invalid+sk.TooLong > 0 {
			f.send(ctx, fleetEvent{src: src, pod: pod, warning: fmt.Sprintf("worker pod %s in cluster %s: %d record lines skipped as invalid, %d as too long (%s)", pod, src.cluster, sk.Invalid, sk.TooLong, sk.LastInvalid)})
		}
		switch {
		case done:
			return
		case !follow:
			// Read to its end after the pod ended: whole, and no last record.
			f.send(ctx, fleetEvent{src: src, pod: pod, logEnded: true})
			return
		case f.podEnded(pod):
			follow = false
			continue
		}
		if progressed {
			failures = 0
		} else {
			failures++
		}
		sleep(ctx, 500*time.Millisecond)
	}
	if ctx.Err() != nil {
		return
	}
	if lastErr == nil {
		f.send(ctx, fleetEvent{src: src, pod: pod, logEnded: true})
		return
	}
	f.send(ctx, fleetEvent{src: src, pod: pod, err: fmt.Errorf("cluster %s: read the log of worker pod %s in namespace %s: %w", src.cluster, pod, src.run.Namespace, lastErr)})
}

func (f *fleetRun) podEnded(name string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pods {
		if p.Name == name {
			return p.State == "terminated" || p.Phase == corev1.PodSucceeded || p.Phase == corev1.PodFailed
		}
	}
	return false
}

// annotateTimeout bounds setting the start or stop annotation: the event
// loop waits for it, and a second Ctrl-C must still get through.
const annotateTimeout = 15 * time.Second

// annotate runs a Start or Stop of the workers even after ctx ended (the
// stop is what a Ctrl-C asks for), bounded by annotateTimeout.
func annotate(ctx context.Context, call func(context.Context) error) error {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), annotateTimeout)
	defer cancel()
	return call(actx)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// notePods keeps the pods' latest state, by index.
func (f *fleetRun) notePods(ps []kube.WorkerPod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range ps {
		if p.Index >= 0 {
			f.pods[p.Index] = p
		}
	}
}

// Worker phases, as the progress lines show them.
const (
	phasePending = "pending" // no pod yet, or its pod not scheduled
	phasePulling = "pulling" // its container waiting: the image pulled, the container created
	phaseRunning = "running"
	phaseDone    = "done" // its last record came, or its pod ended
	phaseFailed  = "failed"
)

// workerPhase is where a worker is: its pod p (seen false: none yet) and
// whether its last record came.
func workerPhase(p kube.WorkerPod, seen, last bool) string {
	switch {
	case last:
		return phaseDone
	case !seen:
		return phasePending
	case p.Failed():
		return phaseFailed
	case p.Phase == corev1.PodSucceeded || p.State == "terminated":
		return phaseDone
	case p.State == "running":
		return phaseRunning
	case p.State == "waiting":
		return phasePulling
	}
	return phasePending
}

// maxPhasesNamed is up to how many workers the progress line names each
// one's phase; beyond, it counts them by phase.
const maxPhasesNamed = 8

// phaseLine sums up the workers' phases: "0 running, 1 pulling (ContainerCreating), 2 pending"
// for a few, "3 pending, 5 pulling, 92 running, 0 done, 0 failed" for many.
func (f *fleetRun) phaseLine(last map[int]bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	counts := map[string]int{}
	var each []string
	for i := range f.workers {
		p, seen := f.pods[i]
		ph := workerPhase(p, seen, last[i])
		counts[ph]++
		if f.workers <= maxPhasesNamed {
			e := fmt.Sprintf("%d %s", i, ph)
			if (ph == phasePulling || ph == phasePending || ph == phaseFailed) && p.Reason != "" {
				// The kubelet's and the scheduler's reasons are short
				// names (ContainerCreating, Unschedulable); escaped and
				// cut when they are not, since they come from the API
				// server.
				e += " (" + reports.Printable(Shorten(p.Reason, maxReasonBytes)) + ")"
			}
			each = append(each, e)
		}
	}
	if each != nil {
		return strings.Join(each, ", ")
	}
	return fmt.Sprintf("%d %s, %d %s, %d %s, %d %s, %d %s", counts[phasePending], phasePending, counts[phasePulling], phasePulling,
		counts[phaseRunning], phaseRunning, counts[phaseDone], phaseDone, counts[phaseFailed], phaseFailed)
}

// maxReasonBytes bounds a pod's reason on the progress line.
const maxReasonBytes = 64

// describePod says what a pod that did not get ready is doing.
func describePod(p kube.WorkerPod) string {
	s := fmt.Sprintf("pod %s: %s", p.Name, p.Phase)
	if p.State != "" {
		s += ", container " + p.State
	}
	if p.Reason != "" {
		s += " (" + p.Reason
		if p.Message != "" {
			s += ": " + p.Message
		}
		s += ")"
	}
	return s
}

// awaitReady waits for a ready record from every worker. A worker that
// fails first (an image that cannot be pulled, an error record) ends the
// wait with a setup error naming it.
func (f *fleetRun) awaitReady(ctx context.Context, timeout time.Duration) error {
	ready := map[int]bool{}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	// unschedulable: since when each pod has been seen Unschedulable;
	// recheck fires when the first of them has been for the grace.
	unschedulable := map[string]time.Time{}
	shown := ""
	recheck := time.NewTimer(time.Hour)
	recheck.Stop()
	defer recheck.Stop()
	for len(ready) < f.workers {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%d of %d workers ready after %s: %s", len(ready), f.workers, timeout, f.notReady(ready))
		case <-recheck.C:
			if err := f.unschedulableFor(unschedulable, time.Now(), recheck); err != nil {
				return err
			}
		case ev := <-f.events:
			switch {
			case ev.pods != nil:
				f.notePods(ev.pods)
				if line := f.phaseLine(nil); f.progress != nil && line != shown {
					shown = line
					fmt.Fprintf(f.progress, "workers: %s\n", line)
				}
				for _, p := range ev.pods {
					if p.Failed() && !ready[p.Index] {
						return fmt.Errorf("worker %d failed before it was ready: %s", p.Index, describePod(p))
					}
					switch why := p.StartFailure(); {
					case why == "" || ready[p.Index]:
						delete(unschedulable, p.Name)
					case why != "Unschedulable":
						return f.startFailure(p, why)
					case unschedulable[p.Name].IsZero():
						unschedulable[p.Name] = time.Now()
					}
				}
				if err := f.unschedulableFor(unschedulable, time.Now(), recheck); err != nil {
					return err
				}
			case ev.warning != "":
				f.warnings = append(f.warnings, ev.warning)
			case ev.err != nil:
				return ev.err
			case ev.rec.Kind == KindReady:
				ready[ev.rec.Worker] = true
			case ev.rec.Kind == KindError:
				return fmt.Errorf("worker %d (pod %s): %s", ev.rec.Worker, ev.pod, ev.rec.Error)
			}
		}
	}
	return nil
}

// unschedulableFor fails with the first pod that has been Unschedulable
// for unschedulableGrace at now, and else sets recheck to when the next
// one will have been.
func (f *fleetRun) unschedulableFor(since map[string]time.Time, now time.Time, recheck *time.Timer) error {
	next := time.Duration(0)
	for name, t := range since {
		left := f.unschedulableGrace - now.Sub(t)
		if left <= 0 {
			f.mu.Lock()
			var pod kube.WorkerPod
			for _, p := range f.pods {
				if p.Name == name {
					pod = p
				}
			}
			f.mu.Unlock()
			return f.startFailure(pod, "Unschedulable")
		}
		if next == 0 || left < next {
			next = left
		}
	}
	if next > 0 {
		recheck.Reset(next)
	}
	return nil
}

// startFailure is the setup error of a worker pod that will not start
// (kube.WorkerPod.StartFailure), reported as soon as the pod watch sees
// it rather than after workerReadyTimeout: what to fix, named.
func (f *fleetRun) startFailure(p kube.WorkerPod, why string) error {
	if why == "Unschedulable" {
		return fmt.Errorf("worker %d cannot be scheduled: no node has taken its pod for %s (check attack.pod.nodeSelector, tolerations and resources): %s", p.Index, f.unschedulableGrace, describePod(p))
	}
	return fmt.Errorf("worker %d cannot start: image %s cannot be pulled (%s; check attack.image and attack.pod.imagePullSecrets): %s", p.Index, f.image, why, describePod(p))
}

func (f *fleetRun) notReady(ready map[int]bool) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i := 0; i < f.workers && len(out) < 5; i++ {
		if ready[i] {
			continue
		}
		if p, ok := f.pods[i]; ok {
			out = append(out, fmt.Sprintf("worker %d %s", i, describePod(p)))
		} else {
			src := f.of(i)
			out = append(out, fmt.Sprintf("worker %d has no pod (image %s; kubectl --context of cluster %s -n %s describe job %s)", i, f.image, src.cluster, src.run.Namespace, src.run.Name))
		}
	}
	return strings.Join(out, "; ")
}

// fleetResult is what the workers measured, merged.
type fleetResult struct {
	summary attack.Summary
	body    tally.Snapshot
	rows    []WorkerRow
	// bySource merges each source's workers apart (attack.sources only).
	bySource map[string]tally.Snapshot
	warnings []string
	// lost counts the workers that ended without a last record.
	lost int
	// rules merges the workers' rule statistics; nil from v1 workers.
	rules *attribution.Stats
	// results says what went to the run directory's results.
	results ResultStats
}

// looks are a run's sequential looks (measure.Input.Looks, OnLook).
type looks struct {
	at []int64
	on func(int, measure.Interim) bool
}

// due is the last look but the final one that total requests reach from
// look next on, -1 for none: records come a second or more apart, so the
// merged count may pass several looks at once, and the latest of them is
// taken (the earlier ones' error is left unspent, which is conservative).
func (l looks) due(next int, total int64) int {
	k := -1
	for i := next; i < len(l.at)-1 && total >= l.at[i]; i++ {
		k = i
	}
	return k
}

// attack gives the start at start and merges the workers' records until
// each has printed its last one or is lost. ctx ending (Ctrl-C) stops the
// workers (they print a final record and exit); abort ending stops the
// wait for them.
func (f *fleetRun) attack(ctx, abort context.Context, start time.Time, every time.Duration, lk looks, windows *tally.Tally) (fleetResult, error) {
	m := NewMerger(start)
	sink := f.record
	if windows != nil {
		sink = windowSink{tl: windows, next: sink}
	}
	rw := NewResultWriter(sink, f.runID, 0)
	nextLook := 0
	// With attack.sources, each one's requests are also merged apart,
	// for the expectations judged from one source (from:).
	bySource := map[string]*Merger{}
	if len(f.sc.Attack.Sources) > 0 {
		for _, src := range f.sources {
			bySource[src.cluster] = NewMerger(start)
		}
	}
	for _, src := range f.sources {
		if err := annotate(ctx, func(c context.Context) error { return src.run.Start(c, start) }); err != nil {
			return fleetResult{}, err
		}
	}
	if f.progress != nil {
		// What a user (or make demo) times a change during the attack by.
		fmt.Fprintf(f.progress, "workers: the attack starts in %s\n", time.Until(start).Round(100*time.Millisecond))
	}
	endBy := start.Add(min(plannedLength(f.sc)+f.sc.Attack.Timeout.Duration+workerEndGrace, kube.MaxWorkerDeadline))
	last := map[int]bool{} // workers whose final or error record came
	lost := map[int]string{}
	ended := map[int]time.Time{} // when a worker's pod was first seen ended
	stopped := false
	// The sweep's findings go in the report with the attack's.
	res := fleetResult{warnings: f.warnings}
	if every <= 0 {
		every = 5 * time.Second // Options.ProgressEvery's default
	}
	printed := time.Now()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	timeout := time.NewTimer(time.Until(endBy))
	defer timeout.Stop()
	abortDone := (<-chan struct{})(nil)
	if abort != nil {
		abortDone = abort.Done()
	}
	// A worker is through with its last record, or lost; a last record
	// that comes after the worker was counted lost wins (delete below).
	done := func() bool { return len(last)+len(lost) >= f.workers }
	ctxDone := ctx.Done()
	// stop tells every worker to end its attack (the stop annotation): a
	// Ctrl-C, or the evidence settled at a look. Each prints its final
	// record with everything measured, the requests in flight included.
	stop := func() {
		if !stopped {
			stopped = true
			for _, src := range f.sources {
				if err := annotate(ctx, src.run.Stop); err != nil {
					res.warnings = append(res.warnings, "stop the workers: "+err.Error())
				}
			}
		}
		timeout.Reset(f.sc.Attack.Timeout.Duration + 10*time.Second)
	}
	for !done() {
		select {
		case <-ctxDone:
			ctxDone = nil
			stop()
		case <-abortDone:
			for i := range f.workers {
				if !last[i] {
					if _, ok := lost[i]; !ok {
						lost[i] = "the run was aborted before its last record"
					}
				}
			}
		case <-timeout.C:
			for i := range f.workers {
				if !last[i] {
					if _, ok := lost[i]; !ok {
						lost[i] = fmt.Sprintf("no last record by %s", endBy.Format(time.RFC3339))
					}
				}
			}
		case <-tick.C:
			for i, at := range ended {
				if _, ok := lost[i]; !ok && !last[i] && time.Since(at) > lastRecordGrace {
					lost[i] = "it ended without a final record: " + f.describe(i)
				}
			}
			if f.progress != nil && time.Since(printed) >= every {
				printed = time.Now()
				fmt.Fprintf(f.progress, "workers: %d requests so far from %d workers (%d finished); %s\n", m.Total(), f.workers, len(last), f.phaseLine(last))
			}
		case ev := <-f.events:
			switch {
			case ev.pods != nil:
				f.notePods(ev.pods)
				for _, p := range ev.pods {
					if p.Index < 0 || last[p.Index] {
						continue
					}
					if _, ok := lost[p.Index]; ok {
						continue
					}
					// A pod that failed before its container ever ran has
					// no log. One whose log is followed is through when its
					// reader says so (a last record, or logEnded) or, as a
					// follow need not end with the container (kwok's never
					// does), lastRecordGrace after it was seen ended.
					switch {
					case p.Failed() && !f.isFollowed(p.Name):
						lost[p.Index] = describePod(p)
					case p.State == "terminated" || p.Phase == corev1.PodFailed || p.Phase == corev1.PodSucceeded:
						if _, ok := ended[p.Index]; !ok {
							ended[p.Index] = time.Now()
						}
					}
				}
			case ev.logEnded:
				if i, ok := f.indexOf(ev.pod); ok && !last[i] {
					lost[i] = "its log ended without a final record: " + f.describe(i)
				}
			case ev.warning != "":
				res.warnings = append(res.warnings, ev.warning)
			case ev.err != nil:
				res.warnings = append(res.warnings, ev.err.Error())
				if ev.pod != "" {
					if i, ok := f.indexOf(ev.pod); ok && !last[i] {
						lost[i] = ev.err.Error()
					}
				}
			default:
				if src := f.of(ev.rec.Worker); src == nil || src != ev.src {
					res.warnings = append(res.warnings, fmt.Sprintf("pod %s printed a record of worker %d, which is not one of its Job's: ignored", ev.pod, ev.rec.Worker))
					continue
				}
				accepted, err := m.Add(ev.rec)
				if err != nil {
					res.warnings = append(res.warnings, err.Error())
					continue
				}
				if sm := bySource[ev.src.cluster]; sm != nil {
					_, _ = sm.Add(ev.rec) // the same record: valid, and new to it too
				}
				if accepted && ev.rec.Results != nil {
					if err := rw.Add(ev.rec.Worker, ev.rec.Results); err != nil {
						res.warnings = append(res.warnings, fmt.Sprintf("results of pod %s: %v", ev.pod, err))
					}
				}
				if k := lk.due(nextLook, m.Total()); accepted && !stopped && k >= 0 {
					nextLook = k + 1
					so := measure.Interim{Body: m.Snapshot()}
					if len(bySource) > 0 {
						so.BySource = map[string]tally.Snapshot{}
						for c, sm := range bySource {
							so.BySource[c] = sm.Snapshot()
						}
					}
					if lk.on(k, so) {
						stop()
					}
				}
				switch ev.rec.Kind {
				case KindFinal:
					last[ev.rec.Worker] = true
					delete(lost, ev.rec.Worker)
				case KindError:
					last[ev.rec.Worker] = true
					delete(lost, ev.rec.Worker)
					res.warnings = append(res.warnings, fmt.Sprintf("worker %d (pod %s) failed: %s", ev.rec.Worker, ev.pod, ev.rec.Error))
				}
			}
		}
	}
	res.body = m.Snapshot()
	res.rows = m.Workers()
	if len(bySource) > 0 {
		res.bySource = map[string]tally.Snapshot{}
		for c, sm := range bySource {
			res.bySource[c] = sm.Snapshot()
		}
	}
	for i, why := range lost {
		var sent int64
		for _, r := range res.rows {
			if r.Index == i {
				sent = r.Requests
			}
		}
		res.warnings = append(res.warnings, fmt.Sprintf("worker %d was lost (%s): the %d requests of its last record are counted, any it sent after that are not", i, why, sent))
	}
	res.rules = m.Rules()
	res.results = rw.Flush()
	if w := res.results.Warning(); w != "" {
		res.warnings = append(res.warnings, w)
	}
	if res.results == (ResultStats{}) && res.body.Total > 0 {
		res.warnings = append(res.warnings, "the workers sent no results (records of format v1, an image older than this coordinator): results.bin and attribution.jsonl are empty")
	}
	sort.Strings(res.warnings)
	res.lost = len(lost)
	res.summary = fleetSummary(f.sc, start, res.body)
	res.summary.Engine = m.Engine()
	return res, nil
}

// windowTally is the runner's tally when the scenario judges a split in
// windows (fixed, or cut by the runner's follower), nil otherwise: the
// workers' tallies carry no windows, so the coordinator counts the
// merged results in it.
func windowTally(sc *scenarios.Scenario, tl *tally.Tally) *tally.Tally {
	for _, e := range sc.Expect {
		if e.Split != nil && e.Split.Windows != nil {
			return tl
		}
	}
	return nil
}

// windowSink counts the workers' merged results in the windows of the
// tally they are cut in, and only there (Tally.AddWindowed: the workers
// count the rest), then hands them on (the run directory's recorder, or
// nothing). The results come in timestamp order as far as the writer
// holds them (MaxPendingResults) and late by up to a record interval:
// the tally places each by the time its answer came, and a settling
// window cut in the past still takes those held back (Tally.SetHold), so
// a result's arrival time does not decide its window.
type windowSink struct {
	tl   *tally.Tally
	next ResultSink
}

func (s windowSink) Record(r *attack.Result, id attribution.Identity, ok bool) {
	s.tl.AddWindowed(r, id, false)
	if s.next != nil {
		s.next.Record(r, id, ok)
	}
}

func (s windowSink) RecordUnread(r *attack.Result, ok bool) {
	s.tl.AddWindowed(r, attribution.Identity{}, true)
	if s.next != nil {
		s.next.RecordUnread(r, ok)
	}
}

// describe is describePod of worker i's pod.
func (f *fleetRun) describe(i int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if p, ok := f.pods[i]; ok {
		return describePod(p)
	}
	return "no pod"
}

// isFollowed says whether a pod's log was ever opened.
func (f *fleetRun) isFollowed(pod string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.followed[pod]
}

func (f *fleetRun) indexOf(pod string) (int, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, p := range f.pods {
		if p.Name == pod {
			return i, true
		}
	}
	return 0, false
}

// fleetSummary is the attack's summary from the merged state: what the
// report's attack row shows for a single process, for the whole
// Run sets Interrupted, as for a local attack.
func fleetSummary(sc *scenarios.Scenario, start time.Time, s tally.Snapshot) attack.Summary {
	sum := attack.Summary{Started: start, Requests: uint64(max(s.Total, 0))}
	if sc.Attack.Rate != nil {
		sum.RequestedRate = float64(sc.Attack.Rate.Freq) / sc.Attack.Rate.Per.Seconds()
	}
	sum.Ended = s.Metrics.Latest.Add(s.Metrics.Latencies.Max)
	if sum.Ended.Before(start) {
		sum.Ended = start
	}
	sum.Elapsed = sum.Ended.Sub(start)
	sum.AchievedRate = s.Metrics.Rate
	sum.Connections = uint64(max(s.Connections, 0))
	return sum
}

// close stops following and deletes the Job, its pods and its
// ConfigMap, also after a Ctrl-C; the second call returns the first's
// error.
func (f *fleetRun) close(ctx context.Context) error {
	f.closing.Do(func() {
		f.follow()
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), deleteTimeout)
		defer cancel()
		var errs []error
		for _, src := range f.sources {
			errs = append(errs, src.run.Delete(dctx))
		}
		f.closeErr = errors.Join(errs...)
		// The followers end with their context; what they were sending is
		// dropped (send gives up once it is done).
		f.wg.Wait()
	})
	return f.closeErr
}

// workersReport is the report's per-worker table.
func (f *fleetRun) workersReport(rows []WorkerRow) *reports.Workers {
	w := &reports.Workers{Image: f.image, Count: f.workers}
	for _, src := range f.sources {
		w.Jobs = append(w.Jobs, reports.WorkerJob{Cluster: src.cluster, Namespace: src.run.Namespace, Job: src.run.Name,
			Workers: src.count, FirstIndex: src.offset})
	}
	seen := map[int]bool{}
	for _, r := range rows {
		seen[r.Index] = true
		w.Rows = append(w.Rows, reports.WorkerRow{Index: r.Index, Pod: r.Pod, Requests: r.Requests, Errors: r.Errors,
			Rate: r.Rate, Share: r.Share, Final: r.Final, Error: r.Error})
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.workers {
		if !seen[i] {
			row := reports.WorkerRow{Index: i}
			if p, ok := f.pods[i]; ok {
				row.Pod, row.Error = p.Name, describePod(p)
			} else {
				row.Error = "no pod"
			}
			w.Rows = append(w.Rows, row)
		}
	}
	for i := range w.Rows {
		if p, ok := f.pods[w.Rows[i].Index]; ok && !w.Rows[i].Final && w.Rows[i].Error == "" {
			w.Rows[i].Error = describePod(p)
		}
	}
	sort.Slice(w.Rows, func(a, b int) bool { return w.Rows[a].Index < w.Rows[b].Index })
	for i := range w.Rows {
		if src := f.of(w.Rows[i].Index); src != nil {
			w.Rows[i].Cluster = src.cluster
		}
	}
	return w
}

// Denied adds to a denied call of a distributed run what the
// coordinator's account needs there (not a local run's permissions) and
// the command that grants it; any other error is returned as it is.
func Denied(err error, cluster, ns string, workers int) error {
	if !kube.IsDenied(err) {
		return err
	}
	var verbs []string
	for _, p := range access.PermissionsFor(access.FeatureWorkers, "") {
		if !p.Worker && !slices.Contains(verbs, p.String()) {
			verbs = append(verbs, p.String())
		}
	}
	return fmt.Errorf("%w\nworker runs need, in cluster %s namespace %s: %s (and the workers' ServiceAccount); `mesh-verify rbac SCENARIO --workers %d --cluster %s` prints the manifest that grants them",
		err, cluster, ns, strings.Join(verbs, ", "), workers, cluster)
}
