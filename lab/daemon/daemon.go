// Package daemon is the lab's long-running process (`mesh-verify-lab
// serve`): it watches the pods of every lab cluster and gives each one a
// real backend — a lab/apps server for app pods, a lab/meshsim simulator
// for mesh entry pods and caller sidecars — on a loopback port, plus the
// kwok Logs and PortForward objects that make `kubectl logs` and
// `kubectl port-forward` reach it. Entry simulators route to the ready app
// pods of their target Service across clusters and are updated as pods
// come and go, so `kubectl scale` changes routing as in a real mesh.
//
// Pods are watched with client-go informers (one per cluster, filtered by
// the lab's managed label) rather than polled: a scale is seen within
// milliseconds, and the API servers are not hammered. One worker handles
// the pod events in order, so starting and stopping backends needs no
// locking beyond the state that verifiers and the status writer share.
//
// Pods of mesh-verify's own image (its Job's workers, labelled
// app.kubernetes.io/name=mesh-verify) get a real process of mesh-verify
// instead (jobs.go; the one beside the daemon's executable), watched by informers of their own and
// handled by a worker of their own, so a process starting never holds up
// the app pods' events.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/mesh-verify/mesh-verify/internal/sibling"
	"github.com/mesh-verify/mesh-verify/lab/apps"
	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/lab/relay"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// Timeouts of the daemon's own work.
const (
	syncTimeout   = 60 * time.Second  // informer caches must list within this
	verifyTimeout = 100 * time.Second // logs + port-forward of one pod must answer within this
	// verifySlow is how long a pod's probes may fail before the status
	// says so (PodStatus.Unverified), which lets the waiting `lab up`
	// check the cluster's kwok controller while there is time left.
	verifySlow   = 15 * time.Second
	probeTimeout = 5 * time.Second
	stopTimeout  = 10 * time.Second
)

// PIDFile is the daemon's pid file in its dir; a daemon that finds
// another pid there has been replaced and exits.
const PIDFile = "daemon.pid"

// Config is what the daemon serves.
type Config struct {
	// Dir holds logs/<cluster>/<ns>_<pod>_<container>.log and status.json.
	Dir        string
	Kubeconfig string
	Topology   *topology.Topology
	// Context maps a cluster to its kubeconfig context; nil means kind-<cluster>.
	Context func(cluster string) string
	Log     *slog.Logger
	// MeshVerify is the executable the pods of mesh-verify's image run
	// (jobs.go); empty means the mesh-verify beside this executable, else
	// on PATH (sibling.Find).
	MeshVerify string
	// Seed is the lab's seed: every simulator's random source is derived
	// from it (entrySeed), so a lab brought up with the same seed replays
	// its routing choices; every app pod's randomness (the persons app's
	// data and delays) derives from it and the pod's name, recorded as the
	// pod's seed in the status.
	Seed uint64
}

type podRef struct{ cluster, namespace, name string }

func (r podRef) String() string { return r.namespace + "/" + r.name + " in cluster " + r.cluster }

// podRT is what backs one pod.
type podRT struct {
	uid    types.UID
	status Pod // guarded by Daemon.mu
	server *apps.Server
	proxy  *podSidecar // the pod's mesh sidecar, if it has one
	plane  *entryPlane
	relay  *relay.Relay // what kwok's PortForward targets
	elog   *entryLog
	cancel context.CancelFunc // stops the pod's verification
	sig    string             // the backend set the data plane last applied
	// drainCancel and drained are set once the pod is terminating
	// (terminate.go): cancelling ends the drain at once.
	drainCancel context.CancelFunc
	drained     chan struct{}
}

