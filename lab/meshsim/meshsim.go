// Package meshsim plays the data plane of a simulated mesh entry — a
// Skupper router, a caller's Istio sidecar, a Kuma zone ingress, a Cilium
// global service — as an HTTP reverse proxy on loopback that picks a
// backend among the ready pods of several clusters according to a policy.
//
// Where the real data plane decides at random, so does the simulator
// (lab/README.md, "Random routing"): like Envoy, every request draws one
// random stream id, and both the weighted-cluster pick (id modulo the
// total weight) and the mirror decision (id modulo 1,000,000 below the
// percentage in millionths) come from that one draw; pods within a group,
// mirror targets and per-connection picks (Cilium's socket balancer, an
// east-west gateway) are uniform random draws. Skupper's balanced mode
// stays deterministic, as Skupper's router is: the cluster with the fewest
// open connections plus link cost.
//
// Every draw comes from one generator seeded by Policy.Seed, so a
// sequence of requests sent one at a time replays exactly with the same
// seed; with concurrent requests only the order of draws varies. The
// ground truth of what was routed is Stats, never a count worked out from
// the policy.
package meshsim

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"sync"

	"github.com/mesh-verify/mesh-verify/lab/loopback"
)

// Modes of Policy.Mode.
const (
	// ModePerCluster splits equally over the clusters with ready pods, then
	// equally over each cluster's pods (Skupper with equal link costs and
	// sequential connections, Istio locality-unaware east-west).
	ModePerCluster = "per-cluster"
	// ModePerPod splits equally over all ready pods (a Cilium global service).
	ModePerPod = "per-pod"
	// ModeBalanced is Skupper's router: each new inbound TCP connection goes
	// to the cluster with the lowest open connections + link cost.
	ModeBalanced = "balanced"
	// ModeWeighted splits by Policy.Weights, keyed by cluster or version.
	ModeWeighted = "weighted"
	// ModeFailover sends everything to the first cluster in Policy.Order
	// that has a ready pod.
	ModeFailover = "failover"
)

// WeightBy values.
const (
	ByCluster = "cluster"
	ByVersion = "version"
	// ByService splits between Services, each backend counted in the
	// Service it was found through (Backend.Service): Flagger's Kuma
	// router splits a TrafficRoute between <apex>-primary and
	// <apex>-canary.
	ByService = "service"
)

// InGroup reports whether b is in weighted group g of a policy that
// weighs by by.
func InGroup(b Backend, by, g string) bool {
	switch by {
	case ByCluster:
		return b.Cluster == g
	case ByVersion:
		return b.Version == g
	case ByService:
		return b.Service == g
	}
	return false
}

// seedStream is the PCG stream constant paired with Policy.Seed: any fixed
// odd number does; this one is the golden ratio's.
const seedStream = 0x9e3779b97f4a7c15

// defaultLinkCost is Skupper's cost of a link created without --cost.
const defaultLinkCost = 1

// mirrorDenominator is Envoy's runtime fraction denominator for Istio's
// mirrorPercentage (MILLION): a request is copied when its stream id
// modulo 1,000,000 is below the percentage in millionths.
const mirrorDenominator = 1_000_000

// maxTotalWeight is the largest sum of weights: Envoy's weighted clusters
// add uint32 weights and pick stream id modulo that total.
const maxTotalWeight = math.MaxUint32

// defaultMirrorInFlight bounds concurrent mirror copies when
// Mirror.MaxInFlight is zero.
const defaultMirrorInFlight = 64

// Backend is one pod the entry can route to.
type Backend struct {
	Cluster, Pod, Version string
	// Service is the Kubernetes Service the backend was found through,
	// for a policy by ByService ("" otherwise).
	Service string
	// Addr is the pod app's loopback address, "127.0.0.1:port".
	Addr string
	// Ready is the pod's readiness as the lab sees it; unready pods are
	// never chosen, as a mesh drops endpoints that fail their probe.
	Ready bool
}

