package scenarios

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/podlogs"
)

// Defaults and limits of the Kubernetes path.
const (
	DefaultVersionLabel = "version"
	DefaultLogSettle    = 3 * time.Second
	DefaultLogSkew      = 2 * time.Second
	// DefaultLogBackground is how long before the attack each pod's usual
	// rate of matching lines is measured: thirty one-second bins, whose
	// level a burst (the previous run's tail) does not set.
	DefaultLogBackground = 30 * time.Second
	// MaxLogBackground bounds it: every stream replays that much history.
	MaxLogBackground   = 10 * time.Minute
	DefaultMetricsPath = "/metrics"
	DefaultMetricsVia  = MetricsViaProxy
)

// Ways metrics.via reaches a pod's metrics port (kube.ViaProxy, kube.ViaPortForward).
const (
	MetricsViaProxy       = "proxy"
	MetricsViaPortForward = "portForward"
)

// Attribution sources an expectation may count requests from.
const (
	SourceBody    = "body"
	SourceLogs    = "logs"
	SourceMetrics = "metrics"
)

// Sources lists the attribution sources: the response body (attribution
// rules and presets), the observed pods' logs, or their metrics.
func Sources() []string { return []string{SourceBody, SourceLogs, SourceMetrics} }

// LogGroups are the named groups a log match regex may use. request_id
// joins a line to the request that caused it (this run's id, or the data
// plane's own, which a mirrored copy shares with its primary); host or
// authority carries the Host, where Envoy marks mirrored copies with a
// -shadow suffix; status splits served lines from errors (with
// attack.successCodes); upstream is the address a proxy sent the request
// to, mapped to the pod by the inventory; method and path are kept for the
// report.
func LogGroups() []string {
	return []string{"request_id", "host", "authority", "status", "upstream", "attempt", "cluster", "pod", "version", "service", "method", "path"}
}

// LogPresetNames lists the ready-made log rules for real apps and proxies.
func LogPresetNames() []string { return podlogs.PresetNames() }

// Workload returns the observed workload with the given name, or nil.
func (s *Scenario) Workload(name string) *Workload {
	for i := range s.Observe {
		if s.Observe[i].Name == name {
			return &s.Observe[i]
		}
	}
	return nil
}

// DefaultSource is the source an expectation without one counts from:
// body when attribution has rules or a preset, else logs when some
// workload has logs, else metrics.
func (s *Scenario) DefaultSource() string {
	switch {
	case s.Attribution.Preset != "" || len(s.Attribution.Rules) > 0:
		return SourceBody
	case s.observes(SourceLogs):
		return SourceLogs
	}
	return SourceMetrics
}

// observes reports whether some workload provides source (logs or metrics).
func (s *Scenario) observes(source string) bool {
	for _, w := range s.Observe {
		if w.provides(source) {
			return true
		}
	}
	return false
}

func (w *Workload) provides(source string) bool {
	switch source {
	case SourceLogs:
		return w.Logs != nil
	case SourceMetrics:
		return w.Metrics != nil
	}
	return false
}

// HasGroup reports whether the match regex has the named group. It is
// false for a regex that does not compile (Parse refuses those).
func (l *LogSource) HasGroup(name string) bool {
	re, err := regexp.Compile(l.Match)
	return err == nil && slices.Contains(re.SubexpNames(), name)
}

// HasHost reports whether the match regex captures the Host (a host or
// authority group), where Envoy marks mirrored copies.
func (l *LogSource) HasHost() bool { return l.HasGroup("host") || l.HasGroup("authority") }

