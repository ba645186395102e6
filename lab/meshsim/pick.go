package meshsim

import "math"

// conn is the routing state of one inbound TCP connection, attached to its
// context by http.Server.ConnContext. Guarded by Sim.mu.
type conn struct {
	pinned bool
	b      Backend
}

// perConnection reports whether choices stick to inbound connections.
func (s *Sim) perConnection() bool { return s.p.PerConnection || s.p.Mode == ModeBalanced }

// route returns the backend for one request on connection c (nil when
// ServeHTTP is used outside Serve) and counts it.
func (s *Sim) route(c *conn) (Backend, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Requests++
	if c != nil && s.perConnection() {
		if !c.pinned {
			b, ok := s.chooseLocked()
			if !ok {
				s.st.NoUpstream++
				return Backend{}, false
			}
			s.pinLocked(c, b)
		}
		s.countLocked(c.b)
		return c.b, true
	}
	b, ok := s.chooseLocked()
	if !ok {
		s.st.NoUpstream++
		return Backend{}, false
	}
	s.countLocked(b)
	return b, true
}

func (s *Sim) countLocked(b Backend) {
	s.st.ByCluster[b.Cluster]++
	s.st.ByPod[podKey(b)]++
	s.st.ByVersion[b.Version]++
}

// pinLocked attaches b to connection c and counts the connection as open
// towards b, which is what balanced mode reads.
func (s *Sim) pinLocked(c *conn, b Backend) {
	c.pinned, c.b = true, b
	s.open[b.Cluster]++
	s.openPod[podKey(b)]++
	s.st.ConnsByCluster[b.Cluster]++
}

func (s *Sim) unpinLocked(c *conn) {
	if !c.pinned {
		return
	}
	s.open[c.b.Cluster]--
	s.openPod[podKey(c.b)]--
	c.pinned, c.b = false, Backend{}
}

// candidatesLocked lists the ready backends that may take primary traffic,
// sorted by cluster then pod.
func (s *Sim) candidatesLocked() []Backend {
	var out []Backend
	for _, b := range s.backends {
		if b.Ready && !s.inMirrorSet(b) {
			out = append(out, b)
		}
	}
	return out
}

// chooseLocked applies the policy's mode to the current backends.
func (s *Sim) chooseLocked() (Backend, bool) {
	cands := s.candidatesLocked()
	if len(cands) == 0 {
		return Backend{}, false
	}
	switch s.p.Mode {
	case ModePerPod:
		b := cands[s.rrGroup%uint64(len(cands))]
		s.rrGroup++
		return b, true
	case ModePerCluster:
		clusters := clustersOf(cands)
		c := clusters[s.rrGroup%uint64(len(clusters))]
		s.rrGroup++
		return s.roundRobinLocked("cluster:"+c, podsOf(cands, c)), true
	case ModeBalanced:
		c := s.balancedClusterLocked(clustersOf(cands))
		return s.leastOpenPodLocked(c, podsOf(cands, c)), true
	case ModeWeighted:
		g := s.nextWeightedGroupLocked()
		var pods []Backend
		for _, b := range cands {
			if (s.p.WeightBy == ByCluster && b.Cluster == g) || (s.p.WeightBy == ByVersion && b.Version == g) {
				pods = append(pods, b)
			}
		}
		if len(pods) == 0 {
			return Backend{}, false // Envoy: the weighted cluster has no healthy upstream
		}
		return s.roundRobinLocked("weight:"+g, pods), true
	case ModeFailover:
		for _, c := range s.p.Order {
			if pods := podsOf(cands, c); len(pods) > 0 {
				return s.roundRobinLocked("cluster:"+c, pods), true
			}
		}
	}
	return Backend{}, false
}

// roundRobinLocked cycles through pods with a counter per group key, so
// one group's traffic does not shift another group's rotation.
func (s *Sim) roundRobinLocked(key string, pods []Backend) Backend {
	b := pods[s.rrPod[key]%uint64(len(pods))]
	s.rrPod[key]++
	return b
}

