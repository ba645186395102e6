package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/fleet"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/tally"
)

// DefaultStartTimeout bounds the wait for the start signal; MaxStartTimeout
// bounds --start-timeout (a Job pod that waits longer holds its node for
// nothing: the coordinator has given up by then).
const (
	DefaultStartTimeout = 2 * time.Minute
	MaxStartTimeout     = time.Hour
)

// retryEvery is the pause before the ConfigMap is read again after a
// failed read or watch.
const retryEvery = time.Second

// Options say which worker this is and where its ConfigMap is.
type Options struct {
	// ConfigMap is the ConfigMap's name, Namespace its namespace (empty:
	// POD_NAMESPACE as the caller read it, else the context's namespace,
	// else "default").
	ConfigMap string
	Namespace string
	// Index is the Job completion index (JOB_COMPLETION_INDEX), Pod the
	// pod's name (POD_NAME), shown in every record.
	Index int
	// IndexOffset is the run's index of the Job's first worker
	// (--index-offset): the worker is the run's worker IndexOffset+Index
	// in every record, its first one included.
	IndexOffset int
	Pod         string
	// StartTimeout bounds the wait for the start signal (default
	// DefaultStartTimeout).
	StartTimeout time.Duration
	// Kube says how to reach the worker's own cluster: the in-cluster
	// config in a pod, else the kubeconfig's current context.
	Kube kube.Options
	// Context is the kubeconfig context (empty: the current one).
	Context string
	// Dial reaches the target instead of a direct dial: the lab's
	// Service names through $MESH_VERIFY_CONNECT_TO (lab/README.md). nil
	// dials the target's address as cluster DNS resolves it.
	Dial attack.DialFunc
	// Proxy is the injected mesh proxy (--sidecar), nil for none: the
	// worker waits for it before anything else, for at most
	// ProxyReadyTimeout (default DefaultProxyReadyTimeout), and asks it to
	// quit when it ends, whatever the outcome.
	Proxy             *Proxy
	ProxyReadyTimeout time.Duration
	// Records receives the records (stdout); Log the log lines (stderr).
	Records io.Writer
	Log     io.Writer
}

// Run is one worker from start to finish. It returns nil after a final
// record (the attack ended, ctx ended — SIGTERM —, or the stop annotation
// was set) and an error after an error record (or, when the options are
// unusable, with none): the process then exits non-zero.
func Run(ctx context.Context, o Options) error {
	if o.Index < 0 || o.Index >= fleet.MaxWorkers {
		return fmt.Errorf("worker index %d: want 0 to %d (JOB_COMPLETION_INDEX)", o.Index, fleet.MaxWorkers-1)
	}
	if o.IndexOffset < 0 || o.Index+o.IndexOffset >= fleet.MaxWorkers {
		return fmt.Errorf("--index-offset %d: want 0 to %d less the index %d", o.IndexOffset, fleet.MaxWorkers-1, o.Index)
	}
	o.Index += o.IndexOffset
	if o.ConfigMap == "" {
		return errors.New("--configmap: required")
	}
	if o.StartTimeout == 0 {
		o.StartTimeout = DefaultStartTimeout
	}
	if o.StartTimeout < 0 || o.StartTimeout > MaxStartTimeout {
		return fmt.Errorf("--start-timeout %s: want a duration up to %s", o.StartTimeout, MaxStartTimeout)
	}
	if o.ProxyReadyTimeout == 0 {
		o.ProxyReadyTimeout = DefaultProxyReadyTimeout
	}
	if o.ProxyReadyTimeout < 0 || o.ProxyReadyTimeout > MaxProxyReadyTimeout {
		return fmt.Errorf("--sidecar-ready-timeout %s: want a duration up to %s", o.ProxyReadyTimeout, MaxProxyReadyTimeout)
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	out := &emitter{w: o.Records, worker: o.Index, pod: o.Pod, log: o.Log}
	w := &run{o: o, out: out}
	if p := o.Proxy; p != nil {
		// Last: after the final or error record. A proxy that outlives the
		// worker keeps the pod, and so the Job, running until its deadline.
		defer func() {
			qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), proxyCall)
			defer cancel()
			if err := p.Quit(qctx); err != nil {
				w.logf("%v", err)
			} else {
				w.logf("asked the %s sidecar to quit", p.Name)
			}
		}()
	}
	err := w.run(ctx)
	if err != nil {
		if eerr := out.emit(fleet.KindError, w.state, err.Error()); eerr != nil {
			fmt.Fprintf(o.Log, "worker %d: %v\n", o.Index, eerr)
		}
	}
	return err
}

