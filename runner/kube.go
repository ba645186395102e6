package runner

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
	"github.com/mesh-verify/mesh-verify/measure"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// needsKube reports whether the scenario reaches through Kubernetes.
func needsKube(sc *scenarios.Scenario) bool {
	return sc.Target.Forward != nil || len(sc.Observe) > 0 || sc.Attack.Workers > 0 || usesMesh(sc)
}

// kubePath is what a run takes from Kubernetes: the clusters, the pod
// inventory of the observed workloads, the tunnel to the entry point, and
// the log followers of the observed pods.
type kubePath struct {
	sc       *scenarios.Scenario
	clusters map[string]*kube.Cluster
	inv      *kube.Inv
	tunnel   *portforward.Tunnel
	logs     *logSource
	warnings []string
	// metricsBefore holds the first scrape of workloads with metrics.
	metricsBefore []*kube.Metrics
	// deniedErrs are calls the API server denied after the setup (noteDenied).
	deniedErrs []error
}

// openKube connects to every cluster the scenario uses, lists the observed
// pods and opens the tunnel. Every failure names the cluster and the call.
func openKube(ctx context.Context, sc *scenarios.Scenario, o Options) (*kubePath, error) {
	cfg, err := loadConfig(o)
	if err != nil {
		return nil, err
	}
	used := map[string]bool{}
	if sc.Attack.Workers > 0 {
		for _, src := range sc.Attack.WorkerSources() {
			used[src.Cluster] = true // as Needs says
		}
	} else if f := sc.Target.Forward; f != nil {
		used[f.Cluster] = true
	}
	for _, w := range sc.Observe {
		for _, c := range w.Clusters {
			used[c] = true
		}
	}
	for _, c := range sc.Clusters {
		// The mesh's objects and the pods behind them may be in any.
		used[c.Name] = used[c.Name] || usesMesh(sc)
	}
	var refs []kube.ClusterRef
	for _, c := range sc.Clusters {
		if used[c.Name] {
			// In a pod, only a scenario of one cluster may take the pod's
			// own cluster for whatever context it names: with several, the
			// one this run happens to use could be the wrong one.
			refs = append(refs, kube.ClusterRef{Name: c.Name, Context: c.Context, OfSeveral: len(sc.Clusters) > 1})
		}
	}
	cs, err := cfg.ConnectAll(ctx, refs)
	if err != nil {
		return nil, err
	}
	kp := &kubePath{sc: sc, clusters: map[string]*kube.Cluster{}}
	for _, c := range cs {
		kp.clusters[c.Name] = c
	}
	if o.WaitReady > 0 {
		if err := WaitReady(ctx, sc, kp.clusters, o.WaitReady, o.Progress); err != nil {
			return nil, err
		}
	}
	if len(sc.Observe) > 0 {
		inCluster := append([]*kube.Cluster(nil), cs...)
		kp.inv, err = kube.Inventory(ctx, inCluster, kp.workloads())
		if err != nil {
			return nil, err
		}
		if err := kp.checkLogAccess(ctx); err != nil {
			return nil, err
		}
	}
	// A distributed run's workers attack from inside the cluster: no
	// tunnel (fleet/coordinator.go).
	if f := sc.Target.Forward; f != nil && sc.Attack.Workers == 0 {
		kp.tunnel, err = portforward.OpenTunnel(ctx, kp.clusters[f.Cluster], portforward.TunnelSpec{
			Namespace: f.Namespace, Resource: f.Resource, Port: f.Port, Observed: kp.workloads(),
		})
		if err != nil {
			return nil, err
		}
		kp.warnings = append(kp.warnings, kp.tunnel.Warnings()...)
	}
	return kp, nil
}

