package scenarios

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/mesh-verify/mesh-verify/redact"
)

// MaxAttackWorkers bounds attack.workers: every worker is a pod whose
// records the coordinator follows and merges each interval, and the merge
// was measured for 1,000 workers (docs/distributed.md, Merging).
const MaxAttackWorkers = 1000

// ClusterDomain is the DNS domain of a Service's in-cluster name
// (NAME.NAMESPACE.svc.cluster.local), Kubernetes' default.
const ClusterDomain = "cluster.local"

// checkWorkers validates attack.workers and what goes with it
// (docs/distributed.md, The worker). Called once the defaults are in.
func (s *Scenario) checkWorkers(c *checker) {
	a := s.Attack
	s.checkAttackSources(c)
	if a.Workers == 0 {
		for _, f := range []struct{ path, val string }{
			{"attack.from", a.From}, {"attack.image", a.Image}, {"attack.serviceAccount", a.ServiceAccount},
		} {
			if f.val != "" {
				c.add(f.path, "applies to distributed runs only: set attack.workers (or run --workers N)")
			}
		}
		if a.Pod != nil {
			c.add("attack.pod", "applies to distributed runs only: set attack.workers (or run --workers N)")
		}
		return
	}
	if a.Workers < 0 || a.Workers > MaxAttackWorkers {
		c.add("attack.workers", "want 0 (attack from this process) or 1 to %d worker pods, got %d", MaxAttackWorkers, a.Workers)
		return
	}
	switch {
	case len(a.Sources) > 0:
		// Each source names its cluster (checkSources).
	case a.From == "":
		c.add("attack.from", "required with several clusters and a url target: the cluster the workers run in (%s)", declaredList(s))
	case !s.declared(a.From):
		c.add("attack.from", "%s", s.unknownCluster(a.From))
	default:
		if k, ok := s.hasContext(a.From); !ok {
			c.add("attack.from", "%s", noContext(a.From, k, "the workers' ConfigMap and Job are created through the cluster's API server"))
		}
	}
	if !isDNSName(a.ServiceAccount) {
		c.add("attack.serviceAccount", "invalid ServiceAccount name %q: want lowercase letters, digits, '-' and '.'", a.ServiceAccount)
	}
	s.checkWorkerPod(c)
	if a.Image != "" && strings.ContainsFunc(a.Image, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) {
		c.add("attack.image", "invalid image %q: an image reference has no spaces", a.Image)
	}
	// Every worker sends at least one request, holds at least one user:
	// a share of 0 would be a worker that waits for nothing.
	n := a.Workers
	for _, q := range []struct {
		path string
		v    int64
	}{
		{"attack.concurrency", int64(a.Concurrency)},
		{"attack.requests", int64(min(a.Requests, uint64(MaxRequests)+1))},
		{"attack.rate", rateFreq(a.Rate)},
		{"attack.ramp.from", rateFreq(rampRate(a.Ramp, false))},
		{"attack.ramp.to", rateFreq(rampRate(a.Ramp, true))},
	} {
		if q.v > 0 && q.v < int64(n) {
			c.add(q.path, "%d is less than attack.workers (%d): every worker needs a share of at least 1", q.v, n)
		}
	}
	// A log line names its request, not the connection that carried it:
	// a local run knows each request's connection from its own attack,
	// the workers do not report theirs, and counting each request as its
	// own draw would overstate the evidence of a per-connection balancer.
	for i, e := range s.Expect {
		if !e.sets(KindMirror) && e.JudgedFrom() == SourceLogs && s.BalancingOf(&e) == BalancingConnection {
			c.add(fmt.Sprintf("expect[%d]", i), "judged from logs under per-connection balancing, which needs each request's connection: the workers (attack.workers) do not report theirs; judge from the bodies (source: body), or attack from this process (attack.workers: 0)")
		}
	}
	field := "target.url"
	if s.Target.Forward != nil {
		field = "target.path"
	}
	target, err := s.InClusterURL()
	switch {
	case err != nil && s.Target.Forward != nil:
		c.add("target.portForward", "%v", err)
	case err == nil && redact.URL(target) != target:
		// The workers get the target in run.json, in their ConfigMap,
		// which anyone who may view the namespace reads (issue 23); only
		// the scenario's headers travel in their Secret.
		c.add(field, "%s carries a credential (a user-info password or a credential-like query parameter), which the workers would get in their ConfigMap, readable by anyone who may view the namespace: send it in attack.headers, which go in the workers' Secret, or attack from this process (attack.workers: 0)", redact.URL(target))
	}
}

