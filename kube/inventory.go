package kube

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"
)

// Version labels, in the order they are looked up.
var versionLabels = [...]string{"version", "app.kubernetes.io/version"}

// Workload is a set of pods mesh-verify observes: a namespace and a label
// selector (kubectl syntax, e.g. "app=callme,tier!=db"; empty = all pods).
type Workload struct {
	Namespace string `json:"namespace"`
	Selector  string `json:"selector,omitempty"`
	// Name labels the workload in the report; defaults to the selector.
	Name string `json:"name,omitempty"`
}

// Label names the workload in messages: its name, else its selector,
// else its namespace.
func (w Workload) Label() string { return w.label() }

func (w Workload) label() string {
	if w.Name != "" {
		return w.Name
	}
	if w.Selector != "" {
		return w.Selector
	}
	return w.Namespace
}

// Pod is what the report and the expectation models need of a pod.
type Pod struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
	// Workload is the label of the first workload that selected the pod.
	Workload string `json:"workload,omitempty"`
	Node     string `json:"node,omitempty"`
	// IP is the pod's primary IP (status.podIP); IPs are all of them
	// (status.podIPs: two on a dual-stack pod, one per family). Not a key:
	// pod IPs repeat across clusters, and across networks by design.
	IP  string   `json:"ip,omitempty"`
	IPs []string `json:"ips,omitempty"`
	// Network is the pod's topology.istio.io/network label (Istio's
	// injector sets it when the mesh has several networks): which pod an
	// address names depends on the network it was seen from.
	Network string `json:"network,omitempty"`
	Phase   string `json:"phase"`
	Ready   bool   `json:"ready"`
	// Terminating is set once the pod has a deletion timestamp.
	Terminating bool `json:"terminating,omitempty"`
	// Version is the `version` label, else `app.kubernetes.io/version`.
	Version string `json:"version,omitempty"`
	// Restarts sums the restart counts of the pod's containers and init
	// containers: a native sidecar (an init container with restartPolicy
	// Always, as Istio and Kuma can inject) restarts there.
	Restarts   int32      `json:"restarts"`
	StartTime  *time.Time `json:"startTime,omitempty"`
	Containers []string   `json:"containers,omitempty"`
	// DefaultContainer is the container kubectl reads when none is named:
	// the kubectl.kubernetes.io/default-container annotation (Istio's
	// injection sets it to the app's container), else the first one.
	DefaultContainer string `json:"defaultContainer,omitempty"`
	// Deleted is when a Watch saw the pod go; such pods stay known so a
	// name seen in a body or log line still maps to its cluster.
	Deleted *time.Time `json:"deleted,omitempty"`
}

// Key is "cluster/namespace/name".
func (p Pod) Key() string { return p.Cluster + "/" + p.Namespace + "/" + p.Name }

// Serving is whether the pod counts as a ready endpoint: ready, not
// terminating, not deleted (what an EndpointSlice would list as ready).
func (p Pod) Serving() bool { return p.Ready && !p.Terminating && p.Deleted == nil }

func podFromAPI(cluster, workload string, in *corev1.Pod) Pod {
	p := Pod{
		Cluster:     cluster,
		Namespace:   in.Namespace,
		Name:        in.Name,
		UID:         string(in.UID),
		Workload:    workload,
		Node:        in.Spec.NodeName,
		IP:          in.Status.PodIP,
		IPs:         podIPs(in),
		Network:     in.Labels[NetworkLabel],
		Phase:       string(in.Status.Phase),
		Ready:       podReady(in),
		Terminating: in.DeletionTimestamp != nil,
		Restarts:    restarts(in),
	}
	for _, l := range versionLabels {
		if v := in.Labels[l]; v != "" {
			p.Version = v
			break
		}
	}
	if in.Status.StartTime != nil {
		t := in.Status.StartTime.Time
		p.StartTime = &t
	}
	for _, c := range in.Spec.Containers {
		p.Containers = append(p.Containers, c.Name)
	}
	p.DefaultContainer = in.Annotations[defaultContainerAnnotation]
	if !slices.Contains(p.Containers, p.DefaultContainer) && len(p.Containers) > 0 {
		p.DefaultContainer = p.Containers[0]
	}
	return p
}

