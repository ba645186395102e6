// Package attribution decides who served a request: it turns a response
// (body, headers) into an identity {cluster, pod, version, service} with
// rules a scenario declares or a preset for a well-known demo app.
package attribution

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Field is one part of an identity.
type Field string

// Identity fields, which are also the dimensions counts are kept by.
const (
	Cluster Field = "cluster"
	Pod     Field = "pod"
	Version Field = "version"
	Service Field = "service"
)

// Fields lists the identity fields in report order.
func Fields() []Field { return []Field{Cluster, Pod, Version, Service} }

// Identity is who served one request; empty fields are unknown.
type Identity struct {
	Cluster string `json:"cluster,omitempty"`
	Pod     string `json:"pod,omitempty"`
	Version string `json:"version,omitempty"`
	Service string `json:"service,omitempty"`
}

// Get returns one field.
func (id *Identity) Get(f Field) string {
	switch f {
	case Cluster:
		return id.Cluster
	case Pod:
		return id.Pod
	case Version:
		return id.Version
	case Service:
		return id.Service
	}
	return ""
}

// setIfEmpty keeps the first rule's answer: rules are listed most
// trustworthy first.
func (id *Identity) setIfEmpty(f Field, v string) {
	if v != "" && id.Get(f) == "" {
		id.set(f, v)
	}
}

func (id *Identity) set(f Field, v string) {
	switch f {
	case Cluster:
		id.Cluster = v
	case Pod:
		id.Pod = v
	case Version:
		id.Version = v
	case Service:
		id.Service = v
	}
}

// Empty reports whether nothing was learnt.
func (id Identity) Empty() bool { return id == Identity{} }

// Source says where a rule looks.
type Source int

// Rule sources.
const (
	Body Source = iota
	Header
	JSON
)

// Rule is one compiled extraction rule.
type Rule struct {
	// Name says where the rule comes from in reports, like
	// "attribution.rules[0]" or "preset istio-echo (Cluster=)".
	Name   string
	Source Source
	// Header name (Header) or dotted path (JSON).
	Key string
	// Regex with named groups; nil means the whole value fills Field.
	Regex *regexp.Regexp
	Field Field
	// Last picks the last match instead of the first, for bodies that embed
	// a callee's answer after the caller's own line.
	Last bool
}

// ValueMap derives one field from another, e.g. version v2 -> cluster c2,
// for apps whose answer does not name the cluster. When From and To are the
// same field it renames values instead, e.g. cluster Cluster-1 -> c1 for an
// app that names its cluster differently from the scenario.
type ValueMap struct {
	From, To Field
	Values   map[string]string
}

// Resolver knows the observed pods (the inventory): it turns a pod name or
// a pod address that a response or a log line gives into the pod's
// identity, its cluster and version. ok is false when no pod, or pods in
// several clusters, answer to it: the caller reports it, never guesses.
type Resolver interface {
	ByPod(name string) (Identity, bool)
	ByAddress(addr string) (Identity, bool)
}

// Attributor applies rules in order, then the inventory, then the value
// maps. It keeps statistics of what each rule matched, for the report and
// for telling a rule that matches nothing from a mesh that serves nothing.
// Safe for concurrent use.
type Attributor struct {
	rules    []Rule
	maps     []ValueMap
	resolver Resolver
	json     bool
	// values makes each distinct captured value a string once.
	values interner

	mu    sync.Mutex
	stats Stats
}

// New builds an attributor; rules earlier in the list win for a field.
func New(rules []Rule, maps []ValueMap) *Attributor {
	a := &Attributor{rules: rules, maps: maps}
	a.stats.Rules = make([]RuleStats, len(rules))
	a.stats.Fields = map[Field]int64{}
	for i, r := range rules {
		if r.Source == JSON {
			a.json = true
		}
		a.stats.Rules[i].Rule = r.Name
	}
	return a
}

// WithResolver makes the attributor complete a pod's identity (cluster,
// version) from the inventory when the rules name only the pod.
func (a *Attributor) WithResolver(r Resolver) *Attributor {
	a.resolver = r
	return a
}

// Empty reports whether there are no rules: responses attribute nothing.
func (a *Attributor) Empty() bool { return len(a.rules) == 0 && len(a.maps) == 0 }

// Limits of the statistics kept per rule and field.
const (
	MaxSamples  = 3
	SampleBytes = 300
)

