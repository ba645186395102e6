package runner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"k8s.io/client-go/kubernetes"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// needsKube reports whether the scenario reaches through Kubernetes.
func needsKube(sc *scenarios.Scenario) bool {
	return sc.Target.Forward != nil || len(sc.Observe) > 0
}

// kubePath is what a run takes from Kubernetes: the clusters, the pod
// inventory of the observed workloads, the tunnel to the entry point, and
// the log followers of the observed pods.
type kubePath struct {
	sc       *scenarios.Scenario
	clusters map[string]*kube.Cluster
	inv      *kube.Inv
	tunnel   *kube.Tunnel
	logs     *logSource
	warnings []string
	// metricsBefore holds the first scrape of workloads with metrics.
	metricsBefore []*kube.Metrics
}

// openKube connects to every cluster the scenario uses, lists the observed
// pods and opens the tunnel. Every failure names the cluster and the call.
func openKube(ctx context.Context, sc *scenarios.Scenario, o Options) (*kubePath, error) {
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: o.Kubeconfig})
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	used := map[string]bool{}
	if f := sc.Target.Forward; f != nil {
		used[f.Cluster] = true
	}
	for _, w := range sc.Observe {
		for _, c := range w.Clusters {
			used[c] = true
		}
	}
	var refs []kube.ClusterRef
	for _, c := range sc.Clusters {
		if used[c.Name] {
			refs = append(refs, kube.ClusterRef{Name: c.Name, Context: c.Context})
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
	if len(sc.Observe) > 0 {
		var inCluster []*kube.Cluster
		for _, c := range cs {
			inCluster = append(inCluster, c)
		}
		kp.inv, err = kube.Inventory(ctx, inCluster, kp.workloads())
		if err != nil {
			return nil, err
		}
	}
	if f := sc.Target.Forward; f != nil {
		kp.tunnel, err = kube.OpenTunnel(ctx, kp.clusters[f.Cluster], kube.TunnelSpec{
			Namespace: f.Namespace, Resource: f.Resource, Port: f.Port, Observed: kp.workloads(),
		})
		if err != nil {
			return nil, err
		}
		kp.warnings = append(kp.warnings, kp.tunnel.Warnings()...)
	}
	return kp, nil
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

// logSource follows the logs of every observed pod with logs, from the
// attack start minus the skew, and joins matching lines to this run's
// requests by request id.
type logSource struct {
	follower *podlogs.Follower
	counter  *podlogs.Counter
	rules    map[string]podlogs.Rule // by workload name
	owner    map[string]string       // pod key -> workload name
	version  map[string]string       // pod key -> version label value
	mu       sync.Mutex
	done     chan struct{}
	settle   time.Duration
	lines    int64
}

func podKey(cluster, ns, pod string) string { return cluster + "/" + ns + "/" + pod }

// startLogs starts following; the watch keeps up with pods that appear,
// go or restart during the run.
func (kp *kubePath) startLogs(ctx context.Context, runID string, start time.Time) error {
	var withLogs []*scenarios.Workload
	for i := range kp.sc.Observe {
		if kp.sc.Observe[i].Logs != nil {
			withLogs = append(withLogs, &kp.sc.Observe[i])
		}
	}
	if len(withLogs) == 0 {
		return nil
	}
	clients := map[string]kubernetes.Interface{}
	for n, c := range kp.clusters {
		clients[n] = c.Client
	}
	skew, settle := withLogs[0].Logs.Skew.Duration, withLogs[0].Logs.Settle.Duration
	ls := &logSource{rules: map[string]podlogs.Rule{}, owner: map[string]string{}, version: map[string]string{},
		done: make(chan struct{}), settle: settle}
	mirrorTo := map[string]bool{}
	shadowOnly := map[string]bool{}
	for _, e := range kp.sc.Expect {
		if m := e.Mirror; m != nil {
			mirrorTo[m.To] = true
			shadowOnly[m.To] = m.Shadow != nil && *m.Shadow
		}
	}
	for _, w := range withLogs {
		re, err := regexp.Compile(w.Logs.Match)
		if err != nil {
			return fmt.Errorf("observe %s: logs.match: %w", w.Name, err)
		}
		ls.rules[w.Name] = podlogs.Rule{Regex: re}
		skew, settle = max(skew, w.Logs.Skew.Duration), max(settle, w.Logs.Settle.Duration)
	}
	ls.settle = settle
	ls.counter = podlogs.NewCounter(podlogs.CounterOptions{
		RunID: runID,
		From:  start.Add(-skew),
		// Copies are what the mirror target logs (only the -shadow host
		// ones when the expectation says so); elsewhere Envoy's suffix decides.
		Mirror: func(m podlogs.Match) bool {
			ls.mu.Lock()
			w := ls.owner[podKey(m.Line.Target.Cluster, m.Line.Target.Namespace, m.Line.Target.Pod)]
			ls.mu.Unlock()
			if mirrorTo[w] {
				return !shadowOnly[w] || m.Shadow
			}
			return m.Shadow
		},
	})
	pods := 0
	for _, w := range withLogs {
		pods += len(kp.observedPods(w))
	}
	// One limit across all clusters: every observed pod must get a stream
	// while the attack runs, not only in Settle's final pass.
	ls.follower = podlogs.NewFollower(podlogs.ClientGoOpener(clients), podlogs.Options{
		Since: start.Add(-skew), Settle: settle, Concurrency: max(64, 2*pods)})
	follow := func(p kube.Pod, w *scenarios.Workload) {
		ls.mu.Lock()
		ls.owner[podKey(p.Cluster, p.Namespace, p.Name)] = w.Name
		ls.version[podKey(p.Cluster, p.Namespace, p.Name)] = p.Version
		ls.mu.Unlock()
		ls.follower.Follow(ctx, podlogs.Target{Cluster: p.Cluster, Namespace: p.Namespace, Pod: p.Name, Container: w.Container})
	}
	byName := map[string]*scenarios.Workload{}
	for _, w := range withLogs {
		byName[w.Name] = w
		for _, p := range kp.observedPods(w) {
			follow(p, w)
		}
	}
	go func() {
		defer close(ls.done)
		for l := range ls.follower.Lines() {
			ls.mu.Lock()
			w := ls.owner[podKey(l.Target.Cluster, l.Target.Namespace, l.Target.Pod)]
			ls.lines++
			ls.mu.Unlock()
			if m, ok := ls.rules[w].Match(l); ok {
				ls.counter.Add(m)
			}
		}
	}()
	go func() {
		_ = kp.inv.Watch(ctx, func(ev kube.Event) {
			w := byName[ev.Pod.Workload]
			if w == nil {
				return
			}
			t := podlogs.Target{Cluster: ev.Pod.Cluster, Namespace: ev.Pod.Namespace, Pod: ev.Pod.Name, Container: w.Container}
			switch ev.Type {
			case kube.PodAdded:
				follow(ev.Pod, w)
			case kube.PodRestarted:
				ls.follower.Restarted(t)
			case kube.PodDeleted:
				// What it logged was read already; its log is gone now.
				ls.follower.Forget(t)
			}
		})
	}()
	kp.logs = ls
	return nil
}

// finish reads on after the attack until the logs stop growing.
func (ls *logSource) finish(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, ls.settle+time.Minute)
	defer cancel()
	err := ls.follower.Settle(ctx)
	<-ls.done
	return err
}

// tally builds the per-source counts of the logs: every request of this
// run seen served in a pod's log counts for that pod's cluster, pod and
// version, on the connection that carried it, so the same
// connection-aware statistics apply as for bodies.
func (ls *logSource) tally(start time.Time, grace time.Duration, seqConn []uint32) tally.Snapshot {
	t := tally.New(start, grace)
	ls.mu.Lock()
	version := maps.Clone(ls.version)
	ls.mu.Unlock()
	ls.counter.EachServed(func(seq uint64, tg podlogs.Target) {
		var conn uint64
		if seq < uint64(len(seqConn)) {
			conn = uint64(seqConn[seq])
		}
		t.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}, ConnID: conn},
			attribution.Identity{Cluster: tg.Cluster, Pod: tg.Pod, Version: version[podKey(tg.Cluster, tg.Namespace, tg.Pod)]})
	})
	// Apps that log no request id: their lines inside the attack window
	// count, as independent draws.
	for tg, pc := range ls.counter.Pods() {
		addIndependent(t, start, pc.NoID, attribution.Identity{Cluster: tg.Cluster, Pod: tg.Pod, Version: version[podKey(tg.Cluster, tg.Namespace, tg.Pod)]})
	}
	return t.Snapshot()
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
			m, err := kube.ScrapeVia(ctx, kp.clusters[p.Cluster], w.Metrics.Via, p.Namespace, p.Name, w.Metrics.Port, w.Metrics.Path)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			out = append(out, m)
		}
	}
	return out, errors.Join(errs...)
}

