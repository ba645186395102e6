package measure

import (
	"context"
	"fmt"
	"net"
	"slices"
	"time"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Target is where an attack's requests go: the URL and, when set, the
// dialer that reaches it (a tunnel, a connect-to list) instead of TCP.
type Target struct {
	URL  string
	Dial attack.DialFunc
}

// Prepared is what every attack of a scenario needs, built once: the
// attack, its options, the attributor of its responses and whether the
// target's certificate goes unverified. A local run and a distributed
// worker prepare theirs alike, so a worker attacks exactly as a local run
// does.
type Prepared struct {
	Attack     *attack.Attack
	Options    attack.Options
	Attributor *attribution.Attributor
	// Insecure: target.tls.insecureSkipVerify, which the report says.
	Insecure bool
}

// Prepare builds the attack of sc on t for runID: the attack options, the
// target's TLS, the attributor (with res, the inventory's resolver, when
// there is one) and, when the target is dialled directly, the preflight
// that makes an unreachable target one *SetupError. abort, when it ends,
// cuts requests in flight short.
func Prepare(ctx context.Context, sc *scenarios.Scenario, t Target, runID string, abort context.Context, res attribution.Resolver) (*Prepared, error) {
	ao := AttackConfig(sc, t.URL, runID)
	ao.Dial = t.Dial
	tlsCfg, insecure, err := targetTLS(sc)
	if err != nil {
		return nil, err
	}
	ao.TLS = tlsCfg
	ao.Abort = abort
	attr, err := attributor(sc)
	if err != nil {
		return nil, err
	}
	if res != nil {
		attr.WithResolver(res)
	}
	if t.Dial == nil {
		if err := preflight(ctx, t.URL, ao.Timeout, tlsCfg); err != nil {
			return nil, &SetupError{err}
		}
	}
	atk, err := attack.New(ao)
	if err != nil {
		return nil, err
	}
	return &Prepared{Attack: atk, Options: ao, Attributor: attr, Insecure: insecure}, nil
}

// AttackOptions are the inputs of Attack that a scenario does not carry:
// a distributed worker's run id, address, start and inventory
// (docs/distributed.md, The worker).
type AttackOptions struct {
	// RunID prefixes every request id: <RunID>-<seq>. Required.
	RunID string
	// Target is the URL attacked; empty means the scenario's target.url.
	Target string
	// Start is the tally's start, where its time slices begin, so that
	// processes given the same start have aligned slices; zero means when
	// Attack is called. Attack does not wait for it.
	Start time.Time
	// Dial reaches the target instead of a direct TCP dial (a connect-to
	// list, attack.ConnectTo); with it there is no preflight, as in Run.
	Dial attack.DialFunc
	// Resolver maps a pod (or address) a response names to its cluster
	// and version, as the inventory does in a local run; nil for none.
	Resolver attribution.Resolver
	// OnInterval, when set, receives the tally's cumulative state and the
	// attribution rules' statistics every Every while the attack runs (on
	// a goroutine of its own, one call at a time); it is not called after
	// Attack returns.
	OnInterval func(tally.State, attribution.Stats)
	Every      time.Duration
	// Phase shifts the calls: they come at Phase + k·Every after the
	// attack's start (k ≥ 1), so that workers started together do not
	// all report in the same instant (fleet.RecordPhase). 0 ≤ Phase < Every.
	Phase time.Duration
	// Record, when set, receives every result as it is counted, as a local
	// run's recorder does (a worker's fleet.ResultBuffer).
	Record Recorder
	// Abort, AttributionWorkers and AttributionQueue are as in Queue.
	Abort              context.Context
	AttributionWorkers int
	AttributionQueue   int64
}

// AttackResult is what Attack measured.
type AttackResult struct {
	Summary attack.Summary
	// State is the tally's complete cumulative state, every result counted.
	State tally.State
	// Rules are the attribution rules' statistics over every result.
	Rules attribution.Stats
	// Warnings say what made the numbers less than asked for (rate not
	// achieved, bodies not attributed, responses truncated), as a report's
	// warnings would.
	Warnings []string
}

// MinInterval bounds AttackOptions.Every from below: every state costs a
// tally snapshot, and a worker's records are read by a coordinator.
const MinInterval = 100 * time.Millisecond

// Attack runs the scenario's attack, attribution and tally, and nothing
// else: no Kubernetes, no judging, no report. It is the part of a run a
// distributed worker runs (same attack options, same sink, same tally);
// the coordinator judges the merged states. ctx ending stops the attack
// (requests in flight finish and are counted) and Attack returns what was
// measured; err is a *SetupError when the target cannot be reached.
func Attack(ctx context.Context, sc *scenarios.Scenario, o AttackOptions) (AttackResult, error) {
	if o.RunID == "" {
		return AttackResult{}, fmt.Errorf("measure: attack without a run id")
	}
	if o.AttributionWorkers < 0 || o.AttributionQueue < 0 {
		return AttackResult{}, fmt.Errorf("measure: attribution workers %d, queue %d bytes: want positive numbers (0: the defaults)", o.AttributionWorkers, o.AttributionQueue)
	}
	if o.OnInterval != nil && o.Every < MinInterval {
		return AttackResult{}, fmt.Errorf("measure: interval %s: want at least %s", o.Every, MinInterval)
	}
	if o.OnInterval != nil && (o.Phase < 0 || o.Phase >= o.Every) {
		return AttackResult{}, fmt.Errorf("measure: interval phase %s: want 0 to less than the interval %s", o.Phase, o.Every)
	}
	target := o.Target
	if target == "" {
		target = sc.Target.URL
	}
	p, err := Prepare(ctx, sc, Target{URL: target, Dial: o.Dial}, o.RunID, o.Abort, o.Resolver)
	if err != nil {
		return AttackResult{}, err
	}
	atk, ao, attr := p.Attack, p.Options, p.Attributor
	start := o.Start
	if start.IsZero() {
		start = time.Now()
	}
	tl := tally.New(start, ao.Timeout+5*time.Second)
	if attr.Empty() {
		tl.DisableSamples()
	}
	sink := newSink(attr, tl, sc.Attack.SuccessCodes, o.RunID, o.Record,
		Queue{Workers: o.AttributionWorkers, Bytes: o.AttributionQueue, Abort: o.Abort})

	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	ticking := make(chan struct{})
	if o.OnInterval != nil {
		go func() {
			defer close(ticking)
			if o.Phase > 0 {
				select {
				case <-runCtx.Done():
					return
				case <-time.After(o.Phase):
				}
			}
			tick := time.NewTicker(o.Every)
			defer tick.Stop()
			for {
				select {
				case <-runCtx.Done():
					return
				case <-tick.C:
					o.OnInterval(tl.State(), attr.Stats())
				}
			}
		}()
	} else {
		close(ticking)
	}
	sink.start()
	sum := atk.Run(runCtx, sink)
	sink.close()
	stop()
	<-ticking
	sum.Interrupted = ctx.Err() != nil

	res := AttackResult{Summary: sum, State: tl.State(), Rules: attr.Stats()}
	qs := sink.stats()
	for _, w := range []string{behindRate(sum, qs), unreadWarning(qs, sc.Attack.MaxBody)} {
		if w != "" {
			res.Warnings = append(res.Warnings, w)
		}
	}
	if p.Insecure {
		res.Warnings = append(res.Warnings, "the target's TLS certificate was not verified (target.tls.insecureSkipVerify: true)")
	}
	if sum.Truncated > 0 {
		res.Warnings = append(res.Warnings, fmt.Sprintf("%d responses were longer than attack.maxBody (%s) by more than %d KiB and closed their connection",
			sum.Truncated, sc.Attack.MaxBody, attack.DrainLimit>>10))
	}
	return res, nil
}

// PodIndex resolves pod names and addresses from a list of pods (a
// distributed worker's inventory.json, docs/distributed.md) with the
// rules of a local run's inventory (IdentityOf, OnlyPod): a name or an IP
// that pods of several clusters share resolves to nothing, never to a
// guess. The pods are indexed once: responses are resolved per request.
type PodIndex struct{ byName, byIP map[string][]kube.Pod }

// NewPodIndex indexes pods.
func NewPodIndex(pods []kube.Pod) *PodIndex {
	x := &PodIndex{byName: map[string][]kube.Pod{}, byIP: map[string][]kube.Pod{}}
	for _, p := range pods {
		x.byName[p.Name] = append(x.byName[p.Name], p)
		for _, ip := range append([]string{p.IP}, p.IPs...) {
			if ip != "" && !slices.ContainsFunc(x.byIP[ip], func(q kube.Pod) bool { return q.Key() == p.Key() }) {
				x.byIP[ip] = append(x.byIP[ip], p)
			}
		}
	}
	return x
}

// ByPod implements attribution.Resolver.
func (x *PodIndex) ByPod(name string) (attribution.Identity, bool) {
	return IdentityOf(name, x.byName[name])
}

// ByAddress implements attribution.Resolver; the port is left out.
func (x *PodIndex) ByAddress(addr string) (attribution.Identity, bool) {
	p, ok := OnlyPod(x.byIP[AddressHost(addr)])
	if !ok {
		return attribution.Identity{}, false
	}
	return attribution.Identity{Cluster: p.Cluster, Pod: p.Name, Version: p.Version}, true
}

// AddressHost is an address without its port.
func AddressHost(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// OnlyPod is the one pod among matches (the same pod listed twice counts
// once); ok is false for none or several.
func OnlyPod(matches []kube.Pod) (kube.Pod, bool) {
	var found kube.Pod
	n := 0
	for _, p := range matches {
		if n > 0 && p.Key() == found.Key() {
			continue
		}
		found = p
		n++
	}
	return found, n == 1
}

// IdentityOf is who the pods named name are: their cluster when exactly
// one cluster has such a pod (bare pods may share a name across
// clusters: the caller then reports the name instead of guessing), with
// the version label one of them carries.
func IdentityOf(name string, matches []kube.Pod) (attribution.Identity, bool) {
	id := attribution.Identity{Pod: name}
	for _, p := range matches {
		if id.Cluster != "" && p.Cluster != id.Cluster {
			return attribution.Identity{}, false
		}
		id.Cluster = p.Cluster
		if p.Version != "" {
			id.Version = p.Version
		}
	}
	if id.Cluster == "" {
		return attribution.Identity{}, false
	}
	return id, true
}