// Stats say what the rules made of the answered responses.
type Stats struct {
	// Responses counts the answered responses attributed.
	Responses int64 `json:"responses"`
	// Rules are in rule order.
	Rules []RuleStats `json:"rules"`
	// Fields counts the answered responses with each field attributed.
	Fields map[Field]int64 `json:"fields"`
	// Empty lists the fields a rule captured as an empty value and nothing
	// else filled, e.g. Istio's echo app started without --cluster.
	Empty []EmptyCapture `json:"empty,omitempty"`
	// Unresolved counts pod names the inventory did not know.
	Unresolved int64 `json:"unresolved,omitempty"`
}

// RuleStats is what one rule matched among the answered responses.
type RuleStats struct {
	Rule    string `json:"rule"`
	Matched int64  `json:"matched"`
	// Samples are the first answered bodies the rule did not match.
	Samples []string `json:"samples,omitempty"`
}

// EmptyCapture counts responses where a rule captured a field as empty.
type EmptyCapture struct {
	Field   Field    `json:"field"`
	Rule    string   `json:"rule"`
	Count   int64    `json:"count"`
	Samples []string `json:"samples,omitempty"`
}

// Stats returns a copy of the statistics so far.
func (a *Attributor) Stats() Stats {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.stats
	s.Rules = make([]RuleStats, len(a.stats.Rules))
	for i, r := range a.stats.Rules {
		r.Samples = slices.Clone(r.Samples)
		s.Rules[i] = r
	}
	s.Fields = maps.Clone(a.stats.Fields)
	s.Empty = nil
	for _, e := range a.stats.Empty {
		e.Samples = slices.Clone(e.Samples)
		s.Empty = append(s.Empty, e)
	}
	return s
}

// Add adds the statistics of another attributor of the same rules (a
// distributed run's workers, docs/distributed.md): counts add up, rules
// pair by name and are kept in s's order, then o's new ones; samples are
// kept up to MaxSamples, s's first, so the result depends on the order of
// the calls only through which samples are kept.
func (s *Stats) Add(o Stats) {
	s.Responses += o.Responses
	s.Unresolved += o.Unresolved
	for _, r := range o.Rules {
		i := slices.IndexFunc(s.Rules, func(x RuleStats) bool { return x.Rule == r.Rule })
		if i < 0 {
			s.Rules = append(s.Rules, RuleStats{Rule: r.Rule})
			i = len(s.Rules) - 1
		}
		s.Rules[i].Matched += r.Matched
		s.Rules[i].Samples = addSamples(s.Rules[i].Samples, r.Samples)
	}
	for f, n := range o.Fields {
		if s.Fields == nil {
			s.Fields = map[Field]int64{}
		}
		s.Fields[f] += n
	}
	for _, e := range o.Empty {
		i := slices.IndexFunc(s.Empty, func(x EmptyCapture) bool { return x.Field == e.Field })
		if i < 0 {
			s.Empty = append(s.Empty, EmptyCapture{Field: e.Field, Rule: e.Rule})
			i = len(s.Empty) - 1
		}
		s.Empty[i].Count += e.Count
		s.Empty[i].Samples = addSamples(s.Empty[i].Samples, e.Samples)
	}
}

// addSamples appends samples to have up to MaxSamples, as one attributor
// keeps the first ones it sees.
func addSamples(have, more []string) []string {
	return append(have, more[:min(len(more), max(MaxSamples-len(have), 0))]...)
}

// Sample cuts a body or line to SampleBytes for a report.
func Sample(b []byte) string {
	if len(b) > SampleBytes {
		b = b[:SampleBytes]
	}
	return string(b)
}

// Attribute reads one response. The body may be truncated (MaxBody).
// answered says whether the response counts as a success: statistics are
// kept over answered responses only, since error pages rarely name a pod.
func (a *Attributor) Attribute(body []byte, h http.Header, answered bool) Identity {
	var id Identity
	// doc is a pointer, made only when a JSON rule needs it: a local
	// that json.Unmarshal is given escapes to the heap on every call.
	var doc *any
	// matched lives on the stack for up to len(matchedBuf) rules.
	var matchedBuf [16]bool
	var matched []bool
	if len(a.rules) <= len(matchedBuf) {
		matched = matchedBuf[:len(a.rules)]
	} else {
		matched = make([]bool, len(a.rules))
	}
	var empty []emptyAt
	for i := range a.rules {
		r := &a.rules[i]
		var ok bool
		switch r.Source {
		case Body:
			ok = r.apply(&id, body, i, &empty, &a.values)
		case Header:
			if vs := h.Values(r.Key); len(vs) > 0 {
				ok = r.apply(&id, []byte(h.Get(r.Key)), i, &empty, &a.values)
			}
		case JSON:
			if doc == nil {
				doc = new(any)
				if err := json.Unmarshal(body, doc); err != nil {
					*doc = nil
				}
			}
			if v, found := lookup(*doc, r.Key); found {
				ok = r.apply(&id, []byte(v), i, &empty, &a.values)
			}
		}
		matched[i] = ok
	}
	unresolved := false
	if a.resolver != nil && id.Pod != "" && (id.Cluster == "" || id.Version == "") {
		if pod, ok := a.resolver.ByPod(id.Pod); ok {
			id.setIfEmpty(Cluster, pod.Cluster)
			id.setIfEmpty(Version, pod.Version)
		} else {
			unresolved = true
		}
	}
	for _, m := range a.maps {
		v := id.Get(m.From)
		if v == "" {
			continue
		}
		if m.From == m.To {
			if to, ok := m.Values[v]; ok {
				id.set(m.To, to)
			}
			continue
		}
		id.setIfEmpty(m.To, m.Values[v])
	}
	if answered {
		a.record(id, body, matched, empty, unresolved)
	}
	return id
}

