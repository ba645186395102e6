package daemon

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/sidecar"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// A mesh-verify worker pod's outbound data plane (lab/README.md, "Worker
// pods in the lab's mesh"): for each workers entry of the pod's cluster
// that applies to it — an Istio or Kuma one when the mesh's injector
// would inject the pod, a Cilium or Skupper one always — a simulator
// routing that entry's Service by the mesh's watched objects, as the
// tutorials' client pods (sleep, x-wing) are routed. With a sidecar the
// daemon also plays the proxy's admin endpoints (readiness, quitquitquit)
// on a loopback port of its own, since every lab process shares the
// host's loopback: the pod learns it from worker.SidecarAdminEnv, and the pod
// completes only once the worker asked the proxy to quit, as an injected
// pod's Job does.

// RoleWorker is the role of a worker pod's data plane in the status.
const RoleWorker = "worker"

// workerProxy is one worker pod's data planes and injected proxy.
type workerProxy struct {
	// flavor is the injected sidecar (sidecar.Istio, sidecar.Kuma), ""
	// when only a sidecar-less mesh's datapath applies.
	flavor  string
	planes  []*podRT
	elog    *entryLog // the proxy container's log, nil without a sidecar
	logFile string
	admin   *http.Server
	addr    string

	once    sync.Once
	quit    bool          // guarded by Daemon.mu: the proxy was asked to quit
	stopped chan struct{} // closed once its planes and admin are stopped
}

// workerFlavor is the sidecar the mesh's injector gives the pod, read
// from its namespace's labels and its own labels and annotations.
func (d *Daemon) workerFlavor(ctx context.Context, ref podRef, pod *corev1.Pod) (string, error) {
	ns, err := d.clusters[ref.cluster].cs.CoreV1().Namespaces().Get(ctx, ref.namespace, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("get namespace %s of cluster %s for its sidecar injection: %w", ref.namespace, ref.cluster, err)
	}
	flavor, err := topology.InjectedSidecar(ns.Labels, pod.Labels, pod.Annotations)
	if err != nil {
		return "", fmt.Errorf("pod %s: %w", ref, err)
	}
	return flavor, nil
}

// sidecarMesh reports whether mesh puts a proxy in the client's pod.
func sidecarMesh(mesh string) bool { return mesh == meshroute.MeshIstio || mesh == meshroute.MeshKuma }

// startWorkerProxy starts the pod's data planes; nil when no workers
// entry applies to it. An error is the pod's configuration's.
func (d *Daemon) startWorkerProxy(ctx context.Context, ref podRef, pod *corev1.Pod) (wp *workerProxy, err error) {
	entries := d.cfg.Topology.WorkersIn(ref.cluster)
	if len(entries) == 0 {
		return nil, nil
	}
	flavor, err := d.workerFlavor(ctx, ref, pod)
	if err != nil {
		return nil, err
	}
	var use []*topology.Entry
	for _, e := range entries {
		if !sidecarMesh(e.Mesh) || e.Mesh == flavor {
			use = append(use, e)
		}
	}
	if len(use) == 0 {
		return nil, nil // injected by a mesh the lab plays no worker sidecar for, or not injected
	}
	wp = &workerProxy{stopped: make(chan struct{})}
	defer func() {
		if err != nil {
			wp.stop(d)
		}
	}()
	if flavor != "" && slices.ContainsFunc(use, func(e *topology.Entry) bool { return e.Mesh == flavor }) {
		wp.flavor = flavor
		wp.logFile = d.logFile(ref, sidecar.Container(flavor))
		if wp.elog, err = openEntryLog(wp.logFile); err != nil {
			return nil, fmt.Errorf("pod %s: %w", ref, err)
		}
		if err = wp.serveAdmin(d); err != nil {
			return nil, fmt.Errorf("pod %s: %w", ref, err)
		}
		wp.elog.Line("%s sidecar of mesh-verify worker pod %s (played by the lab): admin endpoints on %s", flavor, ref, wp.addr)
	}
	for _, e := range use {
		var elog *entryLog
		if sidecarMesh(e.Mesh) {
			elog = wp.elog
		}
		plane, err := d.startPlane(ctx, e, ref, d.proxying(e, nil, elog))
		if err != nil {
			return nil, fmt.Errorf("pod %s: %w", ref, err)
		}
		prt := &podRT{uid: pod.UID, plane: plane, elog: elog, status: Pod{
			Cluster: ref.cluster, Namespace: ref.namespace, Name: ref.name, Role: RoleWorker, App: e.Name, Kind: "worker-" + e.Mesh,
			Addr: plane.dp.Addr(), Policy: describeSim(plane.policy), DataPlane: dataPlaneName(e), LogFile: wp.logFile,
		}}
		wp.planes = append(wp.planes, prt)
		if elog != nil {
			elog.Line("outbound to %s/%s through %s: %s", e.Namespace, e.To, plane.dp.Addr(), prt.status.Policy)
		}
	}
	d.mu.Lock()
	d.workerProxies[ref] = wp
	d.mu.Unlock()
	// The backends now, not at the next pod event: the worker starts at
	// once. A concurrent updateBackends sets the same set.
	for _, prt := range wp.planes {
		d.mu.Lock()
		bs, names, sig := d.backendsLocked(prt.plane.entry)
		d.mu.Unlock()
		if err := prt.plane.dp.SetBackends(ctx, bs); err != nil {
			return nil, fmt.Errorf("pod %s, entry %s: set backends: %w", ref, prt.plane.entry.Name, err)
		}
		d.mu.Lock()
		prt.sig, prt.status.Backends = sig, append([]string{}, names...)
		d.mu.Unlock()
	}
	d.markDirty()
	return wp, nil
}

