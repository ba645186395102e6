package runner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"regexp"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/judge"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/podlogs"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// logSource follows the logs of every observed workload with logs and
// counts their lines for the run: joined to its requests by request id,
// or counted in the attack window less each pod's background (README.md,
// counting without request ids).
type logSource struct {
	kp        *kubePath
	follower  *podlogs.Follower
	counter   *podlogs.Counter
	workloads map[string]*scenarios.Workload // with logs, by name
	rules     map[string]podlogs.Rule
	checks    map[string]*podlogs.RuleCheck
	// window is [attack start − skew, attack end + settle]; finish sets To.
	window podlogs.Window
	settle time.Duration
	// attackStart is the attack's own start (its end is window.To less
	// settle): how many seconds a rule's missed lines must fill follows
	// the attack's length.
	attackStart time.Time
	done        chan struct{}
	// copiesOnly: every observed workload is a mirror target whose lines
	// are all copies (mirror.shadow false), so no served request is logged.
	copiesOnly bool

	mu sync.Mutex
	// owner maps a pod key to the workload whose rule counts its lines:
	// the followed pods, and the upstream pods an access log named.
	owner map[string]string
	// leftOut counts, per workload, lines whose upstream address names no
	// single pod or cluster (toUpstream), with the first one's reason.
	leftOut    map[string]int64
	leftOutWhy map[string]string
	// viaGateway counts, per workload, lines counted for the cluster behind
	// a network gateway.
	viaGateway map[string]int64
}

func podKey(cluster, ns, pod string) string { return cluster + "/" + ns + "/" + pod }

func targetKey(t podlogs.Target) string { return podKey(t.Cluster, t.Namespace, t.Pod) }

// start follows the observed pods' logs and watches the inventory, which
// keeps up with pods that appear, go or restart during the run: the logs
// follow them, and names in responses resolve against them.
func (kp *kubePath) start(ctx context.Context, runID string, start time.Time) error {
	if kp.inv == nil {
		return nil
	}
	ls, err := kp.newLogSource(runID, start)
	if err != nil {
		return err
	}
	if ls != nil {
		kp.discoverGateways(ctx)
	}
	// The watch is running before the attack, or the run is a setup error
	// (README.md, RBAC: a denied watch names itself).
	err = kp.inv.StartWatch(ctx, func(ev kube.Event) {
		if ls != nil {
			ls.onEvent(ctx, ev)
		}
	})
	if err != nil {
		return err
	}
	if ls != nil {
		for _, w := range ls.workloads {
			for _, p := range kp.observedPods(w) {
				ls.follow(ctx, p, w)
			}
		}
		go ls.consume()
	}
	kp.logs = ls
	return nil
}

// checkLogAccess reads one byte of one pod's log per workload with logs
// and cluster: a log the run may not read is a setup error before the
// attack, not a log source that counts nothing (README.md, RBAC).
func (kp *kubePath) checkLogAccess(ctx context.Context) error {
	var errs []error
	for i := range kp.sc.Observe {
		w := &kp.sc.Observe[i]
		if w.Logs == nil {
			continue
		}
		n := w.Name
		checked := map[string]bool{}
		for _, p := range kp.observedPods(w) {
			if checked[p.Cluster] {
				continue
			}
			checked[p.Cluster] = true
			t := logTarget(p, w)
			if err := access.CheckLogAccess(ctx, kp.clusters[p.Cluster], t.Namespace, t.Pod, t.Container); err != nil {
				errs = append(errs, fmt.Errorf("observe %s: %w", n, err))
			}
		}
	}
	return errors.Join(errs...)
}