// cost is a cluster's link cost in balanced mode.
func (s *Sim) cost(cluster string) float64 {
	if cluster == s.p.Local {
		return 0
	}
	if c, ok := s.p.Costs[cluster]; ok {
		return c
	}
	return defaultLinkCost
}

// balancedClusterLocked is Skupper's balanced distribution: the cluster
// with the lowest open connections + link cost; ties go to the local
// cluster, then the lower link cost, then the lower name. Clusters without
// ready pods are not candidates at all (the router has no consumer there).
func (s *Sim) balancedClusterLocked(clusters []string) string {
	best := clusters[0]
	for _, c := range clusters[1:] {
		if s.balancedLess(c, best) {
			best = c
		}
	}
	return best
}

func (s *Sim) balancedLess(a, b string) bool {
	sa, sb := float64(s.open[a])+s.cost(a), float64(s.open[b])+s.cost(b)
	if sa != sb {
		return sa < sb
	}
	if la, lb := a == s.p.Local, b == s.p.Local; la != lb {
		return la
	}
	if ca, cb := s.cost(a), s.cost(b); ca != cb {
		return ca < cb
	}
	return a < b
}

// leastOpenPodLocked picks the cluster's pod with the fewest open
// connections, as the remote site's router balances its local consumers
// the same way; ties rotate so sequential connections still spread.
func (s *Sim) leastOpenPodLocked(cluster string, pods []Backend) Backend {
	key := "cluster:" + cluster
	start := int(s.rrPod[key] % uint64(len(pods)))
	s.rrPod[key]++
	best := pods[start]
	for i := 1; i < len(pods); i++ {
		b := pods[(start+i)%len(pods)]
		if s.openPod[podKey(b)] < s.openPod[podKey(best)] {
			best = b
		}
	}
	return best
}

// nextWeightedGroupLocked is nginx's smooth weighted round robin: every
// pick adds each weight to its group's current value, takes the largest
// (ties: first in name order) and subtracts the total from it. The split
// is exact over every window of sum(weights) picks and interleaved within
// it (90/10 gives one minority pick per ten, not ten in a row).
func (s *Sim) nextWeightedGroupLocked() string {
	total, best := 0.0, ""
	bestCur := math.Inf(-1)
	for _, g := range s.groups {
		w := s.p.Weights[g]
		if w == 0 {
			continue
		}
		total += w
		s.swrr[g] += w
		if s.swrr[g] > bestCur {
			best, bestCur = g, s.swrr[g]
		}
	}
	s.swrr[best] -= total
	return best
}

// mirrorLocked decides whether this request is copied and to whom. The
// decision is error diffusion on a counter (copy when floor(n·p) steps
// up), so 50% copies exactly every second request.
func (s *Sim) mirrorLocked() (Backend, bool) {
	if s.p.Mirror == nil || s.bp == 0 {
		return Backend{}, false
	}
	s.nMirror++
	if (s.nMirror*s.bp)/10000 == ((s.nMirror-1)*s.bp)/10000 {
		return Backend{}, false
	}
	s.st.Mirror.Selected++
	var set []Backend
	for _, b := range s.backends {
		if b.Ready && s.inMirrorSet(b) {
			set = append(set, b)
		}
	}
	if len(set) == 0 {
		s.st.Mirror.NoUpstream++
		return Backend{}, false
	}
	b := set[s.rrMirror%uint64(len(set))]
	s.rrMirror++
	return b, true
}

func clustersOf(bs []Backend) []string {
	var out []string
	for _, b := range bs {
		if len(out) == 0 || out[len(out)-1] != b.Cluster {
			out = append(out, b.Cluster) // bs is sorted by cluster
		}
	}
	return out
}

func podsOf(bs []Backend, cluster string) []Backend {
	var out []Backend
	for _, b := range bs {
		if b.Cluster == cluster {
			out = append(out, b)
		}
	}
	return out
}