// Policy says how the entry picks a backend.
type Policy struct {
	// Mode is one of the Mode constants.
	Mode string
	// Local is the entry's own cluster: in balanced mode its cost is 0
	// whatever Costs says, and it wins ties.
	Local string
	// Costs are balanced mode's link costs per cluster; a cluster missing
	// from the map has Skupper's default cost 1 (Local has 0).
	Costs map[string]float64
	// Weights are weighted mode's relative weights, keyed by cluster or by
	// version as WeightBy says: whole numbers, as in Envoy's weighted
	// clusters, summing to at most math.MaxUint32. A weighted group without ready pods gets
	// its share answered 503, as Envoy does for a weighted cluster that has
	// no healthy endpoint; use failover mode for "move the traffic".
	Weights  map[string]float64
	WeightBy string
	// Order is failover mode's preference list of clusters; clusters not
	// listed are never used.
	Order []string
	// PerConnection picks once per inbound TCP connection and keeps the
	// choice for every request on it (Skupper, Istio east-west gateways,
	// Kuma zone ingress). False picks per request (a sidecar's HTTP load
	// balancing). Balanced mode always picks per connection: open
	// connections are its input.
	PerConnection bool
	// Mirror, if set, copies a share of the requests to a mirror set.
	Mirror *Mirror
	// Retry, if set, sends a request again when its answer or failure is
	// one the policy retries (an Envoy route's retry policy).
	Retry *Retry
	// Match, if set, is the route's match conditions: a request it does
	// not take finds no route (404, response flag NR), as in Envoy.
	Match *Match
	// NoRoute, when not empty, says why the data plane has no route at
	// all (an Istio gateway no VirtualService is bound to): every request
	// is answered 404 with response flag NR, as Envoy answers, and the
	// reason is the lab's to show (status, logs).
	NoRoute string
	// Seed seeds every random choice of the simulator (zero is a seed like
	// any other): the same seed and the same requests, sent one at a time,
	// make the same choices.
	Seed uint64
}

// Mirror is Istio's traffic mirroring: each request is copied with
// probability Percent% (decided per request at random, as Envoy's runtime
// fraction is) asynchronously to a random backend of the mirror set (the backends matching
// Version and Cluster, where set), with "-shadow" added to the Host as
// Envoy does, and the copy's response is discarded. Mirror-set backends
// never receive primary traffic.
type Mirror struct {
	Version string
	Cluster string
	// Percent in [0, 100], with 0.0001 resolution (Envoy counts in
	// millionths).
	Percent float64
	// KeepHost sends the copy with the primary's Host, no "-shadow"
	// (Envoy's disable_shadow_host_suffix_append; Istio 1.28 and later by
	// default): only the request id tells a copy from a primary.
	KeepHost bool
	// MaxInFlight bounds concurrent copies; when that many are in flight,
	// further copies are dropped and counted, so a slow mirror cannot grow
	// memory. Zero means 64.
	MaxInFlight int
}

// Sim is one simulated mesh entry. Its methods are safe for concurrent use.
type Sim struct {
	p           Policy
	mirrorN     uint64   // copy when stream id % mirrorDenominator < mirrorN
	groups      []string // weighted mode's groups in name order: Envoy's interval order
	totalWeight uint64
	transport   *http.Transport
	proxy       *httputil.ReverseProxy
	mirrorSem   chan struct{}
	match       *matcher // p.Match compiled; guarded by mu

	mu       sync.Mutex
	backends []Backend // as last set, sorted by cluster then pod
	conns    map[net.Conn]*conn
	open     map[string]int    // balanced: open inbound connections per cluster
	openPod  map[string]int    // … and per cluster/pod
	rrPod    map[string]uint64 // balanced mode's rotation among tied pods
	rng      *rand.Rand
	st       Stats
}

// New validates p and returns a Sim with no backends.
func New(p Policy) (*Sim, error) {
	p = clonePolicy(p)
	if err := validate(p); err != nil {
		return nil, err
	}
	s := &Sim{
		p:       p,
		conns:   map[net.Conn]*conn{},
		open:    map[string]int{},
		openPod: map[string]int{},
		rrPod:   map[string]uint64{},
		st:      newStats(),
		groups:  slices.Sorted(maps.Keys(p.Weights)),
		rng:     rand.New(rand.NewPCG(p.Seed, seedStream)),
	}
	s.setWeightsLocked(p.Weights)
	s.setMirrorLocked(p.Mirror)
	s.match, _ = compileMatch(p.Match) // validate compiled it already
	// The copies' bound is fixed for the simulator's life (SetPolicy may
	// add a mirror later): ServeHTTP reads the channel without the lock.
	n := defaultMirrorInFlight
	if p.Mirror != nil && p.Mirror.MaxInFlight > 0 {
		n = p.Mirror.MaxInFlight
	}
	s.mirrorSem = make(chan struct{}, n)
	s.transport = loopback.Transport(512, 128)
	s.proxy = s.newProxy()
	return s, nil
}