func (kp *kubePath) newLogSource(runID string, start time.Time) (*logSource, error) {
	ls := &logSource{kp: kp, workloads: map[string]*scenarios.Workload{}, rules: map[string]podlogs.Rule{},
		checks: map[string]*podlogs.RuleCheck{}, owner: map[string]string{}, leftOut: map[string]int64{},
		leftOutWhy: map[string]string{}, viaGateway: map[string]int64{},
		done: make(chan struct{})}
	var skew, background time.Duration
	pods := 0
	for i := range kp.sc.Observe {
		w := &kp.sc.Observe[i]
		if w.Logs == nil {
			continue
		}
		re, err := regexp.Compile(w.Logs.Match)
		if err != nil {
			return nil, fmt.Errorf("observe %s: logs.match: %w", w.Name, err)
		}
		rule := podlogs.NewRule(re)
		if w.Logs.Exclude != "" {
			if rule.Exclude, err = regexp.Compile(w.Logs.Exclude); err != nil {
				return nil, fmt.Errorf("observe %s: logs.exclude: %w", w.Name, err)
			}
		}
		ls.workloads[w.Name], ls.rules[w.Name] = w, rule
		skew, ls.settle = max(skew, w.Logs.Skew.Duration), max(ls.settle, w.Logs.Settle.Duration)
		background = max(background, logBackground(w))
		pods += len(kp.observedPods(w))
	}
	if len(ls.workloads) == 0 {
		return nil, nil
	}
	ls.window = podlogs.Window{From: start.Add(-skew), Since: kp.podStart}
	ls.attackStart = start
	for name, w := range ls.workloads {
		ls.checks[name] = podlogs.NewRuleCheck(ls.window.From)
		if p, ok := presetOf(w); ok && p.Opposite != "" {
			ls.checks[name].WithOpposite(regexp.MustCompile(p.Opposite))
		}
	}
	mirrorTo, shadowOnly := map[string]bool{}, map[string]bool{}
	for _, m := range judge.Mirrors(kp.sc) {
		mirrorTo[m.To] = true
		shadowOnly[m.To] = m.Shadow != nil && *m.Shadow
	}
	ls.copiesOnly = true
	for w := range ls.workloads {
		ls.copiesOnly = ls.copiesOnly && mirrorTo[w] && !shadowOnly[w]
	}
	codes := kp.sc.Attack.SuccessCodes
	ls.counter = podlogs.NewCounter(podlogs.CounterOptions{
		RunID: runID,
		// Copies are what the mirror target logs (only the -shadow host
		// ones when the expectation says so); elsewhere Envoy's suffix decides.
		Mirror: func(m podlogs.Match) bool {
			w := ls.ownerOf(m.Line.Target)
			if mirrorTo[w] {
				return !shadowOnly[w] || m.Shadow
			}
			return m.Shadow
		},
		// The join through the data plane's ids pairs the target's copies
		// with primaries served elsewhere, not with the target's own.
		Primary: func(m podlogs.Match) bool { return !mirrorTo[ls.ownerOf(m.Line.Target)] },
		// A request id repeats within a workload's lines per attempt of a
		// retry; across workloads it is each one's request.
		Group:   func(m podlogs.Match) string { return ls.ownerOf(m.Line.Target) },
		Success: codes.Contains,
	})
	clients := map[string]kclient.Interface{}
	for n, c := range kp.clusters {
		clients[n] = c.Client
	}
	// One limit across all clusters: every observed pod must get a stream
	// while the attack runs, not only in Settle's final pass. Streams start
	// a background period early, so that each pod's usual rate is known.
	ls.follower = podlogs.NewFollower(podlogs.ClientGoOpener(clients), podlogs.Options{
		Since: ls.window.From.Add(-background), Settle: ls.settle, Concurrency: max(64, 2*pods)})
	return ls, nil
}

// logBackground is how long before the window a workload's background is
// measured (0: not at all).
// logSkew is how far before the attack the logs' window opens: the
// largest skew of the workloads whose logs are read, 0 when none is.
func logSkew(sc *scenarios.Scenario) time.Duration {
	var skew time.Duration
	for _, w := range sc.Observe {
		if w.Logs != nil {
			skew = max(skew, w.Logs.Skew.Duration)
		}
	}
	return skew
}

