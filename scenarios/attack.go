package scenarios

import (
	"maps"
	"regexp"
	"slices"
	"strings"
)

// Attack says how load is generated. Open loop: Rate with Duration and/or
// Requests, or Ramp. Closed loop (like `siege -c C -r R`): Concurrency with
// Repetitions (C*R requests) or Duration.
type Attack struct {
	Rate        *Rate             `yaml:"rate"`
	Ramp        *Ramp             `yaml:"ramp"`
	Duration    Duration          `yaml:"duration"`
	Requests    uint64            `yaml:"requests"`
	Concurrency int               `yaml:"concurrency"`
	Repetitions int               `yaml:"repetitions"`
	Method      string            `yaml:"method"`
	Headers     map[string]string `yaml:"headers"`
	Body        string            `yaml:"body"`
	Timeout     Duration          `yaml:"timeout"`
	// KeepAlive defaults to true (what siege, vegeta and browsers do).
	KeepAlive *bool `yaml:"keepAlive"`
	// Connections is how many keep-alive connections requests are spread
	// over at random (default 10 for open loop; closed loop: one per worker).
	Connections    int    `yaml:"connections"`
	MaxConnections int    `yaml:"maxConnections"`
	HTTP2          bool   `yaml:"http2"`
	MaxBody        Size   `yaml:"maxBody"`
	RequestID      string `yaml:"requestIdHeader"`
	MaxWorkers     uint64 `yaml:"maxWorkers"`
	// GRPC sends gRPC unary calls instead of plain HTTP requests.
	GRPC *GRPC `yaml:"grpc"`
	// SuccessCodes are the HTTP statuses that count as answered: codes
	// (200), classes ("2xx") and ranges ("200-299"). Default 2xx.
	SuccessCodes StatusCodes `yaml:"successCodes"`
	// Workers runs the attack from this many worker pods, an Indexed Job
	// of `mesh-verify worker` in cluster From (docs/distributed.md), each
	// sending its share of the rate, concurrency, requests and
	// connections to the target's in-cluster address. 0 (the default)
	// attacks from this process.
	Workers int `yaml:"workers"`
	// From is the scenario cluster the workers run in (default: the
	// cluster of target.portForward, or the only declared cluster).
	From string `yaml:"from"`
	// Image is the workers' container image (default:
	// ghcr.io/mesh-verify/mesh-verify at this binary's version).
	Image string `yaml:"image"`
	// ServiceAccount the worker pods run as (default mesh-verify-worker).
	ServiceAccount string `yaml:"serviceAccount"`
	// Pod shapes the worker pods so that they live in a mesh like any
	// client (docs/distributed.md, Worker pods in a mesh): labels and
	// annotations (sidecar injection), scheduling, resources, pull
	// secrets, and the sidecar whose lifecycle the worker follows.
	Pod *WorkerPod `yaml:"pod"`
	// Sources run workers in several clusters at once (docs/distributed.md,
	// Several sources): each names its cluster and how many workers run
	// there, and the attack is shared over all of them. attack.workers is
	// then their sum (it may be left out) and attack.from is left out.
	// Expectations with from: judge one source's requests only.
	Sources []Source `yaml:"sources"`
}

// Source is one cluster a distributed run's workers attack from.
type Source struct {
	Cluster string `yaml:"cluster"`
	Workers int    `yaml:"workers"`
}

// GRPC is a unary call: the method's full path and a message whose
// field 1 is a string, which is the shape of gRPC's health check
// (HealthCheckRequest.service) and of Istio's echo test app
// (EchoRequest.message). A call succeeds when its grpc-status is 0.
type GRPC struct {
	// Method is /package.Service/Method, e.g. /grpc.health.v1.Health/Check.
	Method string `yaml:"method"`
	// Message is field 1 of the request message (empty: an empty message).
	Message string `yaml:"message"`
}

// Ramp increases the rate linearly from From to To over Duration.
type Ramp struct {
	From     Rate     `yaml:"from"`
	To       Rate     `yaml:"to"`
	Duration Duration `yaml:"duration"`
}

