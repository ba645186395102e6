package scenarios

import (
	"fmt"
	"io"
	"maps"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/mesh-verify/mesh-verify/attribution"
)

// Validate checks a scenario built in code or loaded from the catalog.
// Parse already validates what it returns; this version cannot know lines,
// so its errors carry the file (if any) and the field but no position.
func (s *Scenario) Validate() error {
	var errs Errors
	for _, i := range s.check() {
		errs = append(errs, &FieldError{File: s.File, Field: i.path, Msg: i.msg})
	}
	return errOrNil(errs)
}

// PresetNames lists the ready-made attribution rule sets.
func PresetNames() []string { return attribution.PresetNames() }

// IdentityFields are what attribution can learn about the server of a
// request, and so the only named groups and field values a rule may use.
func IdentityFields() []string { return []string{"cluster", "pod", "version", "service"} }

// Dimensions are what an expectation may group requests by.
func Dimensions() []string { return []string{"cluster", "pod", "version"} }

// SplitModels are the expected-share models (docs/statistics.md §1).
func SplitModels() []string {
	return []string{"weights", "equal", "equal-per-pod", "link-cost-inverse", "link-cost-balanced"}
}

// HTTPMethods are the methods an attack may use.
func HTTPMethods() []string {
	return []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "CONNECT"}
}

// TemplateData is what {{.RequestID}} and {{.Seq}} in the target URL or
// path, headers and body expand to for each request.
type TemplateData struct {
	// RequestID is the run id plus the sequence number, also sent in the
	// request id header, so logs and mirrors can be joined back.
	RequestID string
	// Seq is the request's 0-based sequence number in the attack.
	Seq uint64
}

// ParseTemplate parses a request template. It is executed once on sample
// data here, so a misspelled {{.RequestId}} is a load error rather than a
// failure of every request mid-attack.
func ParseTemplate(name, text string) (*template.Template, error) {
	t, err := template.New(name).Option("missingkey=error").Parse(text)
	if err != nil {
		return nil, fmt.Errorf("invalid template: %s", trimTemplateErr(name, err))
	}
	if err := t.Execute(io.Discard, TemplateData{RequestID: "run-0", Seq: 0}); err != nil {
		return nil, fmt.Errorf("invalid template (only {{.RequestID}} and {{.Seq}} exist): %s", trimTemplateErr(name, err))
	}
	return t, nil
}

// trimTemplateErr drops text/template's "template: NAME:" prefix and its
// "executing ... at <...>:" context, which repeat what the field says.
func trimTemplateErr(name string, err error) string {
	msg := strings.TrimPrefix(err.Error(), "template: "+name+":")
	if _, after, ok := strings.Cut(msg, "executing "); ok {
		if i := strings.Index(after, ">: "); i >= 0 {
			return after[i+3:]
		}
	}
	return strings.TrimSpace(msg)
}

// checker collects issues; add keeps the call sites short.
type checker struct{ issues []issue }

func (c *checker) add(path, format string, args ...any) {
	c.issues = append(c.issues, issue{path: path, msg: fmt.Sprintf(format, args...)})
}

// addDeps records an issue that follows from the fields in deps.
func (c *checker) addDeps(path string, deps []string, format string, args ...any) {
	c.issues = append(c.issues, issue{path: path, msg: fmt.Sprintf(format, args...), deps: deps})
}

func (c *checker) addKey(path, format string, args ...any) {
	c.issues = append(c.issues, issue{path: path, msg: fmt.Sprintf(format, args...), atKey: true})
}

// check is validation without positions; Parse positions the issues.
func (s *Scenario) check() []issue {
	c := &checker{}
	if s.APIVersion != APIVersion {
		if s.APIVersion == "" {
			c.add("apiVersion", "required: %s", APIVersion)
		} else {
			c.add("apiVersion", "unsupported version %q: this build reads %s", s.APIVersion, APIVersion)
		}
	}
	if s.Kind != Kind {
		c.add("kind", "want %s, got %q", Kind, s.Kind)
	}
	switch {
	case s.Metadata.Name == "":
		c.add("metadata.name", "required: a name like url-split (lowercase letters, digits, '-' and '.')")
	case !isDNSName(s.Metadata.Name):
		c.add("metadata.name", "invalid name %q: want lowercase letters, digits, '-' and '.', starting and ending with a letter or digit, at most 253 characters", s.Metadata.Name)
	}
	s.checkClusters(c)
	s.checkTarget(c)
	s.checkAttack(c)
	s.checkWorkers(c)
	s.checkAttribution(c)
	s.checkObserve(c)
	s.checkStatistics(c)
	s.checkExpect(c)
	s.checkSources(c)
	return c.issues
}