// checkAttackSources validates attack.sources and the expectations' from.
func (s *Scenario) checkAttackSources(c *checker) {
	a := s.Attack
	clusters := map[string]bool{}
	sum := 0
	for i, src := range a.Sources {
		at := fmt.Sprintf("attack.sources[%d]", i)
		switch {
		case src.Cluster == "":
			c.add(at+".cluster", "required: the cluster these workers run in (%s)", declaredList(s))
		case !s.declared(src.Cluster):
			c.add(at+".cluster", "%s", s.unknownCluster(src.Cluster))
		case clusters[src.Cluster]:
			c.add(at+".cluster", "cluster %s is already a source: give it one entry with all its workers", src.Cluster)
		default:
			if k, ok := s.hasContext(src.Cluster); !ok {
				c.add(at+".cluster", "%s", noContext(src.Cluster, k, "the workers' ConfigMap and Job are created through the cluster's API server"))
			}
		}
		clusters[src.Cluster] = true
		if src.Workers < 1 || src.Workers > MaxAttackWorkers {
			c.add(at+".workers", "want 1 to %d worker pods, got %d", MaxAttackWorkers, src.Workers)
		}
		sum += src.Workers
	}
	if len(a.Sources) > 0 {
		if a.From != "" {
			c.add("attack.from", "leave it out with attack.sources: each source names its cluster")
		}
		if a.Workers != sum {
			c.add("attack.workers", "%d, but attack.sources add up to %d workers: leave attack.workers out (or --workers) with attack.sources", a.Workers, sum)
		}
	}
	for i, e := range s.Expect {
		if e.From == "" {
			continue
		}
		at := fmt.Sprintf("expect[%d].from", i)
		switch {
		case len(a.Sources) == 0:
			c.add(at, "judges the requests of one source: it needs attack.sources")
		case !clusters[e.From]:
			c.add(at, "%s is not a source (attack.sources: %s)", e.From, sourceList(a.Sources))
		case e.sets(KindMirror):
			c.add(at, "a mirror is judged from the logs, which do not say which source sent a request")
		case e.JudgedFrom() != SourceBody:
			c.add(at, "only expectations judged from the response bodies (source: body) can be split by source: the logs and metrics do not say which source sent a request")
		}
	}
}

func sourceList(srcs []Source) string {
	names := make([]string, len(srcs))
	for i, s := range srcs {
		names[i] = s.Cluster
	}
	return strings.Join(names, ", ")
}

// InClusterURL is the address workers inside a cluster attack: a url
// target as it is (it must resolve inside the cluster), a port-forward to
// a Service as the Service's DNS name, scheme://NAME.NAMESPACE.svc.
// cluster.local:PORT/path, reached through the mesh like any in-cluster
// client. A pod or a Deployment has no such name, and a named port is not
// a URL's port: both are errors saying what to write instead.
func (s *Scenario) InClusterURL() (string, error) {
	t := s.Target
	if t.Forward == nil {
		if t.URL == "" {
			return "", fmt.Errorf("no target: set target.url or target.portForward")
		}
		return t.URL, nil
	}
	f := t.Forward
	kind, name, _ := strings.Cut(f.Resource, "/")
	if kind != "svc" && kind != "service" {
		return "", fmt.Errorf("workers reach the target by its in-cluster DNS name, which only a Service has: forward to svc/NAME instead of %s, or give target.url", f.Resource)
	}
	if _, err := strconv.Atoi(f.Port); err != nil {
		return "", fmt.Errorf("workers dial the Service's port by number: port %q is a name, give the Service port's number", f.Port)
	}
	scheme := f.Scheme
	if scheme == "" {
		scheme = DefaultScheme
	}
	ns := f.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	u := url.URL{Scheme: scheme, Host: name + "." + ns + ".svc." + ClusterDomain + ":" + f.Port}
	path := t.Path
	if path == "" {
		path = "/"
	}
	u.Path = path
	if p, q, ok := strings.Cut(path, "?"); ok {
		u.Path, u.RawQuery = p, q
	}
	// The path may be a template ({{.RequestID}}): its braces stay as written.
	return strings.NewReplacer("%7B", "{", "%7D", "}").Replace(u.String()), nil
}

// WorkerShare is the attack of worker index of n: the rate (of a ramp,
// both ends), concurrency, requests and vegeta workers divided by n with
// the remainder spread over the first indices, so the shares add up to
// the scenario's exactly; connections and maxConnections divided likewise,
// at least 1. Duration, repetitions and everything else stay. The
// scenario itself is not changed.
func (a Attack) WorkerShare(index, n int) (Attack, error) {
	if n < 1 || n > MaxAttackWorkers || index < 0 || index >= n {
		return Attack{}, fmt.Errorf("worker %d of %d: want 0 ≤ index < workers ≤ %d", index, n, MaxAttackWorkers)
	}
	out := a
	share := func(v int64) int64 {
		q, r := v/int64(n), v%int64(n)
		if int64(index) < r {
			q++
		}
		return q
	}
	atLeast1 := func(v int) int {
		if v <= 0 {
			return v
		}
		return int(max(1, share(int64(v))))
	}
	if a.Rate != nil {
		r := *a.Rate
		r.Freq = int(share(int64(r.Freq)))
		out.Rate = &r
	}
	if a.Ramp != nil {
		r := *a.Ramp
		r.From.Freq = int(share(int64(r.From.Freq)))
		r.To.Freq = int(share(int64(r.To.Freq)))
		out.Ramp = &r
	}
	out.Concurrency = int(share(int64(a.Concurrency)))
	out.Requests = uint64(share(int64(min(a.Requests, uint64(MaxRequests)))))
	out.MaxWorkers = uint64(atLeast1(int(min(a.MaxWorkers, uint64(MaxConcurrency)))))
	out.Connections = atLeast1(a.Connections)
	out.MaxConnections = atLeast1(a.MaxConnections)
	for _, q := range []struct {
		what string
		v    int64
	}{{"rate", rateFreq(out.Rate)}, {"concurrency", int64(out.Concurrency)}, {"requests", int64(out.Requests)}} {
		if q.v == 0 && (q.what == "rate" && a.Rate != nil || q.what == "concurrency" && a.Concurrency > 0 || q.what == "requests" && a.Requests > 0) {
			return Attack{}, fmt.Errorf("worker %d of %d: its share of attack.%s is 0 (fewer than %d)", index, n, q.what, n)
		}
	}
	return out, nil
}