// serveAdmin plays the sidecar's admin endpoints: Istio's pilot-agent
// readiness (/healthz/ready, port 15021) and quit (/quitquitquit, port
// 15020), Kuma's Envoy admin (/ready and /quitquitquit, port 9901), all
// on one loopback port. Ready answers 200 while the proxy runs; a POST
// to quitquitquit stops it, as the real ones exit.
func (wp *workerProxy) serveAdmin(d *Daemon) error {
	ready := "/healthz/ready"
	if wp.flavor == sidecar.Kuma {
		ready = "/ready"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+ready, func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-wp.stopped:
			http.Error(w, "proxy stopped", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("LIVE\n"))
		}
	})
	mux.HandleFunc("POST /quitquitquit", func(w http.ResponseWriter, _ *http.Request) {
		d.mu.Lock()
		wp.quit = true
		d.mu.Unlock()
		wp.elog.Line("quitquitquit: the proxy exits")
		_, _ = w.Write([]byte("OK\n"))
		go wp.stop(d) // after the answer: stop closes this server
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the %s sidecar's admin endpoints: %w", wp.flavor, err)
	}
	wp.addr = ln.Addr().String()
	wp.admin = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := wp.admin.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("worker sidecar admin stopped", "addr", wp.addr, "err", err)
		}
	}()
	return nil
}

// stop ends the proxy: its planes leave the daemon's routing, then stop,
// then its log and admin close. Safe to call more than once.
func (wp *workerProxy) stop(d *Daemon) {
	wp.once.Do(func() {
		d.mu.Lock()
		for ref, other := range d.workerProxies {
			if other == wp {
				delete(d.workerProxies, ref)
			}
		}
		d.mu.Unlock()
		for _, prt := range wp.planes {
			prt.plane.dp.Stop()
		}
		if wp.admin != nil {
			ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
			_ = wp.admin.Shutdown(ctx)
			cancel()
		}
		if wp.elog != nil {
			_ = wp.elog.Close()
		}
		close(wp.stopped)
		d.markDirty()
	})
}

// planesLocked are every running data plane: the pods' and the worker
// pods'. Callers hold d.mu.
func (d *Daemon) planesLocked() []*podRT {
	out := make([]*podRT, 0, len(d.pods))
	for _, rt := range d.pods {
		if rt.plane != nil {
			out = append(out, rt)
		}
	}
	for _, wp := range d.workerProxies {
		out = append(out, wp.planes...)
	}
	return out
}

// workerStatus is the proxy's part of a Job pod's status.
func (wp *workerProxy) statusLocked(j *JobPod) {
	j.Sidecar, j.SidecarAdmin, j.SidecarLogFile, j.SidecarQuit = wp.flavor, wp.addr, wp.logFile, wp.quit
	for _, prt := range wp.planes {
		p := prt.status
		p.Backends = append([]string{}, p.Backends...)
		p.Seed = prt.plane.seed
		if st := prt.planeStats(); st != nil {
			p.Routed = routedOf(st)
		}
		j.Planes = append(j.Planes, p)
	}
}
