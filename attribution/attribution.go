// Package attribution decides who served a request: it turns a response
// (body, headers) into an identity {cluster, pod, version, service} with
// rules a scenario declares or a preset for a well-known demo app.
package attribution

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
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
	if v == "" {
		return
	}
	switch f {
	case Cluster:
		if id.Cluster == "" {
			id.Cluster = v
		}
	case Pod:
		if id.Pod == "" {
			id.Pod = v
		}
	case Version:
		if id.Version == "" {
			id.Version = v
		}
	case Service:
		if id.Service == "" {
			id.Service = v
		}
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
// for apps whose answer does not name the cluster.
type ValueMap struct {
	From, To Field
	Values   map[string]string
}

// Attributor applies rules in order, then the value maps.
type Attributor struct {
	rules []Rule
	maps  []ValueMap
	json  bool
}

// New builds an attributor; rules earlier in the list win for a field.
func New(rules []Rule, maps []ValueMap) *Attributor {
	a := &Attributor{rules: rules, maps: maps}
	for _, r := range rules {
		if r.Source == JSON {
			a.json = true
		}
	}
	return a
}

// Empty reports whether there are no rules: responses attribute nothing.
func (a *Attributor) Empty() bool { return len(a.rules) == 0 && len(a.maps) == 0 }

// Attribute reads one response. The body may be truncated (MaxBody).
func (a *Attributor) Attribute(body []byte, h http.Header) Identity {
	var id Identity
	var doc any
	docParsed := false
	for i := range a.rules {
		r := &a.rules[i]
		switch r.Source {
		case Body:
			r.apply(&id, body)
		case Header:
			if v := h.Get(r.Key); v != "" {
				r.apply(&id, []byte(v))
			}
		case JSON:
			if !docParsed {
				docParsed = true
				if err := json.Unmarshal(body, &doc); err != nil {
					doc = nil
				}
			}
			if v, ok := lookup(doc, r.Key); ok {
				r.apply(&id, []byte(v))
			}
		}
	}
	for _, m := range a.maps {
		if v := id.Get(m.From); v != "" {
			id.setIfEmpty(m.To, m.Values[v])
		}
	}
	return id
}

func (r *Rule) apply(id *Identity, text []byte) {
	if r.Regex == nil {
		id.setIfEmpty(r.Field, string(bytes.TrimSpace(text)))
		return
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
		return
	}
	named := false
	for gi, name := range r.Regex.SubexpNames() {
		if name == "" || m[2*gi] < 0 {
			continue
		}
		named = true
		id.setIfEmpty(Field(name), string(text[m[2*gi]:m[2*gi+1]]))
	}
	if !named && r.Field != "" {
		lo, hi := m[0], m[1]
		if len(m) >= 4 && m[2] >= 0 {
			lo, hi = m[2], m[3] // the first unnamed group, when there is one
		}
		id.setIfEmpty(r.Field, string(text[lo:hi]))
	}
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