// loadConfig loads the kubeconfig a run's options name: Kube.Kubeconfig,
// else Kubeconfig, else kubectl's own rules.
func loadConfig(o Options) (*kube.Config, error) {
	ko := o.Kube
	if len(ko.Kubeconfig) == 0 {
		ko.Kubeconfig = o.Kubeconfig
	}
	cfg, err := kube.LoadConfig(ko)
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// withNamespace is sc with ns wherever the scenario left the namespace
// unset (-n, README.md "Connecting to clusters"): scenarios.ApplyDefaults
// filled in "default" there and remembers it (NamespaceDefaulted). A
// namespace the scenario names stays. sc itself is not changed.
func withNamespace(sc *scenarios.Scenario, ns string) *scenarios.Scenario {
	if ns == "" {
		return sc
	}
	out := *sc
	if f := sc.Target.Forward; f != nil && f.NamespaceDefaulted() {
		fc := *f
		fc.Namespace = ns
		out.Target.Forward = &fc
	}
	out.Observe = slices.Clone(sc.Observe)
	for i := range out.Observe {
		if out.Observe[i].NamespaceDefaulted() {
			out.Observe[i].Namespace = ns
		}
	}
	return &out
}

func (kp *kubePath) workloads() []kube.Workload {
	var out []kube.Workload
	for _, w := range kp.sc.Observe {
		out = append(out, kube.Workload{Namespace: w.Namespace, Selector: w.Selector, Name: w.Name})
	}
	return out
}

// targetURL is the URL the attack sends to; through a tunnel the host is
// only what the Host header says, since every connection is dialled
// through the API server whatever the address.
func (kp *kubePath) targetURL() string {
	f := kp.sc.Target.Forward
	_, name, _ := strings.Cut(f.Resource, "/")
	scheme := f.Scheme
	if scheme == "" {
		scheme = "http"
	}
	port := f.Port
	if _, err := strconv.Atoi(port); err != nil {
		// A named port is no URL port: the container port it resolved to is.
		port = strconv.Itoa(int(kp.tunnel.Pod().Port))
	}
	u := url.URL{Scheme: scheme, Host: name + "." + f.Namespace + ":" + port, Path: kp.sc.Target.Path}
	if p, q, ok := strings.Cut(kp.sc.Target.Path, "?"); ok {
		u.Path, u.RawQuery = p, q
	}
	return strings.NewReplacer("%7B", "{", "%7D", "}").Replace(u.String())
}

// observedPods are the inventory's pods of workload w in its clusters.
func (kp *kubePath) observedPods(w *scenarios.Workload) []kube.Pod {
	in := map[string]bool{}
	for _, c := range w.Clusters {
		in[c] = true
	}
	var out []kube.Pod
	for _, p := range kp.inv.Pods() {
		if p.Workload == w.Name && in[p.Cluster] {
			out = append(out, p)
		}
	}
	return out
}

// readyPods lists the serving pods per cluster by name: their counts are
// what the equal-per-pod and link-cost models divide traffic by when the
// scenario does not say, their names the buckets of a split by pod.
func (kp *kubePath) readyPods() map[string][]string {
	if kp == nil || kp.inv == nil {
		return nil
	}
	out := map[string][]string{}
	for i := range kp.sc.Observe {
		w := &kp.sc.Observe[i]
		for _, p := range kp.observedPods(w) {
			if p.Serving() && !slices.Contains(out[p.Cluster], p.Name) {
				out[p.Cluster] = append(out[p.Cluster], p.Name)
			}
		}
	}
	for _, names := range out {
		sort.Strings(names)
	}
	return out
}

func (kp *kubePath) close() {
	if kp.tunnel != nil {
		_ = kp.tunnel.Close()
	}
}

// podByAddress finds the observed pod with the address's IP (the port is
// left out): the pod an access log's upstream host names. ok is false when
// none has it, or several pods do (pod IPs repeat across clusters).
func (kp *kubePath) podByAddress(addr string) (kube.Pod, bool) {
	if kp == nil || kp.inv == nil {
		return kube.Pod{}, false
	}
	return measure.OnlyPod(kp.inv.WithIP(measure.AddressHost(addr)))
}

// podStart is when a target's pod started, for the background period of a
// pod younger than it.
func (kp *kubePath) podStart(t podlogs.Target) time.Time {
	for _, p := range kp.inv.Lookup(t.Pod) {
		if p.Cluster == t.Cluster && p.Namespace == t.Namespace && p.StartTime != nil {
			return *p.StartTime
		}
	}
	return time.Time{}
}

// identity is who a log target is: its cluster, pod and the version label
// the inventory read.
func (kp *kubePath) identity(t podlogs.Target) attribution.Identity {
	id := attribution.Identity{Cluster: t.Cluster, Pod: t.Pod}
	for _, p := range kp.inv.Lookup(t.Pod) {
		if p.Cluster == t.Cluster && p.Namespace == t.Namespace {
			id.Version = p.Version
		}
	}
	return id
}

// ByPod makes the inventory an attribution.Resolver: a pod name a response
// gives maps to its cluster and version, when exactly one cluster has it.
func (kp *kubePath) ByPod(name string) (attribution.Identity, bool) {
	return measure.IdentityOf(name, kp.inv.Lookup(name))
}

// ByAddress is the same for a pod's address.
func (kp *kubePath) ByAddress(addr string) (attribution.Identity, bool) {
	p, ok := kp.podByAddress(addr)
	if !ok {
		return attribution.Identity{}, false
	}
	return attribution.Identity{Cluster: p.Cluster, Pod: p.Name, Version: p.Version}, true
}

// scrapeAll scrapes every pod of the workloads with metrics.
func (kp *kubePath) scrapeAll(ctx context.Context) ([]*kube.Metrics, error) {
	var out []*kube.Metrics
	var errs []error
	for i := range kp.sc.Observe {
		w := &kp.sc.Observe[i]
		if w.Metrics == nil {
			continue
		}
		for _, p := range kp.observedPods(w) {
			m, err := portforward.ScrapeVia(ctx, kp.clusters[p.Cluster], w.Metrics.Via, p.Namespace, p.Name, w.Metrics.Port, w.Metrics.Path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, m)
		}
	}
	return out, errors.Join(errs...)
}

// metricsTally turns the counter deltas per pod into counts, and
// reconciles their sum with the requests answered.
func (kp *kubePath) metricsTally(after []*kube.Metrics, start time.Time, answered, failed int64) (tally.Snapshot, *reports.Reconciliation) {
	t := tally.New(start, time.Second)
	var deltas []metricsDelta
	for i := range kp.sc.Observe {
		w := &kp.sc.Observe[i]
		if w.Metrics == nil {
			continue
		}
		for _, d := range kube.Delta(kp.metricsBefore, after, w.Metrics.Counter, w.Metrics.Labels) {
			id := kp.identity(podlogs.Target{Cluster: d.Cluster, Namespace: d.Namespace, Pod: d.Pod})
			addIndependent(t, start, int(d.Delta+0.5), id)
			deltas = append(deltas, metricsDelta{workload: w.Name, delta: d})
		}
	}
	return t.Snapshot(), reconcileMetrics(deltas, answered, failed)
}

// unknownPods lists pod names the responses named that the inventory does
// not know: reported, never guessed into a cluster.
func (kp *kubePath) unknownPods(s tally.Snapshot) []string {
	if kp == nil || kp.inv == nil {
		return nil
	}
	var out []string
	for _, b := range s.Dimensions[string(attribution.Pod)].Buckets {
		if len(kp.inv.Lookup(tally.PodName(b, s.PodClusters[b]))) == 0 {
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return out
}

// reportInfo describes the clusters, pods, tunnel and log streams.
func (kp *kubePath) reportInfo() *reports.Kubernetes {
	k := &reports.Kubernetes{}
	names := make([]string, 0, len(kp.clusters))
	for n := range kp.clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		c := kp.clusters[n]
		k.Clusters = append(k.Clusters, reports.KubeCluster{Name: c.Name, Context: c.Context, Server: c.Server})
	}
	if kp.inv != nil {
		k.Inventory = kp.inv.Snapshot()
	}
	if kp.tunnel != nil {
		k.Tunnel = struct {
			Target string                  `json:"target"`
			Pod    portforward.PodRef      `json:"pod"`
			Stats  portforward.TunnelStats `json:"stats"`
		}{kp.tunnel.Target().String(), kp.tunnel.Pod(), kp.tunnel.Stats()}
	}
	if kp.logs != nil {
		for t, st := range kp.logs.follower.Stats() {
			ls := reports.LogStream{Target: t.String(), Lines: st.Lines, Reconnects: int64(st.Reconnects), Deleted: st.Deleted}
			if st.LastError != nil {
				ls.LastError = st.LastError.Error()
			}
			k.Logs = append(k.Logs, ls)
		}
		sort.Slice(k.Logs, func(a, b int) bool { return k.Logs[a].Target < k.Logs[b].Target })
	}
	return k
}

// addIndependent counts n requests of one identity that no connection is
// known for (log lines without a request id, counter deltas): each is its
// own sampling unit.
func addIndependent(t *tally.Tally, at time.Time, n int, id attribution.Identity) {
	r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: at}}
	for range n {
		t.Add(r, id)
	}
}