func logBackground(w *scenarios.Workload) time.Duration {
	if w.Logs == nil || w.Logs.Background == nil {
		return 0
	}
	return w.Logs.Background.Duration
}

func (ls *logSource) follow(ctx context.Context, p kube.Pod, w *scenarios.Workload) {
	ls.mu.Lock()
	ls.owner[podKey(p.Cluster, p.Namespace, p.Name)] = w.Name
	ls.mu.Unlock()
	ls.follower.Follow(ctx, logTarget(p, w))
}

// logTarget is the log a workload reads of a pod: its container, else the
// pod's default container as kubectl picks it (a pod with a sidecar has two,
// and the API refuses to guess).
func logTarget(p kube.Pod, w *scenarios.Workload) podlogs.Target {
	return podlogs.Target{Cluster: p.Cluster, Namespace: p.Namespace, Pod: p.Name, Container: cmp.Or(w.Container, p.DefaultContainer)}
}

func (ls *logSource) onEvent(ctx context.Context, ev kube.Event) {
	w := ls.workloads[ev.Pod.Workload]
	if w == nil {
		return
	}
	t := logTarget(ev.Pod, w)
	switch ev.Type {
	case kube.PodAdded:
		ls.follow(ctx, ev.Pod, w)
	case kube.PodRestarted:
		ls.follower.Restarted(t)
	case kube.PodDeleted:
		// A deleted pod serves and logs through its grace period: read on
		// until its log ends, so those requests are counted too.
		ls.follower.Deleted(t)
	}
}

func (ls *logSource) ownerOf(t podlogs.Target) string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	return ls.owner[targetKey(t)]
}

// consume matches every line with its workload's rule and counts it.
func (ls *logSource) consume() {
	defer close(ls.done)
	for l := range ls.follower.Lines() {
		ls.take(l)
	}
}

// take matches one line with its workload's rule and counts it, for the
// pod or cluster its upstream address names.
func (ls *logSource) take(l podlogs.Line) {
	w := ls.ownerOf(l.Target)
	m, ok := ls.rules[w].Match(l)
	if c := ls.checks[w]; c != nil {
		c.Note(l, m, ok)
	}
	if !ok || (m.Upstream != "" && !ls.toUpstream(&m, w)) {
		return
	}
	ls.counter.Add(m)
}

// toUpstream counts a line for who its upstream address names (a
// gateway's or a caller's access log of the requests it sent): a pod of
// the logging pod's network, or the cluster behind a network gateway
// (Istio's east-west gateway, gatewayIP:15443, for a request served on
// another network). An inbound line (loopback, the pod's own IP) stays
// the logging pod's. An address that resolves to no single pod or
// cluster leaves the line out, counted as such: giving it to the logging
// pod would count a request served elsewhere for the caller's cluster.
func (ls *logSource) toUpstream(m *podlogs.Match, w string) bool {
	own := m.Line.Target
	u := ls.kp.inv.ResolveUpstream(own.Cluster, own.Namespace, own.Pod, m.Upstream)
	switch u.Kind {
	case kube.UpstreamOwn:
		return true
	case kube.UpstreamPod:
		if u.Pod.Cluster == own.Cluster && u.Pod.Namespace == own.Namespace && u.Pod.Name == own.Pod {
			return true
		}
		m.Line.Target = podlogs.Target{Cluster: u.Pod.Cluster, Namespace: u.Pod.Namespace, Pod: u.Pod.Name}
	case kube.UpstreamCluster:
		// The serving pod is unknown: one target per cluster and gateway
		// holds these lines, with an empty pod name.
		m.Line.Target = podlogs.Target{Cluster: u.Cluster, Namespace: u.Gateway.Namespace}
	default:
		ls.mu.Lock()
		ls.leftOut[w]++
		if ls.leftOutWhy[w] == "" {
			ls.leftOutWhy[w] = u.Reason
		}
		ls.mu.Unlock()
		return false
	}
	ls.mu.Lock()
	if u.Kind == kube.UpstreamCluster {
		ls.viaGateway[w]++
	}
	if _, known := ls.owner[targetKey(m.Line.Target)]; !known {
		ls.owner[targetKey(m.Line.Target)] = w
	}
	ls.mu.Unlock()
	return true
}

