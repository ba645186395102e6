package meshsim

// conn is the routing state of one inbound TCP connection, attached to its
// context by http.Server.ConnContext. Guarded by Sim.mu.
type conn struct {
	pinned bool
	b      Backend
}

// perConnection reports whether choices stick to inbound connections.
func (s *Sim) perConnection() bool { return s.p.PerConnection || s.p.Mode == ModeBalanced }

// route returns the backend for one request on connection c (nil when
// ServeHTTP is used outside Serve) and counts it. streamID is the
// request's one random draw, which the mirror decision uses too, as
// Envoy derives both from its random stream id.
func (s *Sim) route(c *conn) (b Backend, streamID uint64, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.st.Requests++
	streamID = s.rng.Uint64()
	if c != nil && s.perConnection() {
		if !c.pinned {
			b, ok := s.chooseLocked(streamID)
			if !ok {
				s.st.NoUpstream++
				return Backend{}, streamID, false
			}
			s.pinLocked(c, b)
		}
		s.countLocked(c.b)
		return c.b, streamID, true
	}
	if b, ok = s.chooseLocked(streamID); !ok {
		s.st.NoUpstream++
		return Backend{}, streamID, false
	}
	s.countLocked(b)
	return b, streamID, true
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
// streamID picks the weighted group; pods within a group are a fresh
// uniform draw, as an Envoy load balancer's own random pick among equally
// loaded endpoints (least request with power of two choices, random).
func (s *Sim) chooseLocked(streamID uint64) (Backend, bool) {
	cands := s.candidatesLocked()
	if len(cands) == 0 {
		return Backend{}, false
	}
	switch s.p.Mode {
	case ModePerPod:
		return s.randomLocked(cands), true
	case ModePerCluster:
		clusters := clustersOf(cands)
		return s.randomLocked(podsOf(cands, clusters[s.rng.IntN(len(clusters))])), true
	case ModeBalanced:
		c := s.balancedClusterLocked(clustersOf(cands))
		return s.leastOpenPodLocked(c, podsOf(cands, c)), true
	case ModeWeighted:
		g := s.weightedGroup(streamID)
		var pods []Backend
		for _, b := range cands {
			if InGroup(b, s.p.WeightBy, g) {
				pods = append(pods, b)
			}
		}
		if len(pods) == 0 {
			return Backend{}, false // Envoy: the weighted cluster has no healthy upstream
		}
		return s.randomLocked(pods), true
	case ModeFailover:
		for _, c := range s.p.Order {
			if pods := podsOf(cands, c); len(pods) > 0 {
				return s.randomLocked(pods), true
			}
		}
	}
	return Backend{}, false
}

// randomLocked is a uniform pick among pods.
func (s *Sim) randomLocked(pods []Backend) Backend { return pods[s.rng.IntN(len(pods))] }

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

// weightedGroup is Envoy's weighted cluster pick: streamID modulo the
// total weight falls in one group's interval, the intervals laid out in
// group name order ([0,w1), [w1,w1+w2), …). A zero weight has an empty
// interval.
func (s *Sim) weightedGroup(streamID uint64) string {
	x := streamID % s.totalWeight
	for _, g := range s.groups {
		w := uint64(s.p.Weights[g])
		if x < w {
			return g
		}
		x -= w
	}
	return s.groups[len(s.groups)-1] // unreachable: x < totalWeight
}

// mirrorLocked decides whether the request with streamID is copied and
// to whom: Envoy's runtime fraction (streamID % 1,000,000 < the
// percentage in millionths), then a uniform pick in the mirror set.
func (s *Sim) mirrorLocked(streamID uint64) (Backend, bool) {
	if s.p.Mirror == nil || streamID%mirrorDenominator >= s.mirrorN {
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
	return s.randomLocked(set), true
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