// applyObserveDefaults is ApplyDefaults for observe and the expectation
// fields that depend on it.
func (s *Scenario) applyObserveDefaults() {
	for i := range s.Observe {
		w := &s.Observe[i]
		if w.Namespace == "" {
			w.Namespace, w.namespaceDefaulted = DefaultNamespace, true
		}
		if w.VersionLabel == "" {
			w.VersionLabel = DefaultVersionLabel
		}
		if w.Clusters == nil {
			w.Clusters = s.ClusterNames()
			w.allClusters = true
		}
		if l := w.Logs; l != nil {
			if p, err := podlogs.LookupPreset(l.Preset); err == nil {
				if l.Match == "" {
					l.Match = p.Match
				}
				if l.Exclude == "" {
					l.Exclude = p.Exclude
				}
				if w.Container == "" {
					w.Container = p.Container
				}
			}
			if l.Background == nil {
				l.Background = &Duration{DefaultLogBackground}
			}
			if l.Settle.Duration == 0 {
				l.Settle.Duration = DefaultLogSettle
			}
			if l.Skew.Duration == 0 {
				l.Skew.Duration = DefaultLogSkew
			}
		}
		if m := w.Metrics; m != nil && m.Path == "" {
			m.Path = DefaultMetricsPath
		}
		if m := w.Metrics; m != nil && m.Via == "" {
			m.Via = DefaultMetricsVia
		}
	}
	source := s.DefaultSource()
	for i := range s.Expect {
		e := &s.Expect[i]
		for _, k := range e.specs() {
			k.resolve(s, source)
		}
	}
}

// hasContext reports whether the declared cluster name has a context.
func (s *Scenario) hasContext(name string) (index int, ok bool) {
	for i, c := range s.Clusters {
		if c.Name == name {
			return i, c.Context != ""
		}
	}
	return -1, false
}

// noContext explains a declared cluster without a context to a reader
// who needs it reached through its API server.
func noContext(name string, index int, why string) string {
	return fmt.Sprintf("cluster %s has no context: %s, so set clusters[%d].context to the kubeconfig context that reaches %s", name, why, index, name)
}

