package scenarios

import (
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/mesh-verify/mesh-verify/attribution"
)

// Attribution turns a response into an identity {cluster, pod, version}.
// It may be left empty when an observe workload has logs or metrics: the
// requests are then counted where they are served (expectation source).
type Attribution struct {
	// Preset names a ready-made rule set (PresetNames).
	Preset string `yaml:"preset"`
	Rules  []Rule `yaml:"rules"`
	// Map derives one identity field from another, e.g.
	// {from: version, to: cluster, values: {v1: c1, v2: c2}}, or renames
	// a field's values when from and to are the same field, e.g.
	// {from: cluster, to: cluster, values: {Cluster-1: c1}}.
	Map []ValueMap `yaml:"map"`
}

// Rule extracts identity fields from one place in a response.
type Rule struct {
	// Body regex with named groups cluster, pod, version, service.
	Body string `yaml:"body"`
	// Header is a response header name; its value is captured whole, or
	// through Regex when set.
	Header string `yaml:"header"`
	// JSON is a dotted field path into a JSON body (a.b.0.c).
	JSON string `yaml:"json"`
	// Regex applies to the header or JSON value; named groups as for Body.
	Regex string `yaml:"regex"`
	// Field is the identity field a whole captured value fills
	// (cluster, pod, version) when there are no named groups.
	Field string `yaml:"field"`
	// Match picks which match wins when the text holds several: first
	// (default) or last, e.g. a caller that embeds its callee's answer.
	Match string `yaml:"match"`
}

// ValueMap derives the To field from the From field's value.
type ValueMap struct {
	From   string            `yaml:"from"`
	To     string            `yaml:"to"`
	Values map[string]string `yaml:"values"`
}

// PresetNames lists the ready-made attribution rule sets.
func PresetNames() []string { return attribution.PresetNames() }

// IdentityFields are what attribution can learn about the server of a
// request, and so the only named groups and field values a rule may use.
func IdentityFields() []string { return []string{"cluster", "pod", "version", "service"} }

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
