package meshsim

// Stats is what the simulator routed: the ground truth tests compare
// mesh-verify's attribution with. Maps are keyed by cluster, version, or
// "cluster/pod" for pods.
type Stats struct {
	// Requests received, including those answered 503 or 404 by the
	// simulator.
	Requests int64
	// NoRoute counts 404 answers: no route took the request (its match
	// conditions, or a gateway without a bound route), so it reached no
	// backend (Envoy's response flag NR).
	NoRoute int64
	// NoUpstream counts 503 "no healthy upstream" answers (no ready
	// candidate, or a weighted group without ready pods).
	NoUpstream int64
	// UpstreamErrors counts forwards that failed at the backend (connect
	// error, reset) and were answered 503 like Envoy's "upstream connect
	// error"; they are also counted in ByCluster/ByPod/ByVersion, which
	// record the routing decision.
	UpstreamErrors int64
	// Retries counts the attempts the retry policy sent again (Retry):
	// each is one more request the backend received and logged.
	Retries   int64
	ByCluster map[string]int64
	ByPod     map[string]int64
	ByVersion map[string]int64

	// Connections counts inbound TCP connections accepted by Serve;
	// OpenConnections is how many are open now.
	Connections     int64
	OpenConnections int64
	// ConnsByCluster counts connection pinnings per cluster in
	// per-connection mode (a connection re-pinned after its pod went away
	// counts again); OpenByCluster is the pinned connections open now.
	ConnsByCluster map[string]int64
	OpenByCluster  map[string]int64

	Mirror MirrorStats
}

// MirrorStats accounts for every request selected for mirroring:
// Selected = Sent + Failed + Dropped + NoUpstream + InFlight.
type MirrorStats struct {
	Selected int64
	// Sent copies got a response (any status) from the mirror backend.
	Sent int64
	// Failed copies could not be built or sent.
	Failed int64
	// Dropped copies were not sent: MaxInFlight copies were already in
	// flight, or the body was larger than 1 MiB.
	Dropped int64
	// NoUpstream copies found no ready backend in the mirror set.
	NoUpstream int64
	InFlight   int64
	// ByCluster and ByPod count Sent copies.
	ByCluster map[string]int64
	ByPod     map[string]int64
}

func newStats() Stats {
	return Stats{
		ByCluster:      map[string]int64{},
		ByPod:          map[string]int64{},
		ByVersion:      map[string]int64{},
		ConnsByCluster: map[string]int64{},
		OpenByCluster:  map[string]int64{},
		Mirror:         MirrorStats{ByCluster: map[string]int64{}, ByPod: map[string]int64{}},
	}
}

// Stats returns a snapshot; the caller owns its maps.
func (s *Sim) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.st
	out.ByCluster = cloneCounts(s.st.ByCluster)
	out.ByPod = cloneCounts(s.st.ByPod)
	out.ByVersion = cloneCounts(s.st.ByVersion)
	out.ConnsByCluster = cloneCounts(s.st.ConnsByCluster)
	out.OpenConnections = int64(len(s.conns))
	out.OpenByCluster = map[string]int64{}
	for c, n := range s.open {
		if n != 0 {
			out.OpenByCluster[c] = int64(n)
		}
	}
	out.Mirror.ByCluster = cloneCounts(s.st.Mirror.ByCluster)
	out.Mirror.ByPod = cloneCounts(s.st.Mirror.ByPod)
	return out
}

func cloneCounts(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