// metricsTally turns the counter deltas per pod into counts.
func (kp *kubePath) metricsTally(after []*kube.Metrics, start time.Time) tally.Snapshot {
	t := tally.New(start, time.Second)
	version := map[string]string{}
	if kp.inv != nil {
		for _, p := range kp.inv.Pods() {
			version[podKey(p.Cluster, p.Namespace, p.Name)] = p.Version
		}
	}
	for i := range kp.sc.Observe {
		w := &kp.sc.Observe[i]
		if w.Metrics == nil {
			continue
		}
		for _, d := range kube.Delta(kp.metricsBefore, after, w.Metrics.Counter, w.Metrics.Labels) {
			addIndependent(t, start, int(d.Delta+0.5), attribution.Identity{Cluster: d.Cluster, Pod: d.Pod, Version: version[podKey(d.Cluster, d.Namespace, d.Pod)]})
		}
	}
	return t.Snapshot()
}

// unknownPods lists pod names the responses named that the inventory does
// not know: reported, never guessed into a cluster.
func (kp *kubePath) unknownPods(s tally.Snapshot) []string {
	if kp == nil || kp.inv == nil {
		return nil
	}
	var out []string
	for _, b := range s.Dimensions[string(attribution.Pod)].Buckets {
		if len(kp.inv.Lookup(b)) == 0 {
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
			Target string           `json:"target"`
			Pod    kube.PodRef      `json:"pod"`
			Stats  kube.TunnelStats `json:"stats"`
		}{kp.tunnel.Target().String(), kp.tunnel.Pod(), kp.tunnel.Stats()}
	}
	if kp.logs != nil {
		for t, st := range kp.logs.follower.Stats() {
			ls := reports.LogStream{Target: t.String(), Lines: st.Lines, Reconnects: int64(st.Reconnects)}
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