// defaultContainerAnnotation names a pod's default container, as kubectl
// logs and exec read it.
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// PodReady reports whether the pod's Ready condition is true.
func PodReady(p *corev1.Pod) bool { return podReady(p) }

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func restarts(p *corev1.Pod) int32 {
	var n int32
	for _, s := range p.Status.ContainerStatuses {
		n += s.RestartCount
	}
	// An init container that ran to completion has no restarts once the
	// pod runs; one that restarts is a native sidecar (or a failing init
	// container, which a restart count shows as well).
	for _, s := range p.Status.InitContainerStatuses {
		n += s.RestartCount
	}
	return n
}

// podIPs are every IP of the pod: status.podIPs, with status.podIP first
// when an API server filled only that field.
func podIPs(p *corev1.Pod) []string {
	var out []string
	if p.Status.PodIP != "" {
		out = append(out, p.Status.PodIP)
	}
	for _, ip := range p.Status.PodIPs {
		if ip.IP != "" && !slices.Contains(out, ip.IP) {
			out = append(out, ip.IP)
		}
	}
	return out
}

// HasIP reports whether ip is one of the pod's addresses.
func (p Pod) HasIP(ip string) bool { return ip != "" && (p.IP == ip || slices.Contains(p.IPs, ip)) }

// Inv is the pod inventory of the observed workloads in every cluster. It
// is safe for concurrent use; Watch keeps it current.
type Inv struct {
	clusters  []*Cluster
	workloads []Workload
	selectors []labels.Selector

	mu    sync.RWMutex
	taken time.Time
	pods  map[string]*Pod // by Pod.Key()
	// gateways are the clusters' network gateways (SetGateways).
	gateways []Gateway
	// networks caches networksLocked, computed under the read lock by the
	// first ResolveUpstream after a change; writers (holding the write
	// lock) clear it, so no reader can store a stale one.
	networks atomic.Pointer[map[string]string]
	// byIP caches the current pods by address (WithIP), made the same way:
	// an access log asks for an address per line, and a scan of every pod
	// per line costs what the inventory's size costs.
	byIP atomic.Pointer[map[string][]*Pod]
}