// regenerated says, for a rule that reads request ids, when its lines
// carry ids but none of this run's: the join by id is impossible, and the
// lines count in the attack window instead (README.md, counting without
// request ids). An edge proxy makes up the ids (Istio's gateways since
// 1.25 regenerate x-request-id for every request from outside the mesh;
// Kuma's MeshGateway too), or an app in between forwards none.
func regenerated(name string, w *scenarios.Workload, pods map[podlogs.Target]podlogs.PodCount, owners map[string]string) string {
	re, err := regexp.Compile(w.Logs.Match)
	if err != nil || (re.SubexpIndex("request_id") < 0 && re.SubexpIndex("rid") < 0) {
		return ""
	}
	other, ours := 0, 0
	for t, pc := range pods {
		if owners[targetKey(t)] == name {
			other += pc.OtherIDs
			ours += pc.Requests + pc.Mirrored + pc.Failed + pc.Duplicates + pc.Attempts
		}
	}
	if other == 0 || ours > 0 {
		return ""
	}
	return fmt.Sprintf("observe %s: its %d lines with a request id carry none of this run's: the ids were made up on the way (an ingress gateway regenerates x-request-id for requests from outside the mesh: Istio 1.25 and later always, Kuma's MeshGateway too; or an app in between forwards no header), so its lines are not joined to the requests but counted in the attack window, less the background. To join by id, send the attack through the sidecars, not a gateway, or keep the gateway's id (Istio: preserve_external_request_id through an EnvoyFilter)", name, other)
}

// readsUpstream reports whether a log rule captures the upstream address
// (an outbound access log's): its lines may name a network gateway.
func readsUpstream(l *scenarios.LogSource) bool {
	if l == nil {
		return false
	}
	re, err := regexp.Compile(l.Match)
	return err == nil && re.SubexpIndex("upstream") >= 0
}

// discoverGateways reads every cluster's network gateways when a log rule
// reads upstream addresses, so that ResolveUpstream knows them. A cluster
// whose gateways cannot be listed (RBAC) is a warning: lines naming its
// gateway are then left out, never counted for the caller's cluster.
func (kp *kubePath) discoverGateways(ctx context.Context) {
	if !slices.ContainsFunc(kp.sc.Observe, func(w scenarios.Workload) bool { return readsUpstream(w.Logs) }) {
		return
	}
	var gws []kube.Gateway
	for _, name := range kp.inv.Clusters() {
		g, err := kube.EastWestGateways(ctx, kp.clusters[name])
		if err != nil {
			kp.warnings = append(kp.warnings, fmt.Sprintf("network gateways of cluster %s are unknown (%v): access-log lines whose upstream is a gateway are left out", name, err))
			continue
		}
		gws = append(gws, g...)
	}
	kp.inv.SetGateways(gws)
}

// finish reads on after the attack until the logs stop growing; lines
// after the window's end no longer hold it (an access log's probes).
func (ls *logSource) finish(ctx context.Context, end time.Time) error {
	ls.window.To = end.Add(ls.settle)
	ls.follower.SetUntil(ls.window.To)
	ctx, cancel := context.WithTimeout(ctx, ls.settle+time.Minute)
	defer cancel()
	err := ls.follower.Settle(ctx)
	<-ls.done
	return err
}