// Daemon serves one lab.
type Daemon struct {
	cfg      Config
	log      *slog.Logger
	clusters map[string]*Cluster
	listers  map[string]corelisters.PodLister
	queue    workqueue.TypedRateLimitingInterface[podRef]
	// jobListers and jobQueue are the Job pods' (jobs.go); exe is what
	// their processes run, the built mesh-verify (Config.MeshVerify), and
	// exeErr why there is none: their pods then fail saying so.
	jobListers map[string]corelisters.PodLister
	jobQueue   workqueue.TypedRateLimitingInterface[podRef]
	exe        string
	exeErr     error
	started    time.Time
	dirty      chan struct{}

	nginx nginxBinary

	mu        sync.Mutex
	pods      map[podRef]*podRT
	synced    bool
	instances map[string]int // simulators and app pods started per entry@cluster (app:name@cluster), for their seeds
	// gwMu guards gateways: each cluster's east-west gateway address
	// (network.go), read once from its API server.
	// kumaNoInbound is set while the Kuma MeshAccessLogs log only the
	// outbound side (meshroute.KumaInboundLogging); guarded by mu.
	kumaNoInbound bool
	gwMu          sync.Mutex
	gateways      map[string]string
	jobs          map[podRef]*jobRT
	dying         map[*jobRT]bool // Job processes of pods that are gone, until they end
	// workerProxies are the running data planes of worker pods (workerproxy.go).
	workerProxies map[podRef]*workerProxy
	// routes are the mesh entries' routes (routes.go), by entry name.
	routes map[string]*entryRoute
	// meshStores are the caches of the watched mesh objects, per cluster;
	// written before the informers start, read-only after.
	meshStores map[string][]cache.Store
}

// Run serves until ctx ends, then stops every backend it started.
func Run(ctx context.Context, cfg Config) error {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	if cfg.Context == nil {
		cfg.Context = func(c string) string { return "kind-" + c }
	}
	d := &Daemon{
		cfg:      cfg,
		log:      cfg.Log,
		clusters: map[string]*Cluster{},
		listers:  map[string]corelisters.PodLister{},
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[podRef](100*time.Millisecond, 5*time.Second)),
		started:    time.Now(),
		dirty:      make(chan struct{}, 1),
		pods:       map[podRef]*podRT{},
		instances:  map[string]int{},
		gateways:   map[string]string{},
		jobListers: map[string]corelisters.PodLister{},
		jobQueue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[podRef](100*time.Millisecond, 5*time.Second)),
		jobs:          map[podRef]*jobRT{},
		dying:         map[*jobRT]bool{},
		workerProxies: map[podRef]*workerProxy{},
		routes:        map[string]*entryRoute{},
		meshStores:    map[string][]cache.Store{},
	}
	d.exe = cfg.MeshVerify
	if d.exe == "" {
		// Not fatal: a lab without distributed runs needs no mesh-verify.
		d.exe, d.exeErr = sibling.Find("mesh-verify")
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return fmt.Errorf("lab daemon: create lab directory %s: %w", cfg.Dir, err)
	}
	if err := os.WriteFile(filepath.Join(cfg.Dir, PIDFile), []byte(strconv.Itoa(os.Getpid())+"\n"), 0o644); err != nil {
		return fmt.Errorf("lab daemon: write pid file: %w", err)
	}
	// Before serving anything: what a crashed daemon of this lab left
	// running must not keep answering beside what this one starts.
	if err := stopLeftovers(cfg.Dir, cfg.Log); err != nil {
		return err
	}
	for _, c := range cfg.Topology.Clusters {
		cl, err := NewCluster(c, cfg.Kubeconfig, cfg.Context(c))
		if err != nil {
			return err
		}
		d.clusters[c] = cl
	}
	return d.run(ctx)
}