// setMirrorLocked makes m the mirror (nil: none).
func (s *Sim) setMirrorLocked(m *Mirror) {
	s.mirrorN = 0
	if m != nil {
		s.mirrorN = uint64(math.Round(m.Percent * mirrorDenominator / 100))
	}
}

// SetPolicy replaces the policy of a serving simulator, as a control
// plane's push replaces a data plane's routes (the lab's daemon calls it
// when a mesh object changes): every request routed from now on follows
// p. Connections already pinned keep their backend, as Cilium's socket
// load balancer and Skupper's router keep an open connection where it
// is; balanced mode's open counts carry over. The random source and its
// seed stay (p.Seed is ignored), and so does the bound on mirror copies
// in flight. A policy New would refuse is refused, and the old one stays.
func (s *Sim) SetPolicy(p Policy) error {
	p = clonePolicy(p)
	if err := validate(p); err != nil {
		return err
	}
	m, err := compileMatch(p.Match)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p.Seed = s.p.Seed
	s.p = p
	s.setWeightsLocked(p.Weights)
	s.setMirrorLocked(p.Mirror)
	s.match = m
	return nil
}

// setWeightsLocked makes w the weights of weighted mode.
func (s *Sim) setWeightsLocked(w map[string]float64) {
	s.p.Weights = w
	s.groups = slices.Sorted(maps.Keys(w))
	s.totalWeight = 0
	for _, v := range w {
		s.totalWeight += uint64(v)
	}
}

func validate(p Policy) error {
	fail := func(format string, a ...any) error {
		return fmt.Errorf("mesh simulator policy (mode %q): %s", p.Mode, fmt.Sprintf(format, a...))
	}
	if r := p.Retry; r != nil {
		if r.Attempts < 0 || r.Attempts > MaxRetries {
			return fail("retry attempts %d; want 0..%d", r.Attempts, MaxRetries)
		}
		for _, c := range r.Codes {
			if c < 100 || c > 599 {
				return fail("retried status %d is no HTTP status", c)
			}
		}
	}
	for c, v := range p.Costs {
		if !(v >= 0) || math.IsInf(v, 0) {
			return fail("link cost of cluster %q is %v; want a finite number >= 0", c, v)
		}
	}
	if p.Mode != ModeBalanced && len(p.Costs) > 0 {
		return fail("Costs only apply to mode %q", ModeBalanced)
	}
	if p.Mode != ModeWeighted && (len(p.Weights) > 0 || p.WeightBy != "") {
		return fail("Weights and WeightBy only apply to mode %q", ModeWeighted)
	}
	if p.Mode != ModeFailover && len(p.Order) > 0 {
		return fail("Order only applies to mode %q", ModeFailover)
	}
	switch p.Mode {
	case ModePerCluster, ModePerPod, ModeBalanced:
	case ModeWeighted:
		if p.WeightBy != ByCluster && p.WeightBy != ByVersion && p.WeightBy != ByService {
			return fail("WeightBy is %q; want %q, %q or %q", p.WeightBy, ByCluster, ByVersion, ByService)
		}
		sum := 0.0
		for k, w := range p.Weights {
			if !(w >= 0) || math.IsInf(w, 0) || w != math.Trunc(w) {
				return fail("weight of %q is %v; want a whole number >= 0 (Envoy's weighted clusters take integers)", k, w)
			}
			sum += w
		}
		if !(sum > 0) {
			return fail("Weights must have a positive sum")
		}
		if sum > maxTotalWeight {
			return fail("Weights sum to %v; want at most %d (Envoy adds them as uint32)", sum, uint64(maxTotalWeight))
		}
	case ModeFailover:
		if len(p.Order) == 0 {
			return fail("Order must list at least one cluster")
		}
		seen := map[string]bool{}
		for _, c := range p.Order {
			if c == "" || seen[c] {
				return fail("Order %q has an empty or repeated cluster", p.Order)
			}
			seen[c] = true
		}
	default:
		return fmt.Errorf("mesh simulator policy: unknown mode %q (known: %s, %s, %s, %s, %s)",
			p.Mode, ModePerCluster, ModePerPod, ModeBalanced, ModeWeighted, ModeFailover)
	}
	if _, err := compileMatch(p.Match); err != nil {
		return fail("%v", err)
	}
	if m := p.Mirror; m != nil {
		if m.Version == "" && m.Cluster == "" {
			return fail("Mirror needs a Version or a Cluster to select the mirror set")
		}
		if !(m.Percent >= 0 && m.Percent <= 100) {
			return fail("mirror Percent is %v; want 0..100", m.Percent)
		}
		if m.MaxInFlight < 0 {
			return fail("mirror MaxInFlight is %d; want >= 0", m.MaxInFlight)
		}
	}
	return nil
}