var (
	workloadNameRE = regexp.MustCompile(`^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$`)
	// Prometheus metric and label names (the classic character set, which
	// every exposition format can carry unquoted).
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNamePR  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

func (s *Scenario) checkObserve(c *checker) {
	names := map[string]int{}
	for i := range s.Observe {
		w := &s.Observe[i]
		p := joinIndex("observe", i)
		switch {
		case w.Name == "":
			c.add(p+".name", "required: the name expectations and reports use for this workload, like callme-v2")
		case !workloadNameRE.MatchString(w.Name):
			c.add(p+".name", "invalid workload name %q: want letters, digits, '-', '_' and '.', starting and ending with a letter or digit", w.Name)
		default:
			if j, dup := names[w.Name]; dup {
				c.add(p+".name", "duplicate workload %q (also observe[%d])", w.Name, j)
			} else {
				names[w.Name] = i
			}
		}
		if !isDNSLabel(w.Namespace) {
			c.add(p+".namespace", "invalid namespace %q: want lowercase letters, digits and '-'", w.Namespace)
		}
		switch {
		case strings.TrimSpace(w.Selector) == "":
			c.add(p+".selector", `required: a label selector for the workload's pods, like "app=callme-service" or "app=callme-service,version in (v1,v2)"`)
		default:
			if err := checkSelector(w.Selector); err != nil {
				c.add(p+".selector", "invalid label selector %q: %v", w.Selector, err)
			}
		}
		s.checkObserveClusters(c, p, w)
		if w.Container != "" && !isDNSLabel(w.Container) {
			c.add(p+".container", "invalid container name %q: want lowercase letters, digits and '-'", w.Container)
		}
		if err := checkLabelKey(w.VersionLabel); err != nil {
			c.add(p+".versionLabel", "%v", err)
		}
		if l := w.Logs; l != nil {
			checkLogSource(c, p+".logs", l)
		}
		if m := w.Metrics; m != nil {
			checkMetricsSource(c, p+".metrics", m)
		}
	}
}

func (s *Scenario) checkObserveClusters(c *checker, p string, w *Workload) {
	if len(w.Clusters) == 0 {
		if len(s.Clusters) == 0 {
			c.add(p+".clusters", "no clusters to observe: declare clusters with a context each (pods are listed through each cluster's API server)")
		} else {
			c.add(p+".clusters", "empty: list the declared clusters to observe (%s), or leave clusters out for all of them", strings.Join(s.ClusterNames(), ", "))
		}
		return
	}
	seen := map[string]bool{}
	for j, name := range w.Clusters {
		cp := joinIndex(p+".clusters", j)
		switch {
		case name == "":
			c.add(cp, "empty cluster name")
		case seen[name]:
			c.add(cp, "duplicate cluster %s", name)
		case !s.declared(name):
			c.add(cp, "%s", s.unknownCluster(name))
		default:
			if k, ok := s.hasContext(name); !ok {
				msg := noContext(name, k, "observe lists pods and reads their logs and metrics through each cluster's API server")
				if w.allClusters {
					msg += fmt.Sprintf(" (%s.clusters defaults to every declared cluster: list the clusters to observe to leave %s out)", p, name)
				}
				c.add(cp, "%s", msg)
			}
		}
		seen[name] = true
	}
}

func checkLogSource(c *checker, p string, l *LogSource) {
	presetOK := true
	if l.Preset != "" {
		if _, err := podlogs.LookupPreset(l.Preset); err != nil {
			c.add(p+".preset", "unknown log preset %q (known: %s)", l.Preset, strings.Join(LogPresetNames(), ", "))
			presetOK = false
		}
	}
	switch re, err := regexp.Compile(l.Match); {
	case l.Match == "" && !presetOK:
		// Said at preset.
	case l.Match == "":
		c.add(p+".match", "required: a regex that matches the line the app logs per served request, with named groups among %s, or a preset (%s)", strings.Join(LogGroups(), ", "), strings.Join(LogPresetNames(), ", "))
	case err != nil:
		c.add(p+".match", "invalid regex: %v", err)
	default:
		for _, g := range re.SubexpNames() {
			if g != "" && !slices.Contains(LogGroups(), g) {
				c.add(p+".match", "named group %q is not allowed (use %s)", g, strings.Join(LogGroups(), ", "))
			}
		}
		if re.MatchString("") {
			c.add(p+".match", "the regex matches an empty line, so every log line would count as a served request: make it match only the request line")
		}
	}
	if l.Exclude != "" {
		if re, err := regexp.Compile(l.Exclude); err != nil {
			c.add(p+".exclude", "invalid regex: %v", err)
		} else if re.MatchString("") {
			c.add(p+".exclude", "the regex matches an empty line, so it would exclude every line: make it match only the lines to leave out, like \"kube-probe/")
		}
	}
	if b := l.Background; b != nil && b.Duration > MaxLogBackground {
		c.add(p+".background", "want at most %s (every log stream replays that much history), got %s", MaxLogBackground, b.Duration)
	}
	if l.Settle.Duration <= 0 {
		c.add(p+".settle", "want a duration > 0, like 3s (logs are read after the attack until counts stop growing for this long)")
	}
	if l.Skew.Duration <= 0 {
		c.add(p+".skew", "want a duration > 0, like 2s (logs are read from the attack start minus this clock skew)")
	}
}

func checkMetricsSource(c *checker, p string, m *MetricsSource) {
	switch {
	case m.Port == "":
		c.add(p+".port", "required: the pod's metrics port, a number or a named container port")
	case !validPort(m.Port):
		c.add(p+".port", "invalid port %q: want 1..65535 or a port name (up to 15 lowercase letters, digits and '-')", m.Port)
	}
	if !strings.HasPrefix(m.Path, "/") {
		c.add(p+".path", "want a path starting with /, like /metrics or /actuator/prometheus, got %q", m.Path)
	}
	if m.Via != MetricsViaProxy && m.Via != MetricsViaPortForward {
		c.add(p+".via", "want %s (the API server's pod proxy) or %s (a port-forward to the pod), got %q", MetricsViaProxy, MetricsViaPortForward, m.Via)
	}
	switch {
	case m.Counter == "":
		c.add(p+".counter", "required: the Prometheus counter whose per-pod delta counts requests, like istio_requests_total or http_server_requests_seconds_count")
	case !metricNameRE.MatchString(m.Counter):
		c.add(p+".counter", "invalid metric name %q: want letters, digits, '_' and ':', not starting with a digit, like istio_requests_total", m.Counter)
	}
	for _, k := range slices.Sorted(maps.Keys(m.Labels)) {
		kp := joinKey(p+".labels", k)
		switch {
		case !labelNamePR.MatchString(k):
			c.addKey(kp, "invalid Prometheus label name %q: want letters, digits and '_', not starting with a digit", k)
		case strings.HasPrefix(k, "__"):
			c.addKey(kp, "label names starting with __ are reserved by Prometheus and never exposed")
		}
	}
}

// attributed is an expectation that counts requests by bucket and so has
// a source: split, reached, only or never.
type attributed struct {
	kind    string
	path    string
	by      string
	source  string
	buckets []string // the clusters the counts must cover (by cluster)
}

// attributedExpectations lists the expectations that have a source, with
// the clusters each needs seen when it counts from logs or metrics: a
// split's and reached/never's buckets, and for only every declared
// cluster, since what only measures is the traffic outside its set.
func (s *Scenario) attributedExpectations() []attributed {
	var out []attributed
	for i := range s.Expect {
		e := &s.Expect[i]
		p := joinIndex("expect", i)
		for _, k := range e.specs() {
			if k.Attributed() {
				out = append(out, attributed{kind: k.Kind(), path: p + "." + k.Kind(), by: k.Dimension(),
					source: k.CountedFrom(), buckets: k.covers(s)})
			}
		}
	}
	return out
}

// checkSources checks that each expectation's source can see what it
// counts. When nothing can attribute at all, checkAttribution has said so
// and the sources the default fell back to are not blamed again.
func (s *Scenario) checkSources(c *checker) {
	body := s.Attribution.Preset != "" || len(s.Attribution.Rules) > 0
	nothing := !body && !s.observes(SourceLogs) && !s.observes(SourceMetrics)
	def := s.DefaultSource()
	for _, a := range s.attributedExpectations() {
		sp := a.path + ".source"
		if !slices.Contains(Sources(), a.source) {
			c.add(sp, "want one of %s, got %q", strings.Join(Sources(), ", "), a.source)
			continue
		}
		if nothing && a.source == def {
			continue
		}
		note := ""
		if a.source == def && !body {
			note = fmt.Sprintf(" (%s is the default source: attribution has no rules or preset)", a.source)
		}
		switch a.source {
		case SourceBody:
			if !body {
				c.add(sp, "source body needs attribution rules or a preset to read the response with; use logs or metrics to count from observe workloads")
			}
		case SourceLogs, SourceMetrics:
			field := "observe[]." + a.source
			if !s.observes(a.source) {
				c.add(sp, "source %s needs an observe workload with %s%s", a.source, a.source, note)
				continue
			}
			var missing []string
			for _, cl := range a.buckets {
				if s.declared(cl) && !s.coveredBy(a.source, cl) {
					missing = append(missing, cl)
				}
			}
			if len(missing) > 0 {
				what := "its buckets"
				if a.kind == "only" {
					what = "every declared cluster (only measures the traffic outside its set)"
				}
				c.add(sp, "%s by cluster from %s must see %s, but no observe workload with %s lists %s%s",
					a.kind, a.source, what, field, strings.Join(missing, ", "), note)
			}
		}
	}
}

// coveredBy reports whether a workload providing source observes cluster.
func (s *Scenario) coveredBy(source, cluster string) bool {
	for i := range s.Observe {
		if s.Observe[i].provides(source) && slices.Contains(s.Observe[i].Clusters, cluster) {
			return true
		}
	}
	return false
}

// inventoried reports whether some observe workload lists cluster, so the
// inventory counts its ready pods.
func (s *Scenario) inventoried(cluster string) bool {
	for _, w := range s.Observe {
		if slices.Contains(w.Clusters, cluster) {
			return true
		}
	}
	return false
}

func validRegex(expr string) bool {
	_, err := regexp.Compile(expr)
	return expr != "" && err == nil
}