// logEvidence is what the logs say beyond the counts: the joins for the
// mirror expectations and the reconciliation with the requests answered.
type logEvidence struct {
	totals podlogs.Totals
	pods   map[podlogs.Target]podlogs.PodCount
	owner  map[podlogs.Target]string
	// idMode is set for workloads whose lines carry the run's request ids:
	// they are joined by id, and their lines without one are not counted.
	idMode map[string]bool
	recon  *reports.Reconciliation
	// slack is the slack of the reconciliation, for the mirror's.
	slack float64
	// unread names, per workload, a pod whose log could not be read at
	// all, and why: its copies or requests are unknown, not zero.
	unread map[string]string
	// copiesOnly: every observed workload is a mirror target whose lines
	// are all copies, so the logs count no served request at all.
	copiesOnly bool
	// leftOut counts the lines left out because their upstream address
	// named no single pod or cluster.
	leftOut int64
}

// evidence turns the counts into the logs' tally: every request of this
// run seen served counts for that pod's cluster, pod and version, on the
// connection that carried it, so the same connection-aware statistics
// apply as for bodies; lines without a request id count in the window,
// less the background, as independent draws. Failed lines (a failing
// status) count as that pod's errors.
func (ls *logSource) evidence(start time.Time, grace time.Duration, seqConn []uint32, answered, failed int64) (tally.Snapshot, *logEvidence) {
	le := &logEvidence{pods: map[podlogs.Target]podlogs.PodCount{}, owner: map[podlogs.Target]string{}, idMode: map[string]bool{},
		unread: map[string]string{}}
	ls.mu.Lock()
	owners := make(map[string]string, len(ls.owner))
	for k, v := range ls.owner {
		owners[k] = v
	}
	ls.mu.Unlock()
	for name, w := range ls.workloads {
		win := ls.window
		win.Background = logBackground(w)
		for t, pc := range ls.counter.Pods(win) {
			if owners[targetKey(t)] != name {
				continue
			}
			le.pods[t], le.owner[t] = pc, name
			if pc.Requests+pc.Mirrored+pc.Failed > 0 {
				le.idMode[name] = true
			}
		}
	}
	le.totals = ls.counter.Totals(ls.window)
	for t, st := range ls.follower.Stats() {
		w := owners[targetKey(t)]
		if w == "" || ls.workloads[w] == nil {
			continue
		}
		if st.Lines == 0 && st.LastError != nil && le.unread[w] == "" {
			le.unread[w] = fmt.Sprintf("the log of pod %s could not be read: %v", t, st.LastError)
		}
		// A pod read without one matching line counted nothing: it is in
		// the evidence with zeros (a mirror target that got no copy is a
		// 0%, not an unobserved workload).
		if _, seen := le.pods[t]; !seen {
			le.pods[t], le.owner[t] = podlogs.PodCount{}, w
		}
	}
	le.copiesOnly = ls.copiesOnly
	ls.mu.Lock()
	for _, n := range ls.leftOut {
		le.leftOut += n
	}
	ls.mu.Unlock()

	t := tally.New(start, grace)
	// A target's identity is looked up in the inventory once, not once
	// per request it served.
	ids := map[podlogs.Target]attribution.Identity{}
	ls.counter.EachServed(func(seq uint64, tg podlogs.Target) {
		var conn uint64
		if seq < uint64(len(seqConn)) {
			conn = uint64(seqConn[seq])
		}
		id, ok := ids[tg]
		if !ok {
			id = ls.kp.identity(tg)
			ids[tg] = id
		}
		t.Add(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start}, ConnID: conn}, id)
	})
	for tg, pc := range le.pods {
		id := ls.kp.identity(tg)
		if le.idMode[le.owner[tg]] {
			addFailed(t, start, pc.Failed, id)
			continue
		}
		addIndependent(t, start, netCount(pc.Served), id)
		addFailed(t, start, netCount(pc.Errors), id)
	}
	le.slack = slack(answered)
	le.recon = reconcileLogs(le, answered, failed)
	return t.Snapshot(), le
}