func (d *Daemon) run(ctx context.Context) error {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var factories []informers.SharedInformerFactory
	var syncs []cache.InformerSynced
	for _, c := range d.cfg.Topology.Clusters {
		f := informers.NewSharedInformerFactoryWithOptions(d.clusters[c].cs, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = topology.LabelManaged + "=true" }))
		inf := f.Core().V1().Pods()
		if _, err := inf.Informer().AddEventHandler(d.handler(c, d.queue)); err != nil {
			return fmt.Errorf("watch pods in cluster %s: %w", c, err)
		}
		d.listers[c] = inf.Lister()
		syncs = append(syncs, inf.Informer().HasSynced)
		factories = append(factories, f)
		f.Start(runCtx.Done())
		jf := informers.NewSharedInformerFactoryWithOptions(d.clusters[c].cs, 0,
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = JobLabel + "=" + JobLabelValue }))
		jinf := jf.Core().V1().Pods()
		if _, err := jinf.Informer().AddEventHandler(d.handler(c, d.jobQueue)); err != nil {
			return fmt.Errorf("watch mesh-verify's Job pods in cluster %s: %w", c, err)
		}
		d.jobListers[c] = jinf.Lister()
		syncs = append(syncs, jinf.Informer().HasSynced)
		factories = append(factories, jf)
		jf.Start(runCtx.Done())
	}
	meshSyncs, meshFactories, err := d.watchMesh(runCtx.Done())
	defer func() {
		cancel()
		for _, f := range factories {
			f.Shutdown()
		}
		for _, f := range meshFactories {
			f.Shutdown()
		}
	}()
	if err != nil {
		return err
	}
	syncCtx, syncCancel := context.WithTimeout(runCtx, syncTimeout)
	ok := cache.WaitForCacheSync(syncCtx.Done(), syncs...)
	syncCancel()
	if !ok {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("pods of clusters %s not listed within %v: are the API servers up?", strings.Join(d.cfg.Topology.Clusters, ", "), syncTimeout)
	}
	if len(meshSyncs) > 0 {
		meshCtx, meshCancel := context.WithTimeout(runCtx, meshSyncTimeout)
		ok := cache.WaitForCacheSync(meshCtx.Done(), meshSyncs...)
		meshCancel()
		if !ok {
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("the mesh objects the entries route by (%v) were not listed within %v: are the lab's CRDs registered (lab up registers lab/crds)?", meshResources(d.cfg.Topology), meshSyncTimeout)
		}
		// Before any pod: an entry's data plane starts with its route.
		if err := d.syncRoutes(runCtx); err != nil {
			return err
		}
	}
	d.mu.Lock()
	d.synced = true
	d.mu.Unlock()
	d.markDirty()
	d.log.Info("watching pods", "clusters", d.cfg.Topology.Clusters, "topology", d.cfg.Topology.Metadata.Name)

	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); d.statusLoop(runCtx) }()
	go func() { defer wg.Done(); d.watchdog(runCtx, cancel) }()
	go func() {
		defer wg.Done()
		for d.processNext(runCtx) {
		}
	}()
	go func() {
		defer wg.Done()
		for d.processNextJob(runCtx) {
		}
	}()
	<-runCtx.Done()
	d.queue.ShutDown()
	d.jobQueue.ShutDown()
	wg.Wait()
	d.stopJobs()
	d.stopAll()
	// A stopped daemon publishes nothing: `lab status` must not show
	// addresses nobody listens on.
	_ = os.Remove(filepath.Join(d.cfg.Dir, StatusFile))
	d.log.Info("stopped")
	return nil
}

// watchdog ends the daemon when its lab is gone or taken over: the pid
// file (written by Run) was removed with the lab directory, or names
// another process. A daemon must never outlive its lab.
func (d *Daemon) watchdog(ctx context.Context, stop context.CancelFunc) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b, err := os.ReadFile(filepath.Join(d.cfg.Dir, PIDFile))
		if err == nil && strings.TrimSpace(string(b)) == strconv.Itoa(os.Getpid()) {
			continue
		}
		d.log.Warn("pid file gone or names another process: the lab is not ours any more; stopping", "dir", d.cfg.Dir)
		stop()
		return
	}
}

func (d *Daemon) handler(cluster string, queue workqueue.TypedRateLimitingInterface[podRef]) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			return
		}
		ns, name, err := cache.SplitMetaNamespaceKey(key)
		if err != nil {
			return
		}
		queue.Add(podRef{cluster: cluster, namespace: ns, name: name})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

func (d *Daemon) processNext(ctx context.Context) bool {
	ref, shutdown := d.queue.Get()
	if shutdown {
		return false
	}
	defer d.queue.Done(ref)
	if err := d.sync(ctx, ref); err != nil {
		if ctx.Err() != nil {
			return true
		}
		d.log.Error("pod sync failed; retrying", "pod", ref.String(), "err", err)
		d.queue.AddRateLimited(ref)
		return true
	}
	d.queue.Forget(ref)
	return true
}

