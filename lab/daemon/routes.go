package daemon

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/lab/nginx"
	"github.com/mesh-verify/mesh-verify/lab/sidecar"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// routesRef is the work queue's item for "a mesh object changed": the pod
// worker derives the routes again, so routing changes and pod changes
// never overlap (updateBackends has one caller at a time).
var routesRef = podRef{name: "\x00mesh-routes"}

// entryRoute is what the daemon last derived for a mesh entry.
type entryRoute struct {
	route meshroute.Route
	// err is the last derivation's error: the route stays the last good
	// one, as a data plane keeps its configuration when the control plane
	// cannot build a new one.
	err error
}

// meshResources lists what the topology's mesh entries read, once each.
func meshResources(t *topology.Topology) []meshroute.Resource {
	var out []meshroute.Resource
	for _, e := range t.Entries {
		for _, r := range meshroute.Resources(e.Mesh) {
			if !slices.Contains(out, r) {
				out = append(out, r)
			}
		}
	}
	return out
}

// watchMesh starts, in every cluster, an informer per kind the mesh
// entries route by; any change queues routesRef. It returns the informers'
// HasSynced and their factories.
func (d *Daemon) watchMesh(stop <-chan struct{}) ([]cache.InformerSynced, []dynamicinformer.DynamicSharedInformerFactory, error) {
	res := meshResources(d.cfg.Topology)
	if len(res) == 0 {
		return nil, nil, nil
	}
	var syncs []cache.InformerSynced
	var factories []dynamicinformer.DynamicSharedInformerFactory
	onChange := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { d.queue.Add(routesRef) },
		UpdateFunc: func(any, any) { d.queue.Add(routesRef) },
		DeleteFunc: func(any) { d.queue.Add(routesRef) },
	}
	for _, c := range d.cfg.Topology.Clusters {
		for _, r := range res {
			f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(d.clusters[c].dyn, 0, metav1.NamespaceAll,
				func(o *metav1.ListOptions) { o.LabelSelector = r.LabelSelector })
			inf := f.ForResource(r.GVR)
			if _, err := inf.Informer().AddEventHandler(onChange); err != nil {
				return nil, nil, fmt.Errorf("watch %s in cluster %s: %w", r.GVR, c, err)
			}
			d.meshStores[c] = append(d.meshStores[c], inf.Informer().GetStore())
			syncs = append(syncs, inf.Informer().HasSynced)
			factories = append(factories, f)
			f.Start(stop)
		}
	}
	return syncs, factories, nil
}

// meshObjects are the watched objects of every cluster, from the caches.
func (d *Daemon) meshObjects() meshroute.Objects {
	out := meshroute.Objects{}
	for c, stores := range d.meshStores {
		for _, s := range stores {
			for _, o := range s.List() {
				if u, ok := o.(*unstructured.Unstructured); ok {
					out[c] = append(out[c], u)
				}
			}
		}
	}
	return out
}

// FreezeAnnotation is the lab's fault switch for a data plane that
// disobeys the mesh's objects: while a watched mesh object carries it with
// the value "true", every entry keeps the route it has, whatever the
// objects say (the tests of verdicts that follow an object, e2e). Lab
// only: no mesh has such a switch.
const FreezeAnnotation = "lab.mesh-verify.io/freeze-routes"

// routesFrozen reports whether some watched mesh object sets
// FreezeAnnotation.
func routesFrozen(objs meshroute.Objects) bool {
	for _, us := range objs {
		for _, u := range us {
			if u.GetAnnotations()[FreezeAnnotation] == "true" {
				return true
			}
		}
	}
	return false
}

// syncRoutes derives every mesh entry's route from the watched objects
// and gives the changed ones to the entry's running data planes. Only the
// pod worker calls it (routesRef), and once before that worker starts.
func (d *Daemon) syncRoutes(ctx context.Context) error {
	objs := d.meshObjects()
	t := d.cfg.Topology
	changed := false
	frozen := routesFrozen(objs)
	for i := range t.Entries {
		e := &t.Entries[i]
		d.mu.Lock()
		keep := frozen && d.routes[e.Name] != nil
		d.mu.Unlock()
		if keep {
			// The lab's fault switch: a data plane that disobeys its
			// mesh objects keeps the route it has.
			continue
		}
		r, err := meshroute.Derive(t.RouteEntry(e), objs)
		if err == nil && e.UsesNginx() {
			// Refused before it is stored: the backends, reachability and
			// destinations must stay those of the route nginx keeps playing.
			if nerr := nginx.Supports(r.Policy); nerr != nil {
				err = fmt.Errorf("the nginx data plane cannot play the route: %w", nerr)
			}
		}
		d.mu.Lock()
		old := d.routes[e.Name]
		switch {
		case err != nil:
			d.routes[e.Name] = &entryRoute{route: routeOf(old), err: err}
		case old == nil || old.err != nil || !reflect.DeepEqual(old.route, r):
			d.routes[e.Name] = &entryRoute{route: r}
		}
		cur := d.routes[e.Name]
		d.mu.Unlock()
		d.setRouteError(e, err)
		if err != nil {
			if old == nil || old.err == nil || old.err.Error() != err.Error() {
				d.log.Error("mesh route refused; the entry keeps its last route", "entry", e.Name, "err", err)
				d.entryLines(e, "mesh objects refused, keeping the last route: %v", err)
				d.markDirty()
			}
			continue
		}
		if old != nil && old.err == nil && reflect.DeepEqual(old.route, r) {
			continue
		}
		changed = true
		d.log.Info("mesh route", "entry", e.Name, "policy", describeSim(r.Policy), "route", r.Describe())
		d.entryLines(e, "route from the mesh's objects: %s; %s", describeSim(r.Policy), r.Describe())
		if err := d.applyRoute(ctx, e, cur.route); err != nil {
			return err
		}
	}
	d.syncKumaLogging(objs)
	if changed {
		d.markDirty()
		return d.updateBackends(ctx)
	}
	return nil
}