// perSecond is what the observed workloads' pods logged served, per
// cluster and second.
func (ls *logSource) perSecond() map[string]map[int64]int {
	ls.mu.Lock()
	owned := make(map[string]bool, len(ls.owner))
	for k, v := range ls.owner {
		owned[k] = ls.workloads[v] != nil
	}
	ls.mu.Unlock()
	out := map[string]map[int64]int{}
	for tg, secs := range ls.counter.ServedPerSecond() {
		if !owned[targetKey(tg)] {
			continue
		}
		c := ls.kp.identity(tg).Cluster
		if out[c] == nil {
			out[c] = map[int64]int{}
		}
		for sec, n := range secs {
			out[c][sec] += n
		}
	}
	return out
}

// netCount is a class's lines less the background, as whole requests.
func netCount(c podlogs.ClassCount) int { return int(math.Round(max(c.Net(), 0))) }

// ruleReports says what each workload's log rule made of its lines, and
// names the rules that miss the request lines (README.md, configuration
// errors): they matched nothing while the pods logged more in the window
// than their background explains.
func (ls *logSource) ruleReports(answered int64) ([]reports.RuleReport, []reports.ConfigError, []string) {
	var out []reports.RuleReport
	var errs []reports.ConfigError
	var warnings []string
	names := make([]string, 0, len(ls.workloads))
	for n := range ls.workloads {
		names = append(names, n)
	}
	sort.Strings(names)
	ls.mu.Lock()
	leftOut, why, via := maps.Clone(ls.leftOut), maps.Clone(ls.leftOutWhy), maps.Clone(ls.viaGateway)
	owners := maps.Clone(ls.owner)
	ls.mu.Unlock()
	// silent: every rule is a sidecar preset and none matched a line.
	silent := len(names) > 0
	for _, name := range names {
		w := ls.workloads[name]
		win := ls.window
		win.Background = logBackground(w)
		st := ls.checks[name].Stats(win)
		rule := fmt.Sprintf("observe %s logs.match %s", name, w.Logs.Match)
		if w.Logs.Preset != "" && w.Logs.Match == presetMatch(w.Logs.Preset) {
			rule = fmt.Sprintf("observe %s logs.preset %s", name, w.Logs.Preset)
		}
		out = append(out, reports.RuleReport{Source: scenarios.SourceLogs, Rule: rule, Read: st.Read, Matched: st.Matched,
			Excluded: st.Excluded, Samples: st.Samples})
		if p, ok := presetOf(w); !ok || p.Direction == "" || st.Matched > 0 {
			silent = false
		}
		if ce, ok := oppositeSide(name, w, st); ok {
			silent = false
			errs = append(errs, ce)
		} else if st.Missed(max(5, 0.01*float64(answered)), podlogs.MissedNeeds(ls.attackStart, ls.window.To.Add(-ls.settle))) {
			errs = append(errs, reports.ConfigError{
				Subject: fmt.Sprintf("observe %s: %s", name, ruleField(w)),
				Message: fmt.Sprintf("the rule matched none of the %d lines read, while the pods logged %d lines in %d seconds of the attack window, %.0f more than their background explains: it misses the lines of the requests. Fix the regex (or the container: %s) against the lines it did not match",
					st.Read, st.Lines.Window, st.Seconds, st.Lines.Net(), containerName(w)),
				Samples: st.Samples,
			})
		}
		if msg := regenerated(name, w, ls.counter.Pods(win), owners); msg != "" {
			warnings = append(warnings, msg)
		}
		if n := leftOut[name]; n > 0 {
			warnings = append(warnings, fmt.Sprintf("observe %s: %d log lines were left out, not counted for any cluster: their upstream address names no single observed pod or network gateway (first: %s); observe the workload that serves them so the inventory knows its pods' addresses", name, n, why[name]))
		}
		if n := via[name]; n > 0 {
			warnings = append(warnings, fmt.Sprintf("observe %s: %d log lines name a network gateway as upstream: they count for the cluster behind it, with the serving pod unknown", name, n))
		}
	}
	if n := ls.counter.Totals(ls.window).Doubled; n > 0 {
		warnings = append(warnings, fmt.Sprintf("%d requests were answered by two pods of one observed workload with no failed attempt (the same request id, both successful): Envoy retries only after a failure, so these are mirrored copies the proxy did not mark (Istio 1.28 and later drop the -shadow suffix by default) or hedged requests. Each counts once, for the first line read; declare the mirror (expect mirror.to naming the target's workload, observed apart) so that copies are told by the target's pods", n))
	}
	if silent && answered >= 10 {
		warnings = append(warnings, fmt.Sprintf("no observed sidecar logged an access-log line of the side its preset counts, while %d requests were answered: if these pods served them, the mesh logs no such lines (access logging off, or one side only: Kuma's TrafficLog and a MeshAccessLog with only spec.to log outbound; Istio's Telemetry accessLogging match.mode); docs/real-apps.md says which preset reads which side", answered))
	}
	return out, errs, warnings
}