type run struct {
	o   Options
	out *emitter
	cl  *kube.Cluster
	ns  string
	// state is the last state measured, sent with an error record.
	mu    sync.Mutex
	state *tally.State
}

func (w *run) logf(format string, args ...any) {
	fmt.Fprintf(w.o.Log, "worker %d: "+format+"\n", append([]any{w.o.Index}, args...)...)
}

func (w *run) run(ctx context.Context) error {
	if p := w.o.Proxy; p != nil {
		// Every connection, the API server's too, goes through the
		// proxy: none works before it is ready.
		if err := p.WaitReady(ctx, w.o.ProxyReadyTimeout); err != nil {
			return err
		}
		w.logf("the %s sidecar is ready", p.Name)
	}
	cfg, err := kube.LoadConfig(w.o.Kube)
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	w.cl, err = cfg.Connect(ctx, kube.ClusterRef{Name: "worker", Context: w.o.Context})
	if err != nil {
		return err
	}
	w.ns = w.o.Namespace
	if w.ns == "" {
		w.ns = w.cl.Namespace
	}
	if w.ns == "" {
		w.ns = "default"
	}
	name := w.ns + "/" + w.o.ConfigMap
	cm, err := w.cl.Client.CoreV1().ConfigMaps(w.ns).Get(ctx, w.o.ConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get configmap %s in %s: %w", name, w.cl, err)
	}
	// The scenario and the CA are in the Secret of the same name: read
	// once (it is immutable), by name (the workers' Role has no list).
	secret, err := w.cl.Client.CoreV1().Secrets(w.ns).Get(ctx, w.o.ConfigMap, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get secret %s in %s: %w", name, w.cl, err)
	}
	data, err := MergeData(name, cm.Data, secret.Data)
	if err != nil {
		return err
	}
	c, err := ParseConfig(name, data)
	if err != nil {
		return err
	}
	sc, runID, err := c.Share(w.o.Index)
	if err != nil {
		return fmt.Errorf("configmap %s: %w", name, err)
	}
	if c.CA != nil {
		// The scenario's target.tls.ca is a path on the coordinator's
		// machine; its certificates came in ca.pem, and measure reads
		// a file. /tmp is the pod's one writable place (an emptyDir).
		path, err := writeCA(c.CA)
		if err != nil {
			return fmt.Errorf("secret %s, key %s: %w", name, KeyCA, err)
		}
		defer os.Remove(path)
		t := *sc.Target.TLS
		t.CA = path
		sc.Target.TLS = &t
	}
	w.logf("ready: %s, run id %s, attacking %s", name, runID, c.Run.Target)
	if err := w.out.emit(fleet.KindReady, nil, ""); err != nil {
		return err
	}

	// Wait for the start signal, bounded by --start-timeout. SIGTERM or
	// the stop annotation before it: nothing was measured, and the final
	// record says so.
	wctx, cancel := context.WithTimeout(ctx, w.o.StartTimeout)
	sig, err := w.follow(wctx, cm, func(cm *corev1.ConfigMap) (bool, error) {
		if cm.Annotations[AnnotationStop] == "true" {
			return true, nil
		}
		_, ok := cm.Annotations[AnnotationStartAt]
		return ok, nil
	})
	cancel()
	var startAt time.Time
	switch {
	case ctx.Err() != nil:
		w.logf("stopped before the start signal")
		return w.final(tally.New(time.Now(), 0).State())
	case err != nil && wctx.Err() != nil:
		return fmt.Errorf("no start signal (annotation %s on configmap %s) within --start-timeout %s%s", AnnotationStartAt, name, w.o.StartTimeout, lastErr(err))
	case err != nil:
		return err
	case sig.Annotations[AnnotationStop] == "true":
		w.logf("stop annotation before the start signal")
		return w.final(tally.New(time.Now(), 0).State())
	}
	if startAt, err = parseStartAt(sig.Annotations[AnnotationStartAt], time.Now(), w.o.StartTimeout); err != nil {
		return fmt.Errorf("configmap %s: %w", name, err)
	}
	if d := time.Until(startAt); d > 0 {
		w.logf("starting at %s (in %s)", startAt.Format(time.RFC3339Nano), d.Round(time.Millisecond))
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return w.final(tally.New(startAt, 0).State())
		}
	}

	// The attack; the stop annotation ends it like SIGTERM does.
	actx, stop := context.WithCancel(ctx)
	defer stop()
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		_, err := w.follow(actx, sig, func(cm *corev1.ConfigMap) (bool, error) {
			return cm.Annotations[AnnotationStop] == "true", nil
		})
		if err == nil {
			w.logf("stop annotation: ending the attack")
			stop()
		}
	}()
	// Every result goes into the next record's batch, for the
	// coordinator's results.bin (docs/distributed.md, Results).
	w.out.attach(fleet.NewResultBuffer(runID))
	res, err := measure.Attack(actx, sc, measure.AttackOptions{
		RunID: runID, Target: c.Run.Target, Start: startAt, Resolver: measure.NewPodIndex(c.Pods), Dial: w.o.Dial,
		Record: w.out.results,
		Every:  c.Interval, Phase: fleet.RecordPhase(c.Interval, w.o.Index, c.Run.Workers), OnInterval: func(s tally.State, rules attribution.Stats) {
			// An interval record carries the slices that changed since
			// the previous one (tally.State.Trim, docs/distributed.md,
			// Merging); the first and the last records are whole.
			w.mu.Lock()
			prev := w.state
			w.state = &s
			w.mu.Unlock()
			w.out.setRules(rules)
			sent := s.Trim(prev)
			if err := w.out.emit(fleet.KindInterval, &sent, ""); err != nil {
				w.logf("%v", err)
			}
		},
	})
	stop()
	<-stopped
	if err != nil {
		return fmt.Errorf("attack %s: %w", c.Run.Target, err)
	}
	for _, warn := range res.Warnings {
		w.logf("warning: %s", warn)
	}
	s := res.Summary
	w.logf("attack ended: %d requests in %s, %.1f/s", s.Requests, s.Elapsed.Round(time.Millisecond), s.AchievedRate)
	w.out.setRules(res.Rules)
	w.out.setEngine(s.Engine)
	return w.final(res.State)
}