// HTTPMethods are the methods an attack may use.
func HTTPMethods() []string {
	return []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
}

// isToken reports whether s is an HTTP token (RFC 9110 section 5.6.2),
// which is what a header name must be.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("!#$%&'*+-.^_`|~", r)) {
			return false
		}
	}
	return true
}

// rampRate is a ramp's from or to rate (nil without a ramp).
func rampRate(r *Ramp, to bool) *Rate {
	switch {
	case r == nil:
		return nil
	case to:
		return &r.To
	}
	return &r.From
}

func (s *Scenario) checkAttack(c *checker) {
	a := s.Attack
	open := a.Rate != nil || a.Ramp != nil
	switch {
	case !open && a.Concurrency == 0 && a.Repetitions == 0:
		c.add("attack", "set rate (open loop, like 200/s), ramp (open loop, rising rate) or concurrency (closed loop, like siege -c)")
	case a.Rate != nil && a.Ramp != nil:
		c.add("attack.ramp", "set rate or ramp, not both")
	}
	if a.Concurrency < 0 || a.Concurrency > MaxConcurrency {
		c.add("attack.concurrency", "want a number of workers from 1 to %d, got %d", MaxConcurrency, a.Concurrency)
	}
	if a.Repetitions > MaxRequests {
		c.add("attack.repetitions", "want at most %d, got %d", MaxRequests, a.Repetitions)
	}
	if a.Requests > MaxRequests {
		c.add("attack.requests", "want at most %d requests, got %d", MaxRequests, a.Requests)
	}
	if a.Duration.Duration > MaxDuration {
		c.add("attack.duration", "want at most %s, got %s", MaxDuration, a.Duration)
	}
	for _, r := range []struct {
		path string
		rate *Rate
	}{{"attack.rate", a.Rate}, {"attack.ramp.from", rampRate(a.Ramp, false)}, {"attack.ramp.to", rampRate(a.Ramp, true)}} {
		if r.rate != nil && r.rate.PerSecond() > MaxRate {
			c.add(r.path, "want at most %d/s, got %s (%.3g per second)", int(MaxRate), r.rate, r.rate.PerSecond())
		}
	}
	if a.Connections > MaxConcurrency {
		c.add("attack.connections", "want at most %d, got %d", MaxConcurrency, a.Connections)
	}
	if a.MaxConnections > MaxConcurrency {
		c.add("attack.maxConnections", "want at most %d, got %d", MaxConcurrency, a.MaxConnections)
	}
	if a.MaxWorkers > MaxConcurrency {
		c.add("attack.maxWorkers", "want at most %d, got %d", MaxConcurrency, a.MaxWorkers)
	}
	if a.MaxBody > MaxBodyLimit {
		c.add("attack.maxBody", "want at most %s, got %s", MaxBodyLimit, a.MaxBody)
	}
	if a.Timeout.Duration > MaxTimeout {
		c.add("attack.timeout", "want at most %s, got %s", MaxTimeout, a.Timeout)
	}
	switch {
	case a.Repetitions < 0:
		c.add("attack.repetitions", "want a number ≥ 1, got %d", a.Repetitions)
	case a.Repetitions > 0 && a.Concurrency == 0:
		c.addDeps("attack.repetitions", []string{"attack.concurrency", "attack.rate", "attack.ramp"}, "repetitions needs concurrency: the closed loop sends concurrency × repetitions requests (like siege -c 5 -r 200)")
	case a.Repetitions > 0 && open:
		c.add("attack.repetitions", "repetitions is for the closed loop; with rate or ramp, concurrency only caps the workers: use requests or duration")
	case a.Repetitions > 0 && a.Requests > 0:
		c.add("attack.repetitions", "set repetitions or requests, not both")
	}
	if r := a.Rate; r != nil {
		if r.Freq <= 0 || r.Per <= 0 {
			c.add("attack.rate", "want a positive rate like 200/s")
		}
		if a.Duration.Duration == 0 && a.Requests == 0 {
			c.addDeps("attack.rate", []string{"attack.duration", "attack.requests"}, "an open-loop rate needs duration, requests or both (the attack stops at whichever comes first)")
		}
	}
	if r := a.Ramp; r != nil {
		switch {
		case r.To.IsZero():
			c.add("attack.ramp.to", "required: the final rate, like 500/s")
		case r.From.PerSecond() >= r.To.PerSecond():
			c.add("attack.ramp.to", "want a rate above from (%s), got %s", r.From, r.To)
		}
		if r.Duration.Duration <= 0 {
			c.add("attack.ramp.duration", "required: how long the rate rises, like 1m")
		}
		if a.Duration.Duration > 0 {
			c.add("attack.duration", "a ramp has its own duration: set ramp.duration")
		}
	}
	if !open && a.Concurrency > 0 && a.Repetitions == 0 && a.Duration.Duration == 0 && a.Requests == 0 {
		c.addDeps("attack.concurrency", []string{"attack.repetitions", "attack.duration", "attack.requests"}, "a closed loop needs repetitions, duration or requests (it stops at whichever comes first)")
	}
	if a.MaxWorkers > 0 && a.Concurrency > 0 {
		c.add("attack.maxWorkers", "set concurrency or maxWorkers, not both: concurrency with a rate already caps the workers")
	}
	if g := a.GRPC; g != nil {
		if !regexp.MustCompile(`^/[A-Za-z_][A-Za-z0-9_.]*/[A-Za-z_][A-Za-z0-9_]*$`).MatchString(g.Method) {
			c.add("attack.grpc.method", "want /package.Service/Method, like /grpc.health.v1.Health/Check, got %q", g.Method)
		}
		if a.Body != "" {
			c.add("attack.body", "a gRPC call's body is attack.grpc.message")
		}
		if u := s.Target.URL; u != "" {
			if _, rest, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(u, "http://"), "https://"), "/"); rest != "" {
				c.add("target.url", "with attack.grpc the path is the method: give the URL without a path, like http://127.0.0.1:9090")
			}
		}
	}
	if !slices.Contains(HTTPMethods(), a.Method) {
		c.add("attack.method", "unknown method %q (allowed: %s)", a.Method, strings.Join(HTTPMethods(), ", "))
	}
	for _, name := range slices.Sorted(maps.Keys(a.Headers)) {
		p := joinKey("attack.headers", name)
		if !isToken(name) {
			c.addKey(p, "invalid header name %q: letters, digits and !#$%%&'*+-.^_`|~ only", name)
		}
		if strings.ContainsAny(a.Headers[name], "\r\n\x00") {
			c.add(p, "header value holds a line break or NUL")
		} else if _, err := ParseTemplate(p, a.Headers[name]); err != nil {
			c.add(p, "%v", err)
		}
	}
	if a.Body != "" {
		if _, err := ParseTemplate("attack.body", a.Body); err != nil {
			c.add("attack.body", "%v", err)
		}
	}
	if a.Timeout.Duration <= 0 {
		c.add("attack.timeout", "want a duration > 0, like 10s")
	}
	if a.Connections < 0 {
		c.add("attack.connections", "want ≥ 0 (0 = default), got %d", a.Connections)
	}
	if a.MaxConnections < 0 {
		c.add("attack.maxConnections", "want ≥ 0 (0 = unlimited), got %d", a.MaxConnections)
	}
	if a.MaxBody < 0 {
		c.add("attack.maxBody", "want a size ≥ 0, like 64KiB")
	}
	if !isToken(a.RequestID) {
		c.add("attack.requestIdHeader", "invalid header name %q: letters, digits and !#$%%&'*+-.^_`|~ only", a.RequestID)
	}
	for i, r := range a.SuccessCodes {
		for j := range i {
			if o := a.SuccessCodes[j]; r.Lo >= o.Lo && r.Hi <= o.Hi {
				c.add(joinIndex("attack.successCodes", i), "%s is already in %s (attack.successCodes[%d])", r, o, j)
				break
			}
		}
	}
}

func rateFreq(r *Rate) int64 {
	if r == nil {
		return 0
	}
	return int64(r.Freq)
}
