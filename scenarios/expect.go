package scenarios

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
)

// The kinds of expectation, as a scenario spells them and reports name them.
const (
	KindSplit       = "split"
	KindReached     = "reached"
	KindOnly        = "only"
	KindNever       = "never"
	KindSuccessRate = "successRate"
	KindLatency     = "latency"
	KindMirror      = "mirror"
)

// Spec is what one kind of expectation says: *Split, Reached, Only, Never
// (each a *BucketSet), *SuccessRate, *Latency or *MirrorExpect. The file
// spells an expectation as a union of optional fields; Spec is that union
// resolved, so that its readers (the checks here, judge/) ask the kind
// instead of testing each field.
type Spec interface {
	// Kind is the expectation's kind (KindSplit ...).
	Kind() string
	// Dimension is the dimension the kind groups requests by; "" for success
	// rate, latency and mirror.
	Dimension() string
	// CountedFrom is where the kind's counts come from as the file (or the
	// defaults) says; "" when it never counts attributed requests.
	CountedFrom() string
	// Attributed reports whether the kind judges attributed buckets
	// (split, reached, only, never): it then needs rules, a source and a
	// reconciliation.
	Attributed() bool
	// OwnBalancing is the sampling unit the kind itself sets ("" to inherit
	// statistics.balancing).
	OwnBalancing() string

	// applyDefaults fills in what the kind leaves out; clusters are the
	// declared ones.
	applyDefaults(clusters []string)
	// resolve fills in what depends on the observe section's defaults:
	// an attributed kind's source, a mirror's shadow.
	resolve(s *Scenario, source string)
	// covers lists the clusters an attributed kind's counts must cover
	// when it counts by cluster from logs or metrics.
	covers(s *Scenario) []string
	// explicitZeros adds the kind's fields written out as 0 whose zero
	// means the default (explicitZeros in validate.go).
	explicitZeros(p string, pos positions, check func(path string, zero bool, def string)) []issue
	// check adds the kind's problems under path (expect[i].KIND).
	check(s *Scenario, c *checker, path string)
	// derivedName reads like the expectation, for reports of unnamed ones.
	derivedName() string
}

// Reached, Only and Never are the bucket-set kinds: one BucketSet each,
// told apart by the field the file sets.
type (
	Reached struct{ *BucketSet }
	Only    struct{ *BucketSet }
	Never   struct{ *BucketSet }
)

// specs lists the kinds the expectation sets, in the order the file's
// fields are documented: the one place the union's fields are tested.
func (e *Expectation) specs() []Spec {
	var out []Spec
	if e.Split != nil {
		out = append(out, e.Split)
	}
	if e.Reached != nil {
		out = append(out, Reached{e.Reached})
	}
	if e.Only != nil {
		out = append(out, Only{e.Only})
	}
	if e.Never != nil {
		out = append(out, Never{e.Never})
	}
	if e.SuccessRate != nil {
		out = append(out, e.SuccessRate)
	}
	if e.Latency != nil {
		out = append(out, e.Latency)
	}
	if e.Mirror != nil {
		out = append(out, e.Mirror)
	}
	return out
}

// Spec is the expectation's one kind, or nil when none or several are
// set (which validation rejects).
func (e *Expectation) Spec() Spec {
	if k := e.specs(); len(k) == 1 {
		return k[0]
	}
	return nil
}

// sets reports whether the expectation sets kind, alone or not.
func (e *Expectation) sets(kind string) bool {
	for _, k := range e.specs() {
		if k.Kind() == kind {
			return true
		}
	}
	return false
}

// Kind names the expectation's kind (split, reached, only, never,
// successRate, latency, mirror), or "" when none or several are set.
func (e *Expectation) Kind() string {
	if k := e.Spec(); k != nil {
		return k.Kind()
	}
	return ""
}

// derivedName reads like the expectation, for reports of unnamed ones.
func (e *Expectation) derivedName() string {
	if k := e.specs(); len(k) > 0 {
		return k[0].derivedName()
	}
	return "expectation"
}

// Kind is the expectation kind (Spec).
func (sp *Split) Kind() string { return KindSplit }