// sync brings one pod's backend in line with the pod: started when the
// pod is scheduled, stopped when it terminates or disappears.
func (d *Daemon) sync(ctx context.Context, ref podRef) error {
	if ref == routesRef {
		return d.syncRoutes(ctx)
	}
	pod, err := d.listers[ref.cluster].Pods(ref.namespace).Get(ref.name)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("get pod %s/%s from the cache of cluster %s: %w", ref.namespace, ref.name, ref.cluster, err)
	}
	if err != nil {
		pod = nil
	}
	d.mu.Lock()
	rt := d.pods[ref]
	d.mu.Unlock()
	if terminating(pod) {
		if rt != nil && rt.uid == pod.UID {
			return d.beginTermination(ctx, ref, rt, pod)
		}
		if rt == nil && pod.Spec.NodeName != "" {
			// Nothing of it runs here (it was deleted before it started, or
			// a crashed daemon ran it): its container has stopped.
			return d.clusters[ref.cluster].deleteNow(ctx, pod)
		}
	}
	gone := pod == nil || pod.DeletionTimestamp != nil ||
		pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
	if rt != nil && (gone || rt.uid != pod.UID) {
		d.stopPod(ref, rt)
		rt = nil
	}
	if gone || pod.Spec.NodeName == "" {
		return d.updateBackends(ctx)
	}
	if rt == nil {
		if rt, err = d.startPod(ctx, ref, pod); err != nil {
			return err
		}
	}
	d.mu.Lock()
	rt.status.Ready = podReady(pod)
	d.mu.Unlock()
	d.markDirty()
	return d.updateBackends(ctx)
}