// clonePolicy deep-copies p so a caller mutating its maps later cannot
// race with routing.
func clonePolicy(p Policy) Policy {
	cloneMap := func(m map[string]float64) map[string]float64 {
		if m == nil {
			return nil
		}
		out := make(map[string]float64, len(m))
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	p.Costs = cloneMap(p.Costs)
	p.Weights = cloneMap(p.Weights)
	p.Order = slices.Clone(p.Order)
	if p.Mirror != nil {
		m := *p.Mirror
		p.Mirror = &m
	}
	if p.Retry != nil {
		r := *p.Retry
		r.Codes = slices.Clone(r.Codes)
		p.Retry = &r
	}
	if p.Match != nil {
		m := Match{Hosts: slices.Clone(p.Match.Hosts), URIs: slices.Clone(p.Match.URIs)}
		p.Match = &m
	}
	return p
}

// SetBackends replaces the pods the entry knows, as the lab calls it
// whenever pods change (kubectl scale changes routing as in a real mesh).
// Inbound connections pinned to a pod that is gone or no longer ready are
// unpinned and re-pick on their next request, like a mesh resetting the
// connections of a dead endpoint; their open-connection counts are
// released at once, so balanced mode sees the new state immediately.
func (s *Sim) SetBackends(bs []Backend) {
	// Last entry wins for a repeated cluster/pod, as a watch's last event does.
	byKey := map[string]Backend{}
	for _, b := range bs {
		byKey[podKey(b)] = b
	}
	list := make([]Backend, 0, len(byKey))
	for _, b := range byKey {
		list = append(list, b)
	}
	SortBackends(list)

	s.mu.Lock()
	defer s.mu.Unlock()
	s.backends = list
	for _, c := range s.conns {
		if !c.pinned {
			continue
		}
		if b, ok := byKey[podKey(c.b)]; !ok || !b.Ready || b.Addr != c.b.Addr || b.Version != c.b.Version {
			s.unpinLocked(c)
		}
	}
}

// podKey identifies a pod across clusters; Stats.ByPod uses the same key.
func podKey(b Backend) string { return b.Cluster + "/" + b.Pod }

// SortBackends orders backends by cluster, then pod: the order every
// data plane walks them in, so choices and configurations are stable.
func SortBackends(bs []Backend) {
	slices.SortFunc(bs, func(a, b Backend) int {
		return cmp.Or(cmp.Compare(a.Cluster, b.Cluster), cmp.Compare(a.Pod, b.Pod), cmp.Compare(a.Service, b.Service))
	})
}

// Takes reports whether b belongs to the mirror set: it receives copies
// and never primary traffic. A nil Mirror takes nothing.
func (m *Mirror) Takes(b Backend) bool {
	return m != nil && (m.Version == "" || b.Version == m.Version) && (m.Cluster == "" || b.Cluster == m.Cluster)
}

func (s *Sim) inMirrorSet(b Backend) bool { return s.p.Mirror.Takes(b) }
