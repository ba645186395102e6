package scenarios

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Defaults a scenario gets for what it leaves out. They are constants so
// the documentation, the defaults and the tests cannot drift apart.
const (
	DefaultMethod          = "GET"
	DefaultTimeout         = 10 * time.Second
	DefaultRequestIDHeader = "X-Request-Id"
	// DefaultMaxBody is enough for every attribution preset's response;
	// the rest of a body is not read, so memory stays flat.
	DefaultMaxBody      Size    = 64 << 10
	DefaultConfidence           = 0.95
	DefaultPower                = 0.8
	DefaultMargin       Percent = 0.05
	DefaultInterval             = "clopper-pearson"
	DefaultInconclusive         = "fail"
	DefaultStop                 = "end"
	DefaultLooks                = 5
	BalancingRequest            = "request"
	BalancingConnection         = "connection"
	DefaultNamespace            = "default"
	DefaultScheme               = "http"
	DefaultMatch                = "first"
	DefaultBy                   = "cluster"
	DefaultPercentile           = 99.0
	// DefaultSuccessCodes: only 2xx answers count as answered; a redirect
	// is not the page that was asked for.
	DefaultSuccessCodes = "2xx"
	// DefaultWorkerServiceAccount is what `mesh-verify rbac` names the
	// workers' ServiceAccount.
	DefaultWorkerServiceAccount = "mesh-verify-worker"
	// WorkerImageRepository is the workers' image without its tag; the tag
	// is the version of the binary that starts them (WorkerImage).
	WorkerImageRepository = "ghcr.io/mesh-verify/mesh-verify"
)

// WorkerImage is the image the worker pods run: attack.image, else the
// repository at version (the coordinator's own version, so workers and
// coordinator speak the same record format).
func (a *Attack) WorkerImage(version string) string {
	if a.Image != "" {
		return a.Image
	}
	return WorkerImageRepository + ":" + version
}

// WorkerSources are the clusters a distributed run attacks from, in the
// order their workers are numbered: attack.sources, or attack.from with
// all of attack.workers. Empty for a run from this process.
func (a *Attack) WorkerSources() []Source {
	if len(a.Sources) > 0 {
		return a.Sources
	}
	if a.Workers > 0 {
		return []Source{{Cluster: a.From, Workers: a.Workers}}
	}
	return nil
}

// ApplyDefaults fills in what the scenario leaves out. Parse calls it
// before validation; it is idempotent, so calling it again is harmless.
func (s *Scenario) ApplyDefaults() {
	a := &s.Attack
	if a.Method == "" {
		a.Method = DefaultMethod
	}
	a.Method = strings.ToUpper(a.Method)
	if a.Timeout.Duration == 0 {
		a.Timeout.Duration = DefaultTimeout
	}
	if a.KeepAlive == nil {
		keep := true
		a.KeepAlive = &keep
	}
	if a.RequestID == "" {
		a.RequestID = DefaultRequestIDHeader
	}
	if a.MaxBody == 0 {
		a.MaxBody = DefaultMaxBody
	}
	if len(a.SuccessCodes) == 0 {
		r, _ := ParseStatusRange(DefaultSuccessCodes)
		a.SuccessCodes = StatusCodes{r}
	}
	if a.Workers == 0 && len(a.Sources) > 0 {
		for _, src := range a.Sources {
			a.Workers += max(src.Workers, 0)
		}
	}
	if a.Workers > 0 {
		if a.From == "" && len(a.Sources) == 0 {
			switch {
			case s.Target.Forward != nil:
				a.From = s.Target.Forward.Cluster
			case len(s.Clusters) == 1:
				a.From = s.Clusters[0].Name
			}
		}
		if a.ServiceAccount == "" {
			a.ServiceAccount = DefaultWorkerServiceAccount
		}
	}

	if f := s.Target.Forward; f != nil {
		if f.Namespace == "" {
			f.Namespace, f.namespaceDefaulted = DefaultNamespace, true
		}
		if f.Scheme == "" {
			f.Scheme = DefaultScheme
		}
		if s.Target.Path == "" {
			s.Target.Path = "/"
		}
	}

	for i := range s.Attribution.Rules {
		if s.Attribution.Rules[i].Match == "" {
			s.Attribution.Rules[i].Match = DefaultMatch
		}
	}

	st := &s.Statistics
	if st.Confidence == 0 {
		st.Confidence = DefaultConfidence
	}
	if st.Power == 0 {
		st.Power = DefaultPower
	}
	if st.Margin == 0 {
		st.Margin = DefaultMargin
	}
	if st.Interval == "" {
		st.Interval = DefaultInterval
	}
	if st.Inconclusive == "" {
		st.Inconclusive = DefaultInconclusive
	}
	if st.Stop == "" {
		st.Stop = DefaultStop
	}
	if st.Looks == 0 && st.Stop == "early" {
		st.Looks = DefaultLooks
	}

	clusters := s.ClusterNames()
	for i := range s.Expect {
		e := &s.Expect[i]
		for _, k := range e.specs() {
			k.applyDefaults(clusters)
		}
	}

	s.applyObserveDefaults()
	s.applyBalancingDefault()

	// Derived names must not collide with names written out, nor with each
	// other, or "names unique" would fail on a file that named nothing.
	used, next := map[string]bool{}, map[string]int{}
	for _, e := range s.Expect {
		if e.Name != "" {
			used[e.Name] = true
		}
	}
	for i := range s.Expect {
		e := &s.Expect[i]
		if e.Name != "" {
			continue
		}
		base := e.derivedName()
		if e.From != "" {
			base += " from " + e.From
		}
		name := base
		// Each base resumes at its last number, so n expectations with
		// the same derived name take n steps, not n²/2.
		k := max(next[base], 2)
		for ; used[name]; k++ {
			name = base + " #" + strconv.Itoa(k)
		}
		next[base] = k
		used[name] = true
		e.Name = name
	}
}

// applyBalancingDefault resolves statistics.balancing and records why
// (docs/statistics.md §3.2): Skupper's router balances each new connection,
// which a declared link cost or a link-cost model says is in play;
// otherwise an HTTP-level balancer such as Envoy's, which picks a backend
// per request, is assumed.
func (s *Scenario) applyBalancingDefault() {
	st := &s.Statistics
	switch {
	case st.Balancing != "" && st.BalancingReason == "":
		st.BalancingReason = "set by statistics.balancing"
		return
	case st.Balancing != "":
		return
	}
	for _, c := range s.Clusters {
		if c.Cost != nil {
			st.Balancing = BalancingConnection
			st.BalancingReason = fmt.Sprintf("cluster %s declares a link cost (Skupper): its router balances connections, and every request on a connection goes where the connection went", c.Name)
			return
		}
	}
	for _, e := range s.Expect {
		if sp, ok := e.Spec().(*Split); ok && strings.HasPrefix(sp.Model, "link-cost-") {
			st.Balancing = BalancingConnection
			st.BalancingReason = fmt.Sprintf("expectation %q uses model %s (Skupper): its router balances connections", e.Name, sp.Model)
			return
		}
	}
	st.Balancing = BalancingRequest
	st.BalancingReason = "no link costs declared: an HTTP balancer (Envoy sidecar or gateway) that picks a backend for every request is assumed; set statistics.balancing: connection for an L4 balancer"
}

// ClusterNames lists the declared clusters in file order.
func (s *Scenario) ClusterNames() []string {
	out := make([]string, 0, len(s.Clusters))
	for _, c := range s.Clusters {
		out = append(out, c.Name)
	}
	return out
}