func podReady(p *corev1.Pod) bool {
	if p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// startPod starts what backs a pod and points kwok at it.
func (d *Daemon) startPod(ctx context.Context, ref podRef, pod *corev1.Pod) (rt *podRT, err error) {
	topo := d.cfg.Topology
	if len(pod.Spec.Containers) == 0 {
		return nil, fmt.Errorf("pod %s has no container", ref)
	}
	container := pod.Spec.Containers[0].Name
	logFile := d.logFile(ref, container)
	rt = &podRT{uid: pod.UID, status: Pod{
		Cluster: ref.cluster, Namespace: ref.namespace, Name: ref.name, Container: container, LogFile: logFile,
	}}
	defer func() {
		if err != nil {
			d.stopBackends(rt)
		}
	}()
	switch {
	case pod.Labels[topology.LabelEntry] != "":
		name := pod.Labels[topology.LabelEntry]
		e := topo.Entry(name)
		if e == nil || !e.Gateway() || e.Cluster != ref.cluster {
			return nil, fmt.Errorf("pod %s is labelled %s=%s, but the topology has no gateway entry %s in cluster %s",
				ref, topology.LabelEntry, name, name, ref.cluster)
		}
		if rt.elog, err = openEntryLog(logFile); err != nil {
			return nil, err
		}
		if rt.plane, err = d.startPlane(ctx, e, ref, d.proxying(e, nil, rt.elog)); err != nil {
			return nil, fmt.Errorf("pod %s: %w", ref, err)
		}
		rt.status.Role, rt.status.App, rt.status.Kind = RoleEntry, e.Name, "mesh-entry"
		rt.status.Port, rt.status.Addr, rt.status.Policy = e.Port.Number, rt.plane.dp.Addr(), describeSim(rt.plane.policy)
		rt.status.DataPlane, rt.status.DataPlaneLog = dataPlaneName(e), rt.plane.dp.Log()
		rt.elog.Line("mesh entry %s (data plane: %s) in cluster %s: policy %s; routes Service %s/%s across clusters %s; listening on %s",
			e.Name, rt.status.DataPlane, ref.cluster, rt.status.Policy, e.Namespace, e.To, strings.Join(topo.Clusters, ", "), rt.plane.dp.Addr())
		d.mu.Lock()
		r := routeOf(d.routes[e.Name])
		d.mu.Unlock()
		rt.elog.Line("route from the mesh's objects: %s", r.Describe())
	case pod.Labels[topology.LabelLabApp] != "":
		name := pod.Labels[topology.LabelLabApp]
		a := topo.App(name)
		if a == nil {
			return nil, fmt.Errorf("pod %s is labelled %s=%s, but the topology has no app %s", ref, topology.LabelLabApp, name, name)
		}
		spec := apps.Spec{
			Kind: a.Kind, Service: a.Says(), Version: a.Version, Pod: ref.name,
			Cluster: ref.cluster, Namespace: ref.namespace, LogFile: logFile, Delay: a.Delay,
			Port: a.Port.Number, ClusterName: a.ClusterNames[ref.cluster], Variant: a.Variant, Seed: d.podSeed(ref, a.Name),
		}
		rt.status.AppSeed = spec.Seed
		if rt.proxy, err = d.newSidecar(ref, a); err != nil {
			return nil, fmt.Errorf("pod %s: %w", ref, err)
		}
		if e := topo.SidecarFor(a.Name, ref.cluster); e != nil {
			if rt.plane, err = d.startPlane(ctx, e, ref, d.proxying(e, rt.proxy, nil)); err != nil {
				return nil, fmt.Errorf("sidecar of pod %s: %w", ref, err)
			}
			spec.Callee, spec.CalleeHost = "http://"+rt.plane.dp.Addr(), a.Calls
			rt.status.Sidecar, rt.status.Policy = rt.plane.dp.Addr(), describeSim(rt.plane.policy)
			rt.status.DataPlane, rt.status.DataPlaneLog = dataPlaneName(e), rt.plane.dp.Log()
		}
		// The app's lifetime is the pod's, not this sync's: stopPod closes it.
		if rt.server, err = apps.Start(context.WithoutCancel(ctx), spec, "127.0.0.1:0"); err != nil {
			return nil, fmt.Errorf("pod %s: %w", ref, err)
		}
		if err = d.startProxy(context.WithoutCancel(ctx), ref, rt, a.Sidecar); err != nil {
			return nil, fmt.Errorf("pod %s: %w", ref, err)
		}
		rt.status.Role, rt.status.App, rt.status.Kind, rt.status.Version = RoleApp, a.Name, a.Kind, a.Version
		rt.status.Port, rt.status.Addr = a.Port.Number, rt.server.Addr()
	default:
		return nil, fmt.Errorf("pod %s has neither %s nor %s: not a lab pod", ref, topology.LabelLabApp, topology.LabelEntry)
	}
	// kwok forwards the pod's port to a relay in front of the pod's
	// server, so that the server closing an idle connection does not hang
	// the client (lab/relay).
	if rt.relay, err = relay.Start(rt.status.Addr, 0); err != nil {
		return nil, fmt.Errorf("pod %s: %w", ref, err)
	}
	rt.status.Forward = rt.relay.Addr()
	logs, fwds := rt.kwokTargets()
	if err := d.clusters[ref.cluster].applyKwok(ctx, pod, logs, fwds); err != nil {
		return nil, err
	}
	vctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	rt.cancel = cancel
	d.mu.Lock()
	d.pods[ref] = rt
	d.mu.Unlock()
	d.log.Info("pod started", "pod", ref.String(), "role", rt.status.Role, "app", rt.status.App, "addr", rt.status.Addr, "sidecar", rt.status.Sidecar)
	go d.verify(vctx, ref, rt)
	return rt, nil
}

// dataPlaneName is the entry's data plane as the status shows it.
func dataPlaneName(e *topology.Entry) string {
	if e.UsesNginx() {
		return topology.DataPlaneNginx
	}
	return topology.DataPlaneSimulator
}

// verify waits until the pod's logs and port-forward answer through the
// API server, which is what `lab up` waits for.
func (d *Daemon) verify(ctx context.Context, ref podRef, rt *podRT) {
	cl := d.clusters[ref.cluster]
	ctx, cancel := context.WithTimeout(ctx, verifyTimeout)
	defer cancel()
	d.mu.Lock()
	container, port := rt.status.Container, rt.status.Port
	d.mu.Unlock()
	begin := time.Now()
	published := ""
	probe := func(f func(context.Context) error) error {
		for {
			pctx, pcancel := context.WithTimeout(ctx, probeTimeout)
			err := f(pctx)
			pcancel()
			if err == nil || ctx.Err() != nil {
				return err
			}
			if time.Since(begin) >= verifySlow && err.Error() != published {
				published = err.Error()
				d.mu.Lock()
				if d.pods[ref] == rt {
					rt.status.Unverified = fmt.Sprintf("unreadable for %v: %v", time.Since(begin).Round(time.Second), err)
				}
				d.mu.Unlock()
				d.markDirty()
			}
			select {
			case <-ctx.Done():
				return err
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	err := probe(func(c context.Context) error { return cl.probeLogs(c, ref.namespace, ref.name, container) })
	if err == nil {
		err = probe(func(c context.Context) error { return cl.probePortForward(c, ref.namespace, ref.name, port) })
	}
	d.mu.Lock()
	if d.pods[ref] != rt {
		d.mu.Unlock()
		return // stopped meanwhile
	}
	rt.status.Verified = err == nil
	rt.status.Unverified = ""
	rt.status.Error = ""
	if err != nil {
		rt.status.Error = err.Error()
	}
	d.mu.Unlock()
	if err != nil {
		d.log.Error("pod not reachable through the API server", "pod", ref.String(), "err", err)
	}
	d.markDirty()
}

// stopPod stops a pod's backends. Its kwok objects are owned by the pod
// and go with it (garbage collector); a replaced pod's are re-applied.
func (d *Daemon) stopPod(ref podRef, rt *podRT) {
	d.mu.Lock()
	delete(d.pods, ref)
	d.mu.Unlock()
	d.stopBackends(rt)
	d.log.Info("pod stopped", "pod", ref.String())
	d.markDirty()
}

func (d *Daemon) stopBackends(rt *podRT) {
	if rt.cancel != nil {
		rt.cancel()
	}
	if rt.drained != nil {
		rt.drainCancel()
		<-rt.drained
	}
	if rt.relay != nil {
		_ = rt.relay.Close() // the pod is gone: its forwarded connections go too
	}
	if rt.server != nil {
		// Close, not Shutdown: a deleted pod's connections are reset, as
		// when a real container is killed.
		if err := rt.server.Close(); err != nil {
			d.log.Warn("close app", "pod", rt.status.Name, "err", err)
		}
	}
	if rt.plane != nil {
		rt.plane.dp.Stop()
	}
	if rt.proxy != nil {
		// After the app and the outbound data plane: both write to its log.
		rt.proxy.close()
	}
	if rt.elog != nil {
		_ = rt.elog.Close()
	}
}

func (d *Daemon) stopAll() {
	d.mu.Lock()
	all := make([]*podRT, 0, len(d.pods))
	for ref, rt := range d.pods {
		all = append(all, rt)
		delete(d.pods, ref)
	}
	d.mu.Unlock()
	var wg sync.WaitGroup
	for _, rt := range all {
		wg.Add(1)
		go func() { defer wg.Done(); d.stopBackends(rt) }()
	}
	wg.Wait()
}

// backendsLocked lists the pods of entry e's target Service in every
// cluster, sorted, with their names as the status shows them; sig joins
// the names, so a changed set is a changed sig. Callers hold d.mu.
func (d *Daemon) backendsLocked(e *topology.Entry) (bs []meshsim.Backend, names []string, sig string) {
	// A route that splits between Services (meshsim.ByService) reaches
	// their pods, each counted in the Service that selects it; otherwise
	// the pods of the entry's To Service.
	var services []string
	if r := routeOf(d.routes[e.Name]); r.Policy.WeightBy == meshsim.ByService {
		services = r.Services
	}
	for _, other := range d.pods {
		if other.server == nil || other.status.Terminating {
			continue // a terminating pod has left the endpoints
		}
		a := d.cfg.Topology.App(other.status.App)
		if a == nil || a.Namespace != e.Namespace || !d.reachesLocked(e, other.status.Cluster) {
			continue
		}
		b := meshsim.Backend{
			Cluster: other.status.Cluster, Pod: other.status.Name, Version: a.Version,
			Addr: other.inboundAddr(), Ready: other.status.Ready,
		}
		if services == nil && d.cfg.Topology.SelectedBy(a, e.Namespace, e.To) {
			bs = append(bs, b)
		}
		for _, s := range services {
			if d.cfg.Topology.SelectedBy(a, e.Namespace, s) {
				b.Service = s
				bs = append(bs, b)
			}
		}
	}
	meshsim.SortBackends(bs)
	for _, b := range bs {
		n := b.Cluster + "/" + b.Pod + "(" + b.Version + ")"
		if b.Service != "" {
			n += "@" + b.Service
		}
		if !b.Ready {
			n += "[not ready]"
		}
		names = append(names, n)
	}
	return bs, names, strings.Join(names, " ")
}

// updateBackends gives every entry's data plane the current pods of its
// target Service in every cluster. The backends are worked out under the
// lock and applied outside it (an nginx reload takes tens of
// milliseconds); until a data plane has applied them, the status marks
// its pod's backends stale, which `lab up` does not count as serving.
// Only the one pod-event worker calls it, so two updates never overlap.
// An error (a reload nginx refused) fails the sync, and the work queue
// retries it.
func (d *Daemon) updateBackends(ctx context.Context) error {
	type update struct {
		rt         *podRT
		bs         []meshsim.Backend
		names      []string
		sig        string
		pod, where string
	}
	var updates []update
	d.mu.Lock()
	for _, rt := range d.planesLocked() {
		bs, names, sig := d.backendsLocked(rt.plane.entry)
		if sig == rt.sig && rt.status.Backends != nil {
			continue
		}
		updates = append(updates, update{rt, bs, names, sig, rt.status.Name, rt.status.Cluster})
	}
	d.mu.Unlock()

	var errs []error
	for _, u := range updates {
		rt, e := u.rt, u.rt.plane.entry
		if err := rt.plane.dp.SetBackends(ctx, u.bs); err != nil {
			errs = append(errs, fmt.Errorf("entry %s, pod %s in cluster %s: set backends: %w", e.Name, u.pod, u.where, err))
			continue
		}
		d.backendsApplied(rt, u.names, u.sig, u.pod, u.where)
	}
	d.markDirty()
	return errors.Join(errs...)
}

// backendsApplied records that rt's data plane now routes over the
// backends names (sig joins them), so updateBackends skips it until they
// change.
func (d *Daemon) backendsApplied(rt *podRT, names []string, sig, pod, where string) {
	e := rt.plane.entry
	d.mu.Lock()
	rt.sig = sig
	rt.status.Backends = slices.Clone(names)
	if rt.status.Backends == nil {
		rt.status.Backends = []string{}
	}
	d.mu.Unlock()
	if sig == "" {
		sig = "none"
	}
	if rt.elog != nil {
		rt.elog.Line("backends of %s/%s: %s", e.Namespace, e.To, sig)
	}
	d.log.Info("backends", "entry", e.Name, "pod", pod, "cluster", where, "backends", sig)
}

// routedOf is a simulator's counts as the status shows them.
func routedOf(st *meshsim.Stats) *Routed {
	return &Routed{
		Requests: st.Requests, NoUpstream: st.NoUpstream, NoRoute: st.NoRoute, Connections: st.Connections,
		ByCluster: st.ByCluster, ByPod: st.ByPod, ByVersion: st.ByVersion,
		ConnsByCluster: st.ConnsByCluster, Mirrored: st.Mirror.ByCluster, Retries: st.Retries,
	}
}

// planeStats are the routed counts of the pod's simulator, if it has one.
func (rt *podRT) planeStats() *meshsim.Stats {
	if rt.plane == nil {
		return nil
	}
	return rt.plane.dp.Stats()
}

func (d *Daemon) markDirty() {
	select {
	case d.dirty <- struct{}{}:
	default:
	}
}

// statusLoop publishes the status on every change, at most every 50 ms,
// and every second while simulators route (their counts change without
// a pod event).
func (d *Daemon) statusLoop(ctx context.Context) {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.dirty:
		case <-tick.C:
		}
		if err := writeStatus(d.cfg.Dir, d.snapshot()); err != nil {
			d.log.Error("publish status", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (d *Daemon) snapshot() *Status {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := &Status{
		PID: os.Getpid(), Topology: d.cfg.Topology.Metadata.Name, Seed: d.cfg.Seed, Started: d.started,
		Updated: time.Now(), Synced: d.synced, Pods: []Pod{},
	}
	for _, rt := range d.pods {
		p := rt.status
		p.Backends = slices.Clone(p.Backends)
		if rt.plane != nil {
			switch dp := rt.plane.dp.(type) {
			case *simPlane:
				p.Seed = rt.plane.seed // nginx draws from its own source
			case nginxPlane:
				p.DataPlanePID = dp.p.PID()
			}
			_, _, sig := d.backendsLocked(rt.plane.entry)
			p.BackendsStale = sig != rt.sig || rt.status.Backends == nil
		}
		if rt.relay != nil {
			rs := rt.relay.Stats()
			p.Relay = &rs
		}
		if st := rt.planeStats(); st != nil {
			p.Routed = routedOf(st)
		}
		s.Pods = append(s.Pods, p)
	}
	for _, e := range d.cfg.Topology.Entries {
		if !e.Workers {
			continue
		}
		w := WorkersRoute{Entry: e.Name, Cluster: e.Cluster}
		if r := d.routes[e.Name]; r != nil {
			w.Policy, w.Route = describeSim(r.route.Policy), r.route.Describe()
			if r.err != nil {
				w.RouteError = r.err.Error()
			}
		}
		s.Workers = append(s.Workers, w)
	}
	for _, rt := range d.jobs {
		j := rt.status
		j.Args = slices.Clone(j.Args)
		if rt.proxy != nil {
			rt.proxy.statusLocked(&j)
		}
		s.Jobs = append(s.Jobs, j)
	}
	return s
}

// describePolicy is a short human form of a simulator policy without its
// retries (describeSim adds them), for logs and status.
func describePolicy(p meshsim.Policy) string {
	var b strings.Builder
	if p.NoRoute != "" {
		return "no route, every request answered 404 (NR): " + p.NoRoute
	}
	b.WriteString(p.Mode)
	if m := p.Match; m != nil {
		var conds, uris []string
		if len(m.Hosts) > 0 {
			conds = append(conds, "host "+strings.Join(m.Hosts, "|"))
		}
		for _, u := range m.URIs {
			uris = append(uris, "uri "+u.Kind+" "+strconv.Quote(u.Value))
		}
		if len(uris) > 0 {
			conds = append(conds, strings.Join(uris, " or "))
		}
		b.WriteString(" for " + strings.Join(conds, " and ") + ", else 404 (NR)")
	}
	kv := func(m map[string]float64) string {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			parts = append(parts, k+"="+strconv.FormatFloat(m[k], 'g', -1, 64))
		}
		return strings.Join(parts, ",")
	}
	if len(p.Costs) > 0 {
		b.WriteString(" costs " + kv(p.Costs))
	}
	if len(p.Weights) > 0 {
		b.WriteString(" weights by " + p.WeightBy + " " + kv(p.Weights))
	}
	if len(p.Order) > 0 {
		b.WriteString(" order " + strings.Join(p.Order, ">"))
	}
	if p.PerConnection || p.Mode == meshsim.ModeBalanced {
		b.WriteString(" per-connection")
	}
	if m := p.Mirror; m != nil {
		fmt.Fprintf(&b, " mirror %g%% to", m.Percent)
		if m.Version != "" {
			b.WriteString(" version " + m.Version)
		}
		if m.Cluster != "" {
			b.WriteString(" cluster " + m.Cluster)
		}
	}
	return b.String()
}