// syncKumaLogging turns the Kuma sidecars' inbound access lines on or off
// as the MeshAccessLogs say (meshroute.KumaInboundLogging).
func (d *Daemon) syncKumaLogging(objs meshroute.Objects) {
	if !slices.ContainsFunc(d.cfg.Topology.Entries, func(e topology.Entry) bool { return e.Mesh == meshroute.MeshKuma }) {
		return
	}
	inbound, why := meshroute.KumaInboundLogging(objs)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.kumaNoInbound == !inbound {
		return
	}
	d.kumaNoInbound = !inbound
	d.log.Info("kuma sidecars' inbound access log", "on", inbound, "why", why)
	for _, rt := range d.pods {
		if rt.proxy != nil && rt.status.SidecarFlavor == sidecar.Kuma {
			rt.proxy.sc.SetInboundLog(inbound)
		}
	}
}

func routeOf(r *entryRoute) meshroute.Route {
	if r == nil {
		return meshroute.Route{}
	}
	return r.route
}

// applyRoute gives a new route's policy to every running data plane of
// entry e: the simulator takes it at once, nginx renders and reloads its
// configuration. A policy nginx cannot play never gets here (syncRoutes
// refuses it before storing it); should nginx still fail to take one
// (render or reload), that is said in its log, and it keeps playing the
// last one.
func (d *Daemon) applyRoute(ctx context.Context, e *topology.Entry, r meshroute.Route) error {
	d.mu.Lock()
	var planes []*podRT
	for _, rt := range d.planesLocked() {
		if rt.plane.entry == e {
			planes = append(planes, rt)
		}
	}
	d.mu.Unlock()
	for _, rt := range planes {
		switch dp := rt.plane.dp.(type) {
		case *simPlane:
			if err := dp.s.SetPolicy(r.Policy); err != nil {
				return fmt.Errorf("entry %s, pod %s: %w", e.Name, rt.status.Name, err)
			}
		case nginxPlane:
			// The new route's backends in the same configuration: one
			// reload, and updateBackends then finds them applied.
			d.mu.Lock()
			bs, names, sig := d.backendsLocked(e)
			pod, where := rt.status.Name, rt.status.Cluster
			d.mu.Unlock()
			if err := dp.Set(ctx, r.Policy, bs); err != nil {
				d.log.Error("nginx keeps its last route", "entry", e.Name, "pod", pod, "err", err)
				if rt.elog != nil {
					rt.elog.Line("nginx cannot play the new route, keeping the last one: %v", err)
				}
				continue
			}
			d.backendsApplied(rt, names, sig, pod, where)
		}
		d.mu.Lock()
		rt.status.Policy = describeSim(r.Policy)
		d.mu.Unlock()
	}
	return nil
}

// setRouteError shows err (nil: none) in the status of entry e's pods.
func (d *Daemon) setRouteError(e *topology.Entry, err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, rt := range d.planesLocked() {
		if rt.plane.entry == e {
			rt.status.RouteError = msg
		}
	}
}

// entryLines writes a line to the log of every running pod of entry e.
func (d *Daemon) entryLines(e *topology.Entry, format string, a ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, rt := range d.planesLocked() {
		if rt.plane.entry == e && rt.elog != nil {
			rt.elog.Line(format, a...)
		}
	}
}

// entryPolicy is the policy entry e's data plane starts with: the route
// its mesh's objects give.
func (d *Daemon) entryPolicy(e *topology.Entry) (meshsim.Policy, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := d.routes[e.Name]
	switch {
	case r == nil:
		return meshsim.Policy{}, fmt.Errorf("entry %s: no route derived from the %s objects yet", e.Name, e.Mesh)
	case r.route.Policy.Mode == "":
		return meshsim.Policy{}, fmt.Errorf("entry %s: its %s objects give no route: %w", e.Name, e.Mesh, r.err)
	}
	return r.route.Policy, nil
}

// reachesLocked reports whether entry e's route reaches cluster c (a
// Skupper site without a link, a Cilium Service that is not global does
// not). Callers hold d.mu.
func (d *Daemon) reachesLocked(e *topology.Entry, c string) bool {
	r := d.routes[e.Name]
	return r != nil && slices.Contains(r.route.Clusters, c)
}

// meshSyncTimeout bounds the first list of the mesh objects: the CRDs are
// registered by `lab up` before the daemon starts.
const meshSyncTimeout = 30 * time.Second

// describeSim is a short human form of a simulator policy.
func describeSim(p meshsim.Policy) string {
	out := strings.TrimSpace(describePolicy(p))
	if r := p.Retry; r != nil && r.Attempts > 0 {
		var on []string
		for _, c := range r.Codes {
			on = append(on, strconv.Itoa(c))
		}
		if len(r.Codes) > 8 {
			on = []string{fmt.Sprintf("%d..%d", r.Codes[0], r.Codes[len(r.Codes)-1])}
		}
		if r.ConnectFailure {
			on = append(on, "connect-failure")
		}
		out += fmt.Sprintf(" retries %d on %s", r.Attempts, strings.Join(on, ","))
	}
	return out
}