// presetOf is the preset a workload's rule is, when it is one unchanged.
func presetOf(w *scenarios.Workload) (podlogs.Preset, bool) {
	if w.Logs == nil || w.Logs.Preset == "" {
		return podlogs.Preset{}, false
	}
	p, err := podlogs.LookupPreset(w.Logs.Preset)
	if err != nil || p.Match != w.Logs.Match {
		return podlogs.Preset{}, false
	}
	return p, true
}

// oppositeSide is the configuration error of a proxy preset whose pods
// log only the other side of their traffic (at least MissedSeconds such
// lines, none of the preset's side): the mesh logs one side, and the
// count would be empty for that reason, not for want of requests.
func oppositeSide(name string, w *scenarios.Workload, st podlogs.RuleStats) (reports.ConfigError, bool) {
	p, ok := presetOf(w)
	if !ok || p.Opposite == "" || st.Matched > 0 || st.Opposite < podlogs.MissedSeconds {
		return reports.ConfigError{}, false
	}
	other := "outbound"
	if p.Direction == "outbound" {
		other = "inbound"
	}
	return reports.ConfigError{
		Subject: fmt.Sprintf("observe %s: logs.preset %s", name, w.Logs.Preset),
		Message: fmt.Sprintf("the preset counts %s access-log lines, and the pods logged none, but %d %s ones: %s",
			p.Direction, st.Opposite, other, p.OnlyOpposite),
		Samples: st.Samples,
	}, true
}

func presetMatch(name string) string {
	p, err := podlogs.LookupPreset(name)
	if err != nil {
		return ""
	}
	return p.Match
}

func ruleField(w *scenarios.Workload) string {
	if w.Logs.Preset != "" && w.Logs.Match == presetMatch(w.Logs.Preset) {
		return "logs.preset " + w.Logs.Preset
	}
	return "logs.match"
}

func containerName(w *scenarios.Workload) string {
	if w.Container == "" {
		return "the pod's default container is read"
	}
	return "container " + w.Container + " is read"
}

// addFailed counts n failed requests of one identity, as independent draws.
func addFailed(t *tally.Tally, at time.Time, n int, id attribution.Identity) {
	r := &attack.Result{Result: &vegeta.Result{Code: 500, Timestamp: at, Error: "failing status in the log"}}
	for range n {
		t.Add(r, id)
	}
}

// targetsOf lists the targets of a workload, sorted.
func (le *logEvidence) targetsOf(workload string) []podlogs.Target {
	var out []podlogs.Target
	for t, w := range le.owner {
		if w == workload {
			out = append(out, t)
		}
	}
	slices.SortFunc(out, func(a, b podlogs.Target) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Pod, b.Pod))
	})
	return out
}