func isDNSName(s string) bool {
	return len(s) <= 253 && regexp.MustCompile(`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`).MatchString(s)
}

func (s *Scenario) checkClusters(c *checker) {
	seen := map[string]int{}
	for i, cl := range s.Clusters {
		p := joinIndex("clusters", i)
		switch {
		case cl.Name == "":
			c.add(p+".name", "required: the bucket name expectations use, like c1")
		case !regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`).MatchString(cl.Name):
			c.add(p+".name", "invalid cluster name %q: want letters, digits, '-', '_' and '.'", cl.Name)
		default:
			if j, dup := seen[cl.Name]; dup {
				c.add(p+".name", "duplicate cluster %q (also clusters[%d])", cl.Name, j)
			} else {
				seen[cl.Name] = i
			}
		}
		if cl.Cost != nil && !(*cl.Cost >= 0 && !math.IsInf(*cl.Cost, 1)) {
			c.add(p+".cost", "want a link cost ≥ 0 (0 = local), got %v", *cl.Cost)
		}
	}
}

// declared reports whether name is a declared cluster.
func (s *Scenario) declared(name string) bool {
	return slices.Contains(s.ClusterNames(), name)
}

func (s *Scenario) unknownCluster(name string) string {
	return fmt.Sprintf("unknown cluster %s (declared: %s)", name, strings.Join(s.ClusterNames(), ", "))
}

func (s *Scenario) checkTarget(c *checker) {
	t := s.Target
	switch {
	case t.URL == "" && t.Forward == nil:
		c.add("target", "set url (a plain http(s) URL) or portForward (a pod or service reached through the API server)")
	case t.URL != "" && t.Forward != nil:
		c.add("target.portForward", "set either url or portForward, not both")
	}
	if t.URL != "" {
		checkURL(c, "target.url", t.URL)
		if t.Path != "" && t.Forward == nil {
			c.add("target.path", "path applies to portForward; put the path in url")
		}
	}
	if f := t.Forward; f != nil {
		p := "target.portForward"
		switch {
		case f.Cluster == "":
			c.add(p+".cluster", "required: the declared cluster to forward into (%s)", declaredList(s))
		case !s.declared(f.Cluster):
			c.add(p+".cluster", "%s", s.unknownCluster(f.Cluster))
		default:
			if k, ok := s.hasContext(f.Cluster); !ok {
				c.add(p+".cluster", "%s", noContext(f.Cluster, k, "portForward reaches the target through the cluster's API server"))
			}
		}
		if !isDNSLabel(f.Namespace) {
			c.add(p+".namespace", "invalid namespace %q: want lowercase letters, digits and '-'", f.Namespace)
		}
		if f.Resource == "" {
			c.add(p+".resource", "required: pod/NAME, svc/NAME, service/NAME, deploy/NAME or deployment/NAME")
		} else if !regexp.MustCompile(`^(pod|svc|service|deploy|deployment)/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`).MatchString(f.Resource) {
			c.add(p+".resource", "invalid resource %q: want pod/NAME, svc/NAME, service/NAME, deploy/NAME or deployment/NAME", f.Resource)
		}
		switch {
		case f.Port == "":
			c.add(p+".port", "required: a port number or a named port")
		case !validPort(f.Port):
			c.add(p+".port", "invalid port %q: want 1..65535 or a port name (up to 15 lowercase letters, digits and '-')", f.Port)
		}
		if f.Scheme != "http" && f.Scheme != "https" {
			c.add(p+".scheme", "want http or https, got %q", f.Scheme)
		}
		if t.Path != "" {
			if !strings.HasPrefix(t.Path, "/") {
				c.add("target.path", "want a path starting with /, got %q", t.Path)
			}
			if _, err := ParseTemplate("target.path", t.Path); err != nil {
				c.add("target.path", "%v", err)
			}
		}
	}
	if tl := t.TLS; tl != nil {
		https := strings.HasPrefix(strings.ToLower(t.URL), "https://") || t.Forward != nil && t.Forward.Scheme == "https"
		switch {
		case !https && (t.URL != "" || t.Forward != nil):
			c.add("target.tls", "tls applies to an https target (url https://…, or portForward.scheme: https)")
		case tl.InsecureSkipVerify && (tl.CA != "" || tl.ServerName != ""):
			c.add("target.tls.insecureSkipVerify", "insecureSkipVerify accepts any certificate: ca and serverName would not be checked")
		}
	}
}

func declaredList(s *Scenario) string {
	if len(s.Clusters) == 0 {
		return "none declared: add clusters"
	}
	return "declared: " + strings.Join(s.ClusterNames(), ", ")
}

func checkURL(c *checker, path, raw string) {
	sample, err := ParseTemplate(path, raw)
	if err != nil {
		c.add(path, "%v", err)
		return
	}
	var b strings.Builder
	_ = sample.Execute(&b, TemplateData{RequestID: "run-0", Seq: 0})
	u, err := url.Parse(b.String())
	switch {
	case err != nil:
		c.add(path, "invalid URL: %v", err)
	case u.Scheme != "http" && u.Scheme != "https":
		c.add(path, "want an http:// or https:// URL, got scheme %q", u.Scheme)
	case u.Host == "":
		c.add(path, "URL %q has no host", raw)
	}
}

func isDNSLabel(s string) bool {
	return len(s) <= 63 && regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`).MatchString(s)
}

// validPort accepts what kubectl port-forward accepts for the remote port:
// a number or an IANA_SVC_NAME (as in a container's named port).
func validPort(p string) bool {
	if n, err := strconv.Atoi(p); err == nil {
		return n >= 1 && n <= 65535
	}
	return len(p) <= 15 && regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`).MatchString(p) &&
		regexp.MustCompile(`[a-z]`).MatchString(p) && !strings.Contains(p, "--")
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

// Upper bounds of the attack (README.md, "Limits"): beyond them a run
// exhausts memory, descriptors or the machine before it measures anything
// (a concurrency of 10^12 is Go's out-of-memory crash; a rate of 2^63/ns
// opened thousands of connections a second).
const (
	MaxConcurrency = 10_000
	MaxRequests    = 1_000_000_000
	MaxRate        = 1_000_000.0 // per second
	MaxDuration    = 24 * time.Hour
	MaxTimeout     = 10 * time.Minute
	MaxBodyLimit   = Size(64 << 20)
	// MaxWeight bounds split weights: shares are weights over their sum,
	// and beyond this ratio of largest to smallest a share is below what
	// any run could measure.
	MaxWeight = 1e9
)

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

func (s *Scenario) checkAttribution(c *checker) {
	at := s.Attribution
	if at.Preset != "" && !slices.Contains(PresetNames(), at.Preset) {
		c.add("attribution.preset", "unknown preset %q (known: %s)", at.Preset, strings.Join(PresetNames(), ", "))
	}
	// Without rules, requests can still be attributed from the observed
	// pods' logs or metrics (the Kubernetes path).
	if at.Preset == "" && len(at.Rules) == 0 && !s.observes(SourceLogs) && !s.observes(SourceMetrics) {
		c.add("attribution", "set a preset (%s) or at least one rule to read the response with, or observe workloads with observe[].logs (or observe[].metrics) to count requests where they are served", strings.Join(PresetNames(), ", "))
	}
	fields := strings.Join(IdentityFields(), ", ")
	for i, r := range at.Rules {
		p := joinIndex("attribution.rules", i)
		var set []string
		for _, k := range []struct{ name, v string }{{"body", r.Body}, {"header", r.Header}, {"json", r.JSON}} {
			if k.v != "" {
				set = append(set, k.name)
			}
		}
		if len(set) != 1 {
			c.add(p, "set exactly one of body (a regex on the body), header (a response header) or json (a field path), got %d", len(set))
		}
		groups, broken := false, false
		checkRegex := func(field, expr string) {
			re, err := regexp.Compile(expr)
			if err != nil {
				c.add(field, "invalid regex: %v", err)
				broken = true
				return
			}
			for _, g := range re.SubexpNames() {
				if g == "" {
					continue
				}
				groups = true
				if !slices.Contains(IdentityFields(), g) {
					c.add(field, "named group %q is not an identity field (use %s)", g, fields)
				}
			}
		}
		if r.Body != "" {
			checkRegex(p+".body", r.Body)
			if r.Regex != "" {
				c.add(p+".regex", "regex applies to header and json rules; a body rule's body is itself the regex")
			}
		} else if r.Regex != "" {
			checkRegex(p+".regex", r.Regex)
		}
		if r.Header != "" && !isToken(r.Header) {
			c.add(p+".header", "invalid header name %q", r.Header)
		}
		if r.JSON != "" && slices.Contains(strings.Split(r.JSON, "."), "") {
			c.add(p+".json", "invalid field path %q: want names and indexes joined by dots, like data.0.cluster", r.JSON)
		}
		switch {
		case r.Field != "" && !slices.Contains(IdentityFields(), r.Field):
			c.add(p+".field", "unknown field %q (use %s)", r.Field, fields)
		case r.Field != "" && groups:
			c.add(p+".field", "field is for rules without named groups; this regex names its groups")
		case r.Field == "" && !groups && !broken && len(set) == 1:
			c.add(p, "a rule without named groups needs field (%s): which identity field the captured value is", fields)
		}
		if r.Match != "first" && r.Match != "last" {
			c.add(p+".match", "want first or last, got %q", r.Match)
		}
	}
	for i, m := range at.Map {
		p := joinIndex("attribution.map", i)
		if !slices.Contains(IdentityFields(), m.From) {
			c.add(p+".from", "want one of %s, got %q", fields, m.From)
		}
		if !slices.Contains(IdentityFields(), m.To) {
			c.add(p+".to", "want one of %s, got %q", fields, m.To)
		}
		if len(m.Values) == 0 {
			c.add(p+".values", "required: at least one %s: %s pair", orName(m.From, "from"), orName(m.To, "to"))
		}
		for _, k := range slices.Sorted(maps.Keys(m.Values)) {
			v := m.Values[k]
			switch {
			case v == "":
				c.add(joinKey(p+".values", k), "empty value")
			case m.To == "cluster" && len(s.Clusters) > 0 && !s.declared(v):
				c.add(joinKey(p+".values", k), "%s", s.unknownCluster(v))
			}
		}
	}
}

func orName(v, fallback string) string {
	if v == "" {
		return fallback
	}
	return v
}

func (s *Scenario) checkStatistics(c *checker) {
	st := s.Statistics
	if !(st.Confidence > 0.5 && st.Confidence < 1) {
		c.add("statistics.confidence", "want a level in (0.5, 1), like 0.95, got %v", st.Confidence)
	}
	if !(st.Power > 0 && st.Power < 1) {
		c.add("statistics.power", "want a probability in (0, 1), like 0.8, got %v", st.Power)
	}
	if !(st.Margin > 0 && st.Margin <= 0.5) {
		c.add("statistics.margin", "want a margin in (0, 50%%], like 5%%, got %s", st.Margin)
	}
	if st.Interval != "wilson" && st.Interval != "clopper-pearson" {
		c.add("statistics.interval", "want wilson or clopper-pearson, got %q", st.Interval)
	}
	if st.Inconclusive != "fail" && st.Inconclusive != "pass" {
		c.add("statistics.inconclusive", "want fail or pass (how a gate treats INCONCLUSIVE), got %q", st.Inconclusive)
	}
	checkBalancing(c, "statistics.balancing", st.Balancing)
	switch st.Stop {
	case "early":
		if st.Looks < 2 || st.Looks > 20 {
			c.add("statistics.looks", "want 2..20 interim looks, got %d", st.Looks)
		}
	case "end":
		if st.Looks != 0 {
			c.add("statistics.looks", "looks applies only with stop: early")
		}
	default:
		c.add("statistics.stop", "want end or early, got %q", st.Stop)
	}
}

// Balancings are the sampling units statistics.balancing may name.
func Balancings() []string { return []string{BalancingRequest, BalancingConnection} }

func checkBalancing(c *checker, path, b string) {
	if b != "" && !slices.Contains(Balancings(), b) {
		c.add(path, "want request (the mesh picks a backend per request) or connection (per keep-alive connection), got %q", b)
	}
}

func (s *Scenario) checkExpect(c *checker) {
	if len(s.Expect) == 0 {
		c.add("expect", "required: at least one expectation (split, reached, only, never, successRate, latency or mirror)")
	}
	names := map[string]int{}
	for i := range s.Expect {
		e := &s.Expect[i]
		p := joinIndex("expect", i)
		if j, dup := names[e.Name]; dup {
			c.add(p+".name", "duplicate name %q (also expect[%d])", e.Name, j)
		} else {
			names[e.Name] = i
		}
		switch k := e.kinds(); len(k) {
		case 0:
			c.add(p, "set one of split, reached, only, never, successRate, latency or mirror")
		case 1:
		default:
			c.add(p+"."+k[1], "one expectation has one kind and %s is already set: make %s a separate list item", k[0], k[1])
		}
		if e.Split != nil {
			s.checkSplit(c, p+".split", e.Split)
		}
		for _, b := range []struct {
			kind string
			set  *BucketSet
		}{{"reached", e.Reached}, {"only", e.Only}, {"never", e.Never}} {
			if b.set != nil {
				s.checkBucketSet(c, p+"."+b.kind, b.kind, b.set)
			}
		}
		if sr := e.SuccessRate; sr != nil && !(sr.AtLeast > 0 && sr.AtLeast <= 1) {
			c.add(p+".successRate.atLeast", "want a share in (0, 100%%], like 99%%")
		}
		if m := e.Mirror; m != nil {
			s.checkMirror(c, p+".mirror", m)
		}
		if l := e.Latency; l != nil {
			if l.Below.Duration <= 0 {
				c.add(p+".latency.below", "required: a duration > 0, like 250ms")
			}
			if !(l.Percentile > 0 && l.Percentile <= 100) {
				c.add(p+".latency.percentile", "want a percentile in (0, 100], like 99, got %v", l.Percentile)
			}
		}
	}
}

// checkBuckets checks bucket names of one dimension: clusters must be
// declared ones, so a typo is a load error rather than a FAIL.
func (s *Scenario) checkBuckets(c *checker, path, by string, buckets []string) {
	seen := map[string]bool{}
	for i, b := range buckets {
		p := joinIndex(path, i)
		switch {
		case b == "":
			c.add(p, "empty bucket name")
		case seen[b]:
			c.add(p, "duplicate bucket %s", b)
		case by == "cluster" && len(s.Clusters) > 0 && !s.declared(b):
			c.add(p, "%s", s.unknownCluster(b))
		}
		seen[b] = true
	}
}

func checkBy(c *checker, path, by string) bool {
	if !slices.Contains(Dimensions(), by) {
		c.add(path, "want one of %s, got %q", strings.Join(Dimensions(), ", "), by)
		return false
	}
	return true
}

func checkMargin(c *checker, path string, m *Percent, allowZero bool) {
	if m == nil {
		return
	}
	if !(*m > 0 || allowZero && *m == 0) || *m > 0.5 {
		lo := "("
		if allowZero {
			lo = "["
		}
		c.add(path, "want a margin in %s0, 50%%], like 5%%, got %s", lo, *m)
	}
}

func (s *Scenario) checkSplit(c *checker, p string, sp *Split) {
	byOK := checkBy(c, p+".by", sp.By)
	if sp.FromMesh != nil {
		s.checkFromMesh(c, p, sp)
		return
	}
	if !slices.Contains(SplitModels(), sp.Model) {
		c.add(p+".model", "unknown model %q (allowed: %s)", sp.Model, strings.Join(SplitModels(), ", "))
		return
	}
	byCluster := sp.By == "cluster"
	perPod := sp.Model == "equal-per-pod" || strings.HasPrefix(sp.Model, "link-cost-")

	if sp.Model == "weights" {
		if len(sp.Weights) == 0 {
			c.add(p+".weights", "required for model weights: bucket: weight pairs, like {c1: 80, c2: 20}")
		}
		if len(sp.Buckets) > 0 {
			c.add(p+".buckets", "buckets apply to model equal; with weights, the weights' keys are the buckets")
		}
	} else if len(sp.Weights) > 0 {
		c.add(p+".weights", "weights apply to model weights, not %s", sp.Model)
	}
	total := 0.0
	for _, k := range slices.Sorted(maps.Keys(sp.Weights)) {
		w := sp.Weights[k]
		kp := joinKey(p+".weights", k)
		if byCluster && len(s.Clusters) > 0 && !s.declared(k) {
			c.addKey(kp, "%s", s.unknownCluster(k))
		}
		if !(w >= 0) || w > MaxWeight {
			c.add(kp, "want a weight from 0 to %g, got %v", MaxWeight, w)
		} else {
			total += w
		}
	}
	if len(sp.Weights) > 0 && total == 0 {
		c.add(p+".weights", "all weights are zero: at least one must be positive")
	}
	s.checkBuckets(c, p+".buckets", sp.By, sp.Buckets)
	if sp.Model == "equal" && len(sp.Buckets) == 0 && byOK {
		switch {
		case byCluster:
			c.add(p+".buckets", "equal by cluster needs buckets or declared clusters")
		case sp.By == "version":
			c.add(p+".buckets", "equal by version needs the versions as buckets, like [v1, v2]")
		case len(s.Observe) == 0:
			c.add(p+".buckets", "equal by pod needs the pods as buckets (or observe the workload: the inventory lists its pods)")
		}
	}

	if perPod {
		split := sp.Buckets
		if len(split) == 0 {
			split = s.ClusterNames()
		}
		switch {
		case byCluster:
		case sp.By == "pod":
			// Each cluster's share is spread evenly over its ready pods,
			// whose names only the inventory knows; buckets name clusters.
			var unnamed []string
			for _, cl := range split {
				if !s.declared(cl) {
					c.add(p+".buckets", "by pod with model %s, buckets name the clusters to include: %s", sp.Model, s.unknownCluster(cl))
				} else if !s.inventoried(cl) {
					unnamed = append(unnamed, cl)
				}
			}
			if len(unnamed) > 0 {
				c.add(p+".by", "by pod with model %s needs the names of the ready pods in %s: observe the workload there (observe[].clusters)", sp.Model, strings.Join(unnamed, ", "))
			}
		default:
			c.add(p+".by", "model %s splits by cluster, or by pod when the inventory names the pods, got by: %s", sp.Model, sp.By)
		}
		if len(split) == 0 {
			c.add(p, "model %s needs declared clusters", sp.Model)
		}
		ready := 0
		for _, k := range slices.Sorted(maps.Keys(sp.Pods)) {
			kp := joinKey(p+".pods", k)
			if !s.declared(k) {
				c.addKey(kp, "%s", s.unknownCluster(k))
			}
			if sp.Pods[k] < 0 {
				c.add(kp, "want a number of ready pods ≥ 0, got %d", sp.Pods[k])
			}
			ready += max(sp.Pods[k], 0)
		}
		// The inventory counts the ready pods of the clusters an observe
		// workload lists, so pods may be left out for those.
		var missing []string
		inventoried := false
		for _, cl := range split {
			switch _, given := sp.Pods[cl]; {
			case s.inventoried(cl):
				inventoried = true
			case !given:
				missing = append(missing, cl)
			}
		}
		if len(missing) > 0 {
			c.add(p+".pods", "model %s needs ready pods per cluster; missing %s (or observe the workload there: the inventory counts its ready pods)", sp.Model, strings.Join(missing, ", "))
		} else if ready == 0 && len(sp.Pods) > 0 && !inventoried {
			c.add(p+".pods", "no cluster has a ready pod")
		}
		if strings.HasPrefix(sp.Model, "link-cost-") {
			for j, cl := range s.Clusters {
				if !slices.Contains(split, cl.Name) {
					continue
				}
				cp := joinIndex("clusters", j) + ".cost"
				switch {
				case cl.Cost == nil:
					c.add(cp, "required by %s (%s): the link cost from the entry cluster, 0 = local", p, sp.Model)
				case sp.Model == "link-cost-inverse" && *cl.Cost == 0:
					c.add(cp, "link-cost-inverse takes shares ∝ 1/cost, so costs must be > 0 (use link-cost-balanced for a local cost 0)")
				}
			}
		}
	} else if len(sp.Pods) > 0 {
		c.add(p+".pods", "pods apply to models equal-per-pod, link-cost-inverse and link-cost-balanced, not %s", sp.Model)
	}
	if sp.Connections < 0 {
		c.add(p+".connections", "want ≥ 0, got %d", sp.Connections)
	} else if sp.Connections > 0 && sp.Model != "link-cost-balanced" {
		c.add(p+".connections", "connections applies to model link-cost-balanced")
	}
	checkMargin(c, p+".margin", sp.Margin, false)
	checkBalancing(c, p+".balancing", sp.Balancing)
	if sp.Confidence != 0 && !(sp.Confidence > 0.5 && sp.Confidence < 1) {
		c.add(p+".confidence", "want a level in (0.5, 1), like 0.95, got %v", sp.Confidence)
	}
}

func (s *Scenario) checkBucketSet(c *checker, p, kind string, b *BucketSet) {
	checkBy(c, p+".by", b.By)
	if len(b.Buckets) == 0 {
		if kind == "reached" {
			c.add(p+".buckets", "required: the %ss that must all be reached (by cluster it defaults to every declared cluster)", b.By)
		} else {
			c.add(p+".buckets", "required: at least one %s", b.By)
		}
	}
	s.checkBuckets(c, p+".buckets", b.By, b.Buckets)
	if kind == "reached" && b.Margin != nil {
		c.add(p+".margin", "margin applies to only and never")
	}
	switch {
	case b.MinShare != nil && kind != "reached":
		c.add(p+".minShare", "minShare applies to reached")
	case b.MinShare != nil && !(*b.MinShare > 0 && *b.MinShare <= 1):
		c.add(p+".minShare", "want a share in (0, 100%%], like 1%%: below it a bucket that got nothing is called missing, got %s", *b.MinShare)
	}
	checkMargin(c, p+".margin", b.Margin, true)
}

// explicitZeros catches a 0 written out for a field whose zero means
// "use the default": the default would silently replace what was written.
// It also catches a 0 written where 0 reads as "missing", so the message
// does not call a field that is there required; Parse then drops the
// other complaints about the same field.
func explicitZeros(s *Scenario, pos positions) []issue {
	var out []issue
	check := func(path string, zero bool, def string) {
		if l, ok := pos[path]; ok && zero && l.val != nil && !isNull(l.val) {
			out = append(out, issue{path: path, msg: "0 is not allowed here; leave the field out for the default " + def})
		}
	}
	check("attack.timeout", s.Attack.Timeout.Duration == 0, DefaultTimeout.String())
	check("attack.maxBody", s.Attack.MaxBody == 0, DefaultMaxBody.String())
	if l, ok := pos["attack.successCodes"]; ok && l.val != nil && !isNull(l.val) && len(l.val.Content) == 0 {
		out = append(out, issue{path: "attack.successCodes", msg: "an empty list counts no answer as a success; leave the field out for the default " + DefaultSuccessCodes})
	}
	check("statistics.confidence", s.Statistics.Confidence == 0, "0.95")
	check("statistics.power", s.Statistics.Power == 0, "0.8")
	check("statistics.margin", s.Statistics.Margin == 0, DefaultMargin.String())
	check("statistics.looks", s.Statistics.Looks == 0, "(5 with stop: early)")
	for i, w := range s.Observe {
		if l := w.Logs; l != nil {
			p := joinIndex("observe", i) + ".logs"
			check(p+".settle", l.Settle.Duration == 0, DefaultLogSettle.String())
			check(p+".skew", l.Skew.Duration == 0, DefaultLogSkew.String())
		}
	}
	for i, e := range s.Expect {
		p := joinIndex("expect", i)
		if e.Split != nil {
			check(p+".split.confidence", e.Split.Confidence == 0, "(statistics.confidence)")
		}
		if e.Latency != nil {
			check(p+".latency.percentile", e.Latency.Percentile == 0, "99")
		}
		if m := e.Mirror; m != nil {
			if l, ok := pos[p+".mirror.percent"]; ok && m.Percent == 0 && l.val != nil && !isNull(l.val) {
				out = append(out, issue{path: p + ".mirror.percent", msg: "0% mirrors nothing: want the expected share of primary requests mirrored, in (0, 100%], like 50%"})
			}
		}
	}
	return out
}