func (w *run) final(s tally.State) error {
	w.mu.Lock()
	w.state = &s
	w.mu.Unlock()
	return w.out.emit(fleet.KindFinal, &s, "")
}

// follow reads the ConfigMap until done says so: it starts from cm (a
// read already made), then watches from its resourceVersion, and reads it
// again whenever the watch fails or ends. It returns the ConfigMap done
// accepted, or ctx's error joined with the last read error. A deleted
// ConfigMap is an error: the coordinator is gone.
func (w *run) follow(ctx context.Context, cm *corev1.ConfigMap, done func(*corev1.ConfigMap) (bool, error)) (*corev1.ConfigMap, error) {
	api := w.cl.Client.CoreV1().ConfigMaps(w.ns)
	var last error
	for {
		if cm != nil {
			if ok, err := done(cm); err != nil || ok {
				return cm, err
			}
		}
		if ctx.Err() != nil {
			return nil, errors.Join(ctx.Err(), last)
		}
		if cm == nil {
			got, err := api.Get(ctx, w.o.ConfigMap, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return nil, fmt.Errorf("configmap %s/%s was deleted: the coordinator is gone", w.ns, w.o.ConfigMap)
			case err != nil:
				last = fmt.Errorf("get configmap %s/%s in %s: %w", w.ns, w.o.ConfigMap, w.cl, err)
				w.logf("%v (retrying)", last)
				sleep(ctx, retryEvery)
				continue
			}
			cm = got
			continue
		}
		watcher, err := api.Watch(ctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", w.o.ConfigMap).String(),
			ResourceVersion: cm.ResourceVersion,
		})
		if err != nil {
			last = fmt.Errorf("watch configmap %s/%s in %s: %w", w.ns, w.o.ConfigMap, w.cl, err)
			w.logf("%v (retrying)", last)
			cm = nil
			sleep(ctx, retryEvery)
			continue
		}
		cm, last = w.events(ctx, watcher, done)
		watcher.Stop()
		if cm != nil {
			return cm, nil
		}
		if errors.Is(last, errDeleted) {
			return nil, fmt.Errorf("configmap %s/%s was deleted: the coordinator is gone", w.ns, w.o.ConfigMap)
		}
		// The watch ended (a timeout, a compacted resourceVersion): read
		// the ConfigMap afresh, then watch from there.
	}
}

var errDeleted = errors.New("deleted")

// events reads one watch until done accepts a ConfigMap (returned) or the
// watch ends (nil, why).
func (w *run) events(ctx context.Context, watcher watch.Interface, done func(*corev1.ConfigMap) (bool, error)) (*corev1.ConfigMap, error) {
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case ev, ok := <-watcher.ResultChan():
			if !ok {
				return nil, errors.New("watch ended")
			}
			switch ev.Type {
			case watch.Deleted:
				return nil, errDeleted
			case watch.Error:
				return nil, fmt.Errorf("watch configmap %s/%s: %v", w.ns, w.o.ConfigMap, apierrors.FromObject(ev.Object))
			case watch.Added, watch.Modified:
				cm, isCM := ev.Object.(*corev1.ConfigMap)
				if !isCM {
					continue
				}
				if ok, err := done(cm); ok || err != nil {
					return cm, err
				}
			}
		}
	}
}