// emptyAt is a field rule i captured as an empty value.
type emptyAt struct {
	rule  int
	field Field
}

func (a *Attributor) record(id Identity, body []byte, matched []bool, empty []emptyAt, unresolved bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := &a.stats
	s.Responses++
	for i, ok := range matched {
		switch rs := &s.Rules[i]; {
		case ok:
			rs.Matched++
		case len(rs.Samples) < MaxSamples:
			rs.Samples = append(rs.Samples, Sample(body))
		}
	}
	for _, f := range Fields() {
		if id.Get(f) != "" {
			s.Fields[f]++
		}
	}
	if unresolved {
		s.Unresolved++
	}
	for _, e := range empty {
		if id.Get(e.field) != "" {
			continue // another rule, the inventory or a map filled it
		}
		i := slices.IndexFunc(s.Empty, func(x EmptyCapture) bool { return x.Field == e.field })
		if i < 0 {
			s.Empty = append(s.Empty, EmptyCapture{Field: e.field, Rule: a.rules[e.rule].Name})
			i = len(s.Empty) - 1
		}
		ec := &s.Empty[i]
		ec.Count++
		if len(ec.Samples) < MaxSamples {
			ec.Samples = append(ec.Samples, Sample(body))
		}
	}
}

// apply fills id from text and reports whether the rule matched; fields
// it captured as empty strings are added to empty.
func (r *Rule) apply(id *Identity, text []byte, rule int, empty *[]emptyAt, values *interner) bool {
	if r.Regex == nil {
		v := values.str(bytes.TrimSpace(text))
		if v == "" {
			*empty = append(*empty, emptyAt{rule, r.Field})
		}
		id.setIfEmpty(r.Field, v)
		return true
	}
	var m []int
	if r.Last {
		all := r.Regex.FindAllSubmatchIndex(text, -1)
		if len(all) > 0 {
			m = all[len(all)-1]
		}
	} else {
		m = r.Regex.FindSubmatchIndex(text)
	}
	if m == nil {
		return false
	}
	named := false
	for gi, name := range r.Regex.SubexpNames() {
		if name == "" || m[2*gi] < 0 {
			continue
		}
		named = true
		// bytes.TrimSpace trims what strings.TrimSpace does.
		v := values.str(bytes.TrimSpace(text[m[2*gi]:m[2*gi+1]]))
		if v == "" {
			*empty = append(*empty, emptyAt{rule, Field(name)})
		}
		id.setIfEmpty(Field(name), v)
	}
	if !named && r.Field != "" {
		lo, hi := m[0], m[1]
		if len(m) >= 4 && m[2] >= 0 {
			lo, hi = m[2], m[3] // the first unnamed group, when there is one
		}
		v := values.str(text[lo:hi])
		if v == "" {
			*empty = append(*empty, emptyAt{rule, r.Field})
		}
		id.setIfEmpty(r.Field, v)
	}
	return true
}

// lookup follows a dotted path (a.b.0.c) through decoded JSON.
func lookup(doc any, path string) (string, bool) {
	cur := doc
	for _, part := range strings.Split(path, ".") {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[part]
			if !ok {
				return "", false
			}
			cur = next
		case []any:
			i, err := strconv.Atoi(part)
			if err != nil || i < 0 || i >= len(v) {
				return "", false
			}
			cur = v[i]
		default:
			return "", false
		}
	}
	switch v := cur.(type) {
	case string:
		return v, true
	case float64, bool:
		return fmt.Sprint(v), true
	}
	return "", false
}