// Inventory lists the pods of the workloads in every cluster. Any failure
// (namespace missing, RBAC denial, unreachable server) is a *ClusterError;
// failures of several clusters are joined.
func Inventory(ctx context.Context, clusters []*Cluster, workloads []Workload) (*Inv, error) {
	inv := &Inv{clusters: clusters, workloads: workloads, pods: map[string]*Pod{}, taken: time.Now().UTC()}
	for _, w := range workloads {
		sel, err := labels.Parse(w.Selector)
		if err != nil {
			return nil, fmt.Errorf("workload %s: label selector %q: %w", w.label(), w.Selector, err)
		}
		if w.Namespace == "" {
			return nil, fmt.Errorf("workload %s: namespace is empty", w.label())
		}
		inv.selectors = append(inv.selectors, sel)
	}
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() { errs[i] = inv.list(ctx, c) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return inv, nil
}

func (inv *Inv) list(ctx context.Context, c *Cluster) error {
	checked := map[string]bool{}
	for i, w := range inv.workloads {
		if !checked[w.Namespace] {
			if err := c.CheckNamespace(ctx, w.Namespace); err != nil {
				return err
			}
			checked[w.Namespace] = true
		}
		list, err := c.Client.CoreV1().Pods(w.Namespace).List(ctx, metav1.ListOptions{LabelSelector: inv.selectors[i].String()})
		if err != nil {
			return c.wrap("list pods in namespace "+w.Namespace, err)
		}
		inv.mu.Lock()
		for j := range list.Items {
			p := podFromAPI(c.Name, w.label(), &list.Items[j])
			if _, dup := inv.pods[p.Key()]; !dup {
				inv.pods[p.Key()] = &p
			}
		}
		inv.changed()
		inv.mu.Unlock()
	}
	return nil
}

// Clusters are the cluster names, in the order given to Inventory.
func (inv *Inv) Clusters() []string {
	out := make([]string, len(inv.clusters))
	for i, c := range inv.clusters {
		out[i] = c.Name
	}
	return out
}

func (inv *Inv) clusterIndex() map[string]int {
	idx := make(map[string]int, len(inv.clusters))
	for i, c := range inv.clusters {
		idx[c.Name] = i
	}
	return idx
}

// changed drops what is cached from the pods and gateways; callers hold
// inv.mu for writing, so no reader can store a stale cache.
func (inv *Inv) changed() {
	inv.networks.Store(nil)
	inv.byIP.Store(nil)
}

// sorted returns copies of the pods accepted by keep, in cluster order,
// then namespace, then name. Callers hold inv.mu. Lookup and WithIP run
// per response or log line and keep one or two pods of many: the slice
// grows with what is kept, not with the inventory.
func (inv *Inv) sorted(keep func(*Pod) bool) []Pod {
	out := []Pod{}
	for _, p := range inv.pods {
		if keep(p) {
			out = append(out, *p)
		}
	}
	inv.sortPods(out)
	return out
}

// sortPods orders pods by cluster (as configured), namespace and name.
func (inv *Inv) sortPods(out []Pod) {
	if len(out) < 2 {
		return
	}
	idx := inv.clusterIndex()
	slices.SortFunc(out, func(a, b Pod) int {
		return cmp.Or(cmp.Compare(idx[a.Cluster], idx[b.Cluster]), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
}

// WithIP returns the current (not deleted) pods with this address, every
// one of a dual-stack pod's included, in Pods' order: one pod when the
// clusters' pod networks are distinct, several where they overlap.
func (inv *Inv) WithIP(ip string) []Pod {
	if ip == "" {
		return []Pod{}
	}
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	idx := inv.byIP.Load()
	if idx == nil {
		m := map[string][]*Pod{}
		for _, p := range inv.pods {
			if p.Deleted != nil {
				continue
			}
			if p.IP != "" {
				m[p.IP] = append(m[p.IP], p)
			}
			for _, a := range p.IPs {
				if a != p.IP {
					m[a] = append(m[a], p)
				}
			}
		}
		idx = &m
		inv.byIP.Store(idx)
	}
	out := make([]Pod, 0, len((*idx)[ip]))
	for _, p := range (*idx)[ip] {
		out = append(out, *p)
	}
	inv.sortPods(out)
	return out
}

// Pods are the current (not deleted) pods of every cluster.
func (inv *Inv) Pods() []Pod {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.sorted(func(p *Pod) bool { return p.Deleted == nil })
}

// PodsIn are the current pods of one cluster.
func (inv *Inv) PodsIn(cluster string) []Pod {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.sorted(func(p *Pod) bool { return p.Deleted == nil && p.Cluster == cluster })
}

// ReadyPods counts serving pods per cluster (every cluster has an entry,
// possibly 0). It drives the equal-per-pod and link-cost models.
func (inv *Inv) ReadyPods() map[string]int {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	out := make(map[string]int, len(inv.clusters))
	for _, c := range inv.clusters {
		out[c.Name] = 0
	}
	for _, p := range inv.pods {
		if p.Serving() {
			out[p.Cluster]++
		}
	}
	return out
}

// Lookup returns every known pod (deleted ones too) with this name.
func (inv *Inv) Lookup(name string) []Pod {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	return inv.sorted(func(p *Pod) bool { return p.Name == name })
}

// ClusterOfPod maps a pod name seen in a response body or a log line to its
// cluster. ok is false when no cluster has such a pod, and also when
// several do (bare pods may share a name across clusters): the caller
// reports the name instead of guessing.
func (inv *Inv) ClusterOfPod(name string) (cluster string, ok bool) {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	for _, p := range inv.pods {
		if p.Name != name {
			continue
		}
		if ok && p.Cluster != cluster {
			return "", false
		}
		cluster, ok = p.Cluster, true
	}
	return cluster, ok
}

// Snapshot is the inventory as plain data, for the JSON report.
type Snapshot struct {
	Taken     time.Time     `json:"taken"`
	Workloads []Workload    `json:"workloads"`
	Clusters  []ClusterPods `json:"clusters"`
}

// ClusterPods are one cluster's pods in a Snapshot.
type ClusterPods struct {
	Cluster string `json:"cluster"`
	Context string `json:"context,omitempty"`
	// Ready counts serving pods.
	Ready int   `json:"ready"`
	Pods  []Pod `json:"pods"`
}

// Snapshot copies the inventory, deleted pods included (they may have served).
func (inv *Inv) Snapshot() Snapshot {
	inv.mu.RLock()
	defer inv.mu.RUnlock()
	s := Snapshot{Taken: inv.taken, Workloads: slices.Clone(inv.workloads)}
	all := inv.sorted(func(*Pod) bool { return true })
	for _, c := range inv.clusters {
		cp := ClusterPods{Cluster: c.Name, Context: c.Context, Pods: []Pod{}}
		for _, p := range all {
			if p.Cluster == c.Name {
				cp.Pods = append(cp.Pods, p)
				if p.Serving() {
					cp.Ready++
				}
			}
		}
		s.Clusters = append(s.Clusters, cp)
	}
	return s
}

// MarshalJSON encodes the Snapshot.
func (inv *Inv) MarshalJSON() ([]byte, error) { return json.Marshal(inv.Snapshot()) }

// EventType says what happened to a pod.
type EventType string

// Event types a Watch reports.
const (
	PodAdded     EventType = "added"
	PodDeleted   EventType = "deleted"
	PodRestarted EventType = "restarted" // a container's restart count grew
	PodChanged   EventType = "changed"   // phase, readiness, node or termination changed
)

// Event is one change a Watch saw.
type Event struct {
	Type EventType
	Pod  Pod
	// Previous is the pod before the change (nil for PodAdded).
	Previous *Pod
	Time     time.Time
}

// Watch keeps the inventory current until ctx ends and calls onChange (one
// call at a time) for pods that appear, are deleted, restart or change
// phase/readiness. It returns nil when ctx ends, or a *ClusterError when a
// cluster's watch cannot start (e.g. RBAC forbids watching pods).
func (inv *Inv) Watch(ctx context.Context, onChange func(Event)) error {
	return inv.watch(ctx, onChange, func() {})
}

// StartWatch runs Watch in the background and returns once every watch has
// synced (nil), or with the error of one that could not start (a
// *ClusterError: RBAC forbids listing or watching pods, say), so that a
// run never attacks with an inventory that cannot keep up (README.md,
// RBAC). The watch goes on until ctx ends.
func (inv *Inv) StartWatch(ctx context.Context, onChange func(Event)) error {
	started := make(chan error, 1)
	go func() {
		if err := inv.watch(ctx, onChange, func() { started <- nil }); err != nil {
			started <- err
		}
	}()
	select {
	case err := <-started:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (inv *Inv) watch(ctx context.Context, onChange func(Event), ready func()) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		cbMu     sync.Mutex
		startErr = make(chan error, len(inv.clusters)*len(inv.workloads))
		synced   []cache.InformerSynced
		stores   []cache.Store
		wg       sync.WaitGroup
	)
	emit := func(ev *Event) {
		if ev == nil || onChange == nil {
			return
		}
		cbMu.Lock()
		defer cbMu.Unlock()
		onChange(*ev)
	}
	for _, c := range inv.clusters {
		for i, w := range inv.workloads {
			sel := inv.selectors[i].String()
			lw := cache.NewFilteredListWatchFromClient(c.Client.CoreV1().RESTClient(), "pods", w.Namespace,
				func(o *metav1.ListOptions) { o.LabelSelector = sel })
			inf := cache.NewSharedIndexInformer(lw, &corev1.Pod{}, 0, cache.Indexers{})
			call := "list and watch pods in namespace " + w.Namespace
			_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
				select {
				case startErr <- c.wrap(call, err):
				default:
				}
				cache.DefaultWatchErrorHandler(ctx, r, err)
			})
			label := w.label()
			_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
				AddFunc: func(obj any) {
					if p, ok := obj.(*corev1.Pod); ok {
						emit(inv.apply(podFromAPI(c.Name, label, p), false))
					}
				},
				UpdateFunc: func(_, obj any) {
					if p, ok := obj.(*corev1.Pod); ok {
						emit(inv.apply(podFromAPI(c.Name, label, p), false))
					}
				},
				DeleteFunc: func(obj any) {
					if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
						obj = d.Obj
					}
					if p, ok := obj.(*corev1.Pod); ok {
						emit(inv.apply(podFromAPI(c.Name, label, p), true))
					}
				},
			})
			if err != nil {
				return fmt.Errorf("watch pods of %s in %s: %w", label, c, err)
			}
			synced = append(synced, inf.HasSynced)
			stores = append(stores, inf.GetStore())
			wg.Go(func() { inf.RunWithContext(ctx) })
		}
	}
	defer wg.Wait()
	// A watch that cannot start (403, unreachable) would retry forever in
	// the reflector: report the first error instead, unless every informer
	// synced meanwhile.
	syncDone := make(chan struct{})
	go func() {
		cache.WaitForCacheSync(ctx.Done(), synced...)
		close(syncDone)
	}()
	select {
	case <-syncDone:
	case err := <-startErr:
		cancel()
		<-syncDone
		return err
	}
	if ctx.Err() == nil {
		inv.reconcile(stores, emit)
		ready()
	}
	<-ctx.Done()
	return nil
}