// parseStartAt reads the start-at annotation. An instant further from now
// than the start timeout is refused at once: the coordinator sets it a
// second or two ahead, and a worker told to start in 2099 would otherwise
// hold its pod until the Job's deadline, the timeout meant to bound the
// wait notwithstanding.
func parseStartAt(raw string, now time.Time, timeout time.Duration) (time.Time, error) {
	at, err := time.Parse(time.RFC3339Nano, raw)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s %q: want an RFC 3339 time like 2026-12-01T10:00:00.5Z", AnnotationStartAt, raw)
	}
	if d := at.Sub(now); d > timeout {
		return time.Time{}, fmt.Errorf("annotation %s %s is %s from now, beyond --start-timeout %s", AnnotationStartAt, at.UTC().Format(time.RFC3339Nano), d.Round(time.Second), timeout)
	}
	return at, nil
}

func lastErr(err error) string {
	var ce interface{ Unwrap() []error }
	if errors.As(err, &ce) {
		for _, e := range ce.Unwrap() {
			if e != nil && !errors.Is(e, context.DeadlineExceeded) && !errors.Is(e, context.Canceled) {
				return " (last error: " + e.Error() + ")"
			}
		}
	}
	return ""
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// emitter prints records one at a time, with a growing seq. Once the
// attack begins, every interval, final and error record also carries the
// results recorded since the previous one and the rules' statistics.
type emitter struct {
	mu     sync.Mutex
	w      io.Writer
	seq    int64
	worker int
	pod    string
	// results is nil before the attack.
	results *fleet.ResultBuffer
	rules   *attribution.Stats
	// rulesDropped: rules past the bounds were said once.
	rulesDropped bool
	// engine is the attack's engine, sent with the final record.
	engine string
	// log receives what cannot go in a record.
	log io.Writer
}

// attach makes the records carry b's results from now on.
func (e *emitter) attach(b *fleet.ResultBuffer) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.results = b
}

// setEngine names the attack's engine in the final record.
func (e *emitter) setEngine(engine string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.engine = engine
}

// setRules makes the records carry rules from now on; statistics past a
// record's bounds are left out and said once.
func (e *emitter) setRules(rules attribution.Stats) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := fleet.ValidateRules(&rules); err != nil {
		if !e.rulesDropped && e.log != nil {
			fmt.Fprintf(e.log, "worker %d: the rules' statistics are not sent: %v\n", e.worker, err)
		}
		e.rules, e.rulesDropped = nil, true
		return
	}
	e.rules = &rules
}

func (e *emitter) emit(kind fleet.Kind, s *tally.State, errText string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	errText = fleet.Shorten(errText, fleet.MaxErrorBytes)
	pod := e.pod
	if len(pod) > fleet.MaxPodBytes {
		pod = pod[:fleet.MaxPodBytes]
	}
	rec := fleet.Record{Kind: kind, Worker: e.worker, Pod: pod, Seq: e.seq, Time: time.Now().UTC(), State: s, Error: errText}
	if kind == fleet.KindFinal {
		rec.Engine = e.engine
	}
	if kind != fleet.KindReady && e.results != nil {
		rec.Results, rec.Rules = e.results.Take(), e.rules
	}
	e.seq++
	cut, err := fleet.EncodeRecord(e.w, rec)
	if cut > 0 {
		// Printed without its rows: they count as cut in the next batches.
		e.results.Uncut(cut)
		if e.log != nil {
			fmt.Fprintf(e.log, "worker %d: record %d too long with its %d results: sent without them\n", e.worker, rec.Seq, cut)
		}
	}
	return err
}

// writeCA writes the authorities of ca.pem to a file of their own.
func writeCA(pem []byte) (string, error) {
	f, err := os.CreateTemp("", "mesh-verify-ca-*.pem")
	if err != nil {
		return "", fmt.Errorf("write the CA: %w", err)
	}
	if _, err := f.Write(pem); err != nil {
		f.Close()
		os.Remove(f.Name())
		return "", fmt.Errorf("write the CA %s: %w", f.Name(), err)
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("write the CA %s: %w", f.Name(), err)
	}
	return f.Name(), nil
}