// Dimension is what the kind groups requests by (Spec).
func (sp *Split) Dimension() string { return sp.By }

// CountedFrom is where the kind's counts come from (Spec).
func (sp *Split) CountedFrom() string { return sp.Source }

// Attributed reports whether the kind judges attributed buckets (Spec).
func (sp *Split) Attributed() bool { return true }

// OwnBalancing is the sampling unit the kind sets itself (Spec).
func (sp *Split) OwnBalancing() string { return sp.Balancing }
func (sp *Split) resolve(_ *Scenario, src string) {
	if sp.Source == "" {
		sp.Source = src
	}
}

func (sp *Split) applyDefaults(clusters []string) {
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

func (sp *Split) covers(s *Scenario) []string {
	if sp.By != "cluster" {
		return nil
	}
	switch {
	case len(sp.Weights) > 0:
		return slices.Sorted(maps.Keys(sp.Weights))
	case len(sp.Buckets) > 0:
		return sp.Buckets
	}
	return s.ClusterNames()
}

func (sp *Split) explicitZeros(p string, _ positions, check func(string, bool, string)) []issue {
	check(p+".confidence", sp.Confidence == 0, "(statistics.confidence)")
	return nil
}
func (sp *Split) check(s *Scenario, c *checker, p string) { s.checkSplit(c, p, sp) }
func (sp *Split) derivedName() string {
	return fmt.Sprintf("split by %s (%s)", sp.By, sp.Model)
}

// Dimension is the dimension of the set's buckets.
func (b *BucketSet) Dimension() string { return b.By }

// CountedFrom is where the set's counts come from.
func (b *BucketSet) CountedFrom() string { return b.Source }

// Attributed: a bucket set judges attributed buckets.
func (b *BucketSet) Attributed() bool { return true }

// OwnBalancing: a bucket set inherits statistics.balancing.
func (b *BucketSet) OwnBalancing() string { return "" }

func (b *BucketSet) resolve(_ *Scenario, src string) {
	if b.Source == "" {
		b.Source = src
	}
}

func (b *BucketSet) applyDefaults([]string) {
	if b.By == "" {
		b.By = DefaultBy
	}
}

func (b *BucketSet) covers(*Scenario) []string {
	if b.By != "cluster" {
		return nil
	}
	return b.Buckets
}

func (b *BucketSet) explicitZeros(string, positions, func(string, bool, string)) []issue { return nil }

// applyDefaults: "reached: {}" means every declared cluster is reached.
func (r Reached) applyDefaults(clusters []string) {
	r.BucketSet.applyDefaults(clusters)
	if r.By == "cluster" && len(r.Buckets) == 0 {
		r.Buckets = slices.Clone(clusters)
	}
}

// covers: what only measures is the traffic outside its set, so its
// counts must cover every declared cluster.
func (o Only) covers(s *Scenario) []string {
	if o.By != "cluster" {
		return nil
	}
	return s.ClusterNames()
}

// Kind is the expectation kind (Spec).
func (r Reached) Kind() string { return KindReached }
func (r Reached) check(s *Scenario, c *checker, p string) {
	s.checkBucketSet(c, p, KindReached, r.BucketSet)
}
func (r Reached) derivedName() string { return fmt.Sprintf("every %s reached", r.By) }

// Kind is the expectation kind (Spec).
func (o Only) Kind() string { return KindOnly }
func (o Only) check(s *Scenario, c *checker, p string) {
	s.checkBucketSet(c, p, KindOnly, o.BucketSet)
}
func (o Only) derivedName() string {
	return fmt.Sprintf("only %s %s", o.By, strings.Join(o.Buckets, ", "))
}

// Kind is the expectation kind (Spec).
func (n Never) Kind() string { return KindNever }
func (n Never) check(s *Scenario, c *checker, p string) {
	s.checkBucketSet(c, p, KindNever, n.BucketSet)
}
func (n Never) derivedName() string {
	return fmt.Sprintf("never %s %s", n.By, strings.Join(n.Buckets, ", "))
}

// Kind is the expectation kind (Spec).
func (sr *SuccessRate) Kind() string { return KindSuccessRate }

// Dimension is what the kind groups requests by (Spec).
func (sr *SuccessRate) Dimension() string { return "" }

// CountedFrom is where the kind's counts come from (Spec).
func (sr *SuccessRate) CountedFrom() string { return "" }

// Attributed reports whether the kind judges attributed buckets (Spec).
func (sr *SuccessRate) Attributed() bool { return false }

// OwnBalancing is the sampling unit the kind sets itself (Spec).
func (sr *SuccessRate) OwnBalancing() string      { return "" }
func (sr *SuccessRate) applyDefaults([]string)    {}
func (sr *SuccessRate) resolve(*Scenario, string) {}
func (sr *SuccessRate) covers(*Scenario) []string { return nil }
func (sr *SuccessRate) explicitZeros(string, positions, func(string, bool, string)) []issue {
	return nil
}
func (sr *SuccessRate) check(_ *Scenario, c *checker, p string) {
	if !(sr.AtLeast > 0 && sr.AtLeast <= 1) {
		c.add(p+".atLeast", "want a share in (0, 100%%], like 99%%")
	}
}
func (sr *SuccessRate) derivedName() string { return "success rate ≥ " + sr.AtLeast.String() }

// Kind is the expectation kind (Spec).
func (l *Latency) Kind() string { return KindLatency }

// Dimension is what the kind groups requests by (Spec).
func (l *Latency) Dimension() string { return "" }

// CountedFrom is where the kind's counts come from (Spec).
func (l *Latency) CountedFrom() string { return "" }

// Attributed reports whether the kind judges attributed buckets (Spec).
func (l *Latency) Attributed() bool { return false }

// OwnBalancing is the sampling unit the kind sets itself (Spec).
func (l *Latency) OwnBalancing() string { return "" }
func (l *Latency) applyDefaults([]string) {
	if l.Percentile == 0 {
		l.Percentile = DefaultPercentile
	}
}
func (l *Latency) resolve(*Scenario, string) {}
func (l *Latency) covers(*Scenario) []string { return nil }
func (l *Latency) explicitZeros(p string, _ positions, check func(string, bool, string)) []issue {
	check(p+".percentile", l.Percentile == 0, "99")
	return nil
}
func (l *Latency) check(_ *Scenario, c *checker, p string) {
	if l.Below.Duration <= 0 {
		c.add(p+".below", "required: a duration > 0, like 250ms")
	}
	if !(l.Percentile > 0 && l.Percentile <= 100) {
		c.add(p+".percentile", "want a percentile in (0, 100], like 99, got %v", l.Percentile)
	}
}
func (l *Latency) derivedName() string {
	return fmt.Sprintf("p%s latency < %s", strconv.FormatFloat(l.Percentile, 'g', -1, 64), l.Below)
}

// A mirror counts copies in the target's logs: its source is the logs,
// and it is not an attributed kind (no rule places a copy in a bucket).
func (m *MirrorExpect) Kind() string { return KindMirror }

// Dimension is what the kind groups requests by (Spec).
func (m *MirrorExpect) Dimension() string { return "" }

// CountedFrom is where the kind's counts come from (Spec).
func (m *MirrorExpect) CountedFrom() string { return SourceLogs }

// Attributed reports whether the kind judges attributed buckets (Spec).
func (m *MirrorExpect) Attributed() bool { return false }

// OwnBalancing is the sampling unit the kind sets itself (Spec).
func (m *MirrorExpect) OwnBalancing() string      { return "" }
func (m *MirrorExpect) applyDefaults([]string)    {}
func (m *MirrorExpect) covers(*Scenario) []string { return nil }

// resolve: shadow defaults to whether the target's log rule (its preset
// filled in by now) has a host or authority group.
func (m *MirrorExpect) resolve(s *Scenario, _ string) {
	if m.Shadow != nil {
		return
	}
	shadow := false
	if w := s.Workload(m.To); w != nil && w.Logs != nil {
		shadow = w.Logs.HasHost()
	}
	m.Shadow, m.shadowDefaulted = &shadow, true
}

func (m *MirrorExpect) explicitZeros(p string, pos positions, _ func(string, bool, string)) []issue {
	if l, ok := pos[p+".percent"]; ok && m.Percent == 0 && l.val != nil && !isNull(l.val) {
		return []issue{{path: p + ".percent", msg: "0% mirrors nothing: want the expected share of primary requests mirrored, in (0, 100%], like 50%"}}
	}
	return nil
}
func (m *MirrorExpect) check(s *Scenario, c *checker, p string) { s.checkMirror(c, p, m) }
func (m *MirrorExpect) derivedName() string {
	if m.FromMesh != nil {
		ref, _, _ := m.FromMesh.Ref()
		return fmt.Sprintf("mirror as %s says to %s", ref.Object(), m.To)
	}
	return fmt.Sprintf("mirror %s to %s", m.Percent, m.To)
}

func (s *Scenario) checkMirror(c *checker, p string, m *MirrorExpect) {
	var names []string
	for _, w := range s.Observe {
		if w.Logs != nil {
			names = append(names, w.Name)
		}
	}
	withLogs := "none has logs: add observe[].logs to the workload that receives the copies"
	if len(names) > 0 {
		withLogs = "with logs: " + strings.Join(names, ", ")
	}
	switch w := s.Workload(m.To); {
	case m.To == "":
		c.add(p+".to", "required: the observe workload that receives the mirrored copies (%s)", withLogs)
	case w == nil:
		c.add(p+".to", "unknown workload %q: name an observe workload (%s)", m.To, withLogs)
	case w.Logs == nil:
		c.add(p+".to", "workload %s has no logs: mirrored copies' responses are discarded, so they are only seen in the mirror target's logs (add observe[].logs)", m.To)
	case !validRegex(w.Logs.Match):
		// Its match regex is reported where it is written.
	default:
		if m.Shadow != nil && *m.Shadow && !w.Logs.HasHost() {
			c.add(p+".shadow", "shadow counts lines whose host ends in -shadow, but workload %s's logs.match has no host or authority group", m.To)
		}
	}
	switch {
	case m.FromMesh != nil:
		s.checkMirrorFromMesh(c, p, m)
	case !(m.Percent > 0 && m.Percent <= 1):
		c.add(p+".percent", "required: the expected share of primary requests mirrored, in (0, 100%%], like 50%%")
	}
	checkMargin(c, p+".margin", m.Margin, false)
}

// Expectation is one judged statement. Exactly one of the kinds is set.
type Expectation struct {
	Name string `yaml:"name"`
	// From judges only the requests the workers in this cluster sent
	// (one of attack.sources): locality, seen from each source.
	From        string        `yaml:"from"`
	Split       *Split        `yaml:"split"`
	Reached     *BucketSet    `yaml:"reached"`
	Only        *BucketSet    `yaml:"only"`
	Never       *BucketSet    `yaml:"never"`
	SuccessRate *SuccessRate  `yaml:"successRate"`
	Latency     *Latency      `yaml:"latency"`
	Mirror      *MirrorExpect `yaml:"mirror"`
}

// Split expects the share of requests per bucket to follow a model.
type Split struct {
	// By is cluster, pod or version.
	By string `yaml:"by"`
	// Model: weights, equal, equal-per-pod, link-cost-inverse, link-cost-balanced.
	Model   string             `yaml:"model"`
	Weights map[string]float64 `yaml:"weights"`
	// FromMesh reads the expected shares from the mesh's own object
	// instead of weights (model mesh; docs/expect-from-mesh.md).
	FromMesh *MeshSource `yaml:"fromMesh"`
	// Buckets lists the buckets for equal (default: every declared cluster).
	Buckets []string `yaml:"buckets"`
	// Pods gives ready pods per cluster for equal-per-pod and link-cost
	// models, for the clusters no observe workload lists (the inventory
	// counts the ready pods of the others).
	Pods map[string]int `yaml:"pods"`
	// Connections is the concurrency the balanced model assumes (default:
	// attack concurrency or max connections).
	Connections int      `yaml:"connections"`
	Margin      *Percent `yaml:"margin"`
	Relative    *bool    `yaml:"relative"`
	Confidence  float64  `yaml:"confidence"`
	// Source is where requests are attributed: body, logs or metrics.
	// ApplyDefaults resolves it: body when attribution has rules or a
	// preset, else logs when some workload has logs, else metrics.
	Source string `yaml:"source"`
	// Balancing overrides statistics.balancing for this split.
	Balancing string `yaml:"balancing"`
	// Windows judges the split over time instead of as one block
	// (docs/statistics.md §10).
	Windows *Windows `yaml:"windows"`
}

// BucketSet names buckets of one dimension.
type BucketSet struct {
	By      string   `yaml:"by"`
	Buckets []string `yaml:"buckets"`
	// Margin tolerates a share outside the set (only/never); 0 = none.
	Margin *Percent `yaml:"margin"`
	// MinShare (reached only) is the share below which a bucket that got
	// nothing is called missing. Left out: the smallest expected share of
	// these buckets in a split of the same by and source, else half an
	// equal share, 1/(2k) (docs/statistics.md §4).
	MinShare *Percent `yaml:"minShare"`
	// Source is as for Split.
	Source string `yaml:"source"`
}

// SuccessRate expects at least AtLeast of requests to succeed.
type SuccessRate struct {
	AtLeast Percent `yaml:"atLeast"`
}

// Latency expects a percentile to stay below a bound.
type Latency struct {
	Percentile float64  `yaml:"percentile"`
	Below      Duration `yaml:"below"`
}

// MirrorExpect expects a share of the primary requests to be mirrored to
// a workload. A mirrored copy's response is discarded by the proxy, so the
// copies are counted in the mirror target's logs: joined to the primaries
// by request id, or counted in the attack window (README.md, mirroring).
// Envoy decides per request whether to mirror, so the statistics always
// take requests as independent draws here (docs/statistics.md §3).
type MirrorExpect struct {
	// To is the observe workload (with logs) that receives the copies.
	To string `yaml:"to"`
	// Percent is the expected share of primary requests mirrored.
	Percent Percent `yaml:"percent"`
	// FromMesh reads the percentage from the mesh object that mirrors
	// (an Istio VirtualService's mirrorPercentage, a Kuma RequestMirror)
	// instead of Percent (docs/expect-from-mesh.md).
	FromMesh *MeshSource `yaml:"fromMesh"`
	Margin   *Percent    `yaml:"margin"`
	// Shadow counts only lines whose host (or authority) group ends in
	// -shadow (Envoy up to Istio 1.27 appends it to the copy's Host), else
	// every line of the target's pods. ApplyDefaults sets it to whether the
	// match regex has such a group.
	Shadow *bool `yaml:"shadow"`

	// shadowDefaulted records that ApplyDefaults chose Shadow.
	shadowDefaulted bool
}

// ShadowDefaulted reports whether Shadow was left out of the file: a
// proxy that marks no copy then calls for a hint, not a silent zero.
func (m *MirrorExpect) ShadowDefaulted() bool { return m.shadowDefaulted }

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
		specs := e.specs()
		switch len(specs) {
		case 0:
			c.add(p, "set one of split, reached, only, never, successRate, latency or mirror")
		case 1:
		default:
			k0, k1 := specs[0].Kind(), specs[1].Kind()
			c.add(p+"."+k1, "one expectation has one kind and %s is already set: make %s a separate list item", k0, k1)
		}
		for _, k := range specs {
			k.check(s, c, p+"."+k.Kind())
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
	s.checkWindows(c, p, sp)
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

// BalancingOf is how the balancer an expectation judges picks a backend:
// its split's balancing, else statistics.balancing (resolved by the
// defaults). A mirror's copies are drawn per request whatever it says.
func (s *Scenario) BalancingOf(e *Expectation) string {
	if k := e.Spec(); k != nil && k.OwnBalancing() != "" {
		return k.OwnBalancing()
	}
	return s.Statistics.Balancing
}

// JudgedFrom is the source an expectation is judged from: a split's,
// reached's, only's or never's source (body when left out), the logs for
// a mirror, the bodies for the rest.
func (e *Expectation) JudgedFrom() string {
	src := ""
	if k := e.specs(); len(k) > 0 {
		src = k[0].CountedFrom()
	}
	if src == "" {
		src = SourceBody
	}
	return src
}