// reconcile reports pods that Inventory listed but that were gone by the
// time the watches synced (they never appear in a watch to be deleted).
func (inv *Inv) reconcile(stores []cache.Store, emit func(*Event)) {
	live := map[string]bool{} // by UID: unique across clusters, unlike names
	for _, st := range stores {
		for _, obj := range st.List() {
			if p, ok := obj.(*corev1.Pod); ok {
				live[string(p.UID)] = true
			}
		}
	}
	inv.mu.RLock()
	var gone []Pod
	for _, p := range inv.pods {
		if p.Deleted == nil && !live[p.UID] {
			gone = append(gone, *p)
		}
	}
	inv.mu.RUnlock()
	for _, p := range gone {
		emit(inv.apply(p, true))
	}
}

// apply records the pod's new state and returns the event to report, or nil.
func (inv *Inv) apply(p Pod, deleted bool) *Event {
	now := time.Now().UTC()
	inv.mu.Lock()
	defer inv.mu.Unlock()
	defer inv.changed()
	old, known := inv.pods[p.Key()]
	if known && old.UID != p.UID && old.UID != "" && p.UID != "" && deleted {
		return nil // a delete for a pod that was already replaced under the same name
	}
	if deleted {
		if !known || old.Deleted != nil {
			return nil
		}
		prev := *old
		p.Workload = old.Workload
		p.Deleted = &now
		inv.pods[p.Key()] = &p
		return &Event{Type: PodDeleted, Pod: p, Previous: &prev, Time: now}
	}
	if !known || old.Deleted != nil || old.UID != p.UID {
		inv.pods[p.Key()] = &p
		return &Event{Type: PodAdded, Pod: p, Time: now}
	}
	prev := *old
	p.Workload = old.Workload
	inv.pods[p.Key()] = &p
	switch {
	case p.Restarts > prev.Restarts:
		return &Event{Type: PodRestarted, Pod: p, Previous: &prev, Time: now}
	case p.Phase != prev.Phase || p.Ready != prev.Ready || p.Terminating != prev.Terminating || p.Node != prev.Node:
		return &Event{Type: PodChanged, Pod: p, Previous: &prev, Time: now}
	}
	return nil
}

// NewInventory is an inventory of pods already known, for replaying the
// logs of a run offline and for tests that need no cluster: it is never
// watched, and Clusters are the names given.
func NewInventory(clusters []string, pods []Pod, gateways []Gateway) *Inv {
	inv := &Inv{pods: map[string]*Pod{}, gateways: slices.Clone(gateways), taken: time.Now().UTC()}
	for _, c := range clusters {
		inv.clusters = append(inv.clusters, &Cluster{Name: c})
	}
	for _, p := range pods {
		inv.pods[p.Key()] = &p
	}
	return inv
}
