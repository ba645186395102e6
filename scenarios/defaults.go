package scenarios

import (
	"fmt"
	"slices"
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
		if sp := e.Split; sp != nil {
			if sp.By == "" {
				sp.By = DefaultBy
			}
			if sp.Model == "" {
				sp.Model = "equal"
				if len(sp.Weights) > 0 {
					sp.Model = "weights"
				}
				if sp.FromMesh != nil {
					sp.Model = ModelFromMesh
				}
			}
			// "equal" with no buckets means every declared cluster.
			if sp.Model == "equal" && sp.By == "cluster" && len(sp.Buckets) == 0 {
				sp.Buckets = slices.Clone(clusters)
			}
		}
		for _, b := range []*BucketSet{e.Reached, e.Only, e.Never} {
			if b != nil && b.By == "" {
				b.By = DefaultBy
			}
		}
		// "reached: {}" means every declared cluster is reached.
		if r := e.Reached; r != nil && r.By == "cluster" && len(r.Buckets) == 0 {
			r.Buckets = slices.Clone(clusters)
		}
		if l := e.Latency; l != nil && l.Percentile == 0 {
			l.Percentile = DefaultPercentile
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
		if sp := e.Split; sp != nil && strings.HasPrefix(sp.Model, "link-cost-") {
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

// Kind names the expectation's kind (split, reached, only, never,
// successRate, latency, mirror), or "" when none or several are set.
func (e *Expectation) Kind() string {
	k := e.kinds()
	if len(k) != 1 {
		return ""
	}
	return k[0]
}

func (e *Expectation) kinds() []string {
	var k []string
	if e.Split != nil {
		k = append(k, "split")
	}
	if e.Reached != nil {
		k = append(k, "reached")
	}
	if e.Only != nil {
		k = append(k, "only")
	}
	if e.Never != nil {
		k = append(k, "never")
	}
	if e.SuccessRate != nil {
		k = append(k, "successRate")
	}
	if e.Latency != nil {
		k = append(k, "latency")
	}
	if e.Mirror != nil {
		k = append(k, "mirror")
	}
	return k
}

// derivedName reads like the expectation, for reports of unnamed ones.
func (e *Expectation) derivedName() string {
	switch {
	case e.Split != nil:
		return fmt.Sprintf("split by %s (%s)", e.Split.By, e.Split.Model)
	case e.Reached != nil:
		return fmt.Sprintf("every %s reached", e.Reached.By)
	case e.Only != nil:
		return fmt.Sprintf("only %s %s", e.Only.By, strings.Join(e.Only.Buckets, ", "))
	case e.Never != nil:
		return fmt.Sprintf("never %s %s", e.Never.By, strings.Join(e.Never.Buckets, ", "))
	case e.SuccessRate != nil:
		return "success rate ≥ " + e.SuccessRate.AtLeast.String()
	case e.Latency != nil:
		return fmt.Sprintf("p%s latency < %s", strconv.FormatFloat(e.Latency.Percentile, 'g', -1, 64), e.Latency.Below)
	case e.Mirror != nil:
		return fmt.Sprintf("mirror %s to %s", e.Mirror.Percent, e.Mirror.To)
	}
	return "expectation"
}
