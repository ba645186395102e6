package podlogs

import (
	"net"
	"regexp"
	"strconv"
	"strings"
)

// Rule picks the log lines that record a request and reads fields from them
// through the regex's named groups: request_id (or rid), status, upstream,
// host (or authority), and any of cluster, pod, version, service, method,
// path.
type Rule struct {
	Regex *regexp.Regexp
	// Exclude drops lines the regex matched, e.g. a kubelet probe's line in
	// an access log (nil: none).
	Exclude *regexp.Regexp
	// Targets limits the rule to some containers (nil: all), e.g. the
	// istio-proxy access log of the mirror target.
	Targets func(Target) bool

	// fast is set by NewRule (nil: the regex alone).
	fast *fastPath
	// json: the fields come from the line decoded as an Envoy JSON access
	// log (NewRule sets it for the JSON presets); a line that is no JSON
	// object is not matched.
	json bool
}

// Match is a line that a Rule matched.
type Match struct {
	Line      Line
	RequestID string
	// Fields holds the non-empty named groups.
	Fields map[string]string
	// Shadow is set when the logged host carries Envoy's "-shadow" suffix:
	// a mirrored copy (README.md, mirroring).
	Shadow bool
	// Status is the logged HTTP status, 0 when the rule captures none.
	Status int
	// Upstream is the address the proxy sent the request to, when the rule
	// captures it: the pod that served it, for a proxy's outbound log.
	Upstream string
	// Attempt is the attempt number the rule captures (group attempt:
	// Envoy's %UPSTREAM_REQUEST_ATTEMPT_COUNT% or the x-envoy-attempt-count
	// header an upstream logs), 0 when none.
	Attempt int
	// Excluded is set (and the match refused) when the regex matched but
	// Exclude did too.
	Excluded bool
}

// Match applies the rule to one line. A group that captured "-" is empty:
// that is how Envoy's and nginx's access logs write a missing value.
func (r Rule) Match(l Line) (Match, bool) {
	if r.Regex == nil || (r.Targets != nil && !r.Targets(l.Target)) {
		return Match{}, false
	}
	var loc [2 * envoyGroups]int
	var sub []int
	switch f := r.fast; {
	case f != nil && f.literal != "" && !strings.Contains(l.Text, f.literal):
		return Match{}, false
	case f != nil && f.envoy != "":
		if !envoyFind(l.Text, f.envoy, &loc) {
			return Match{}, false
		}
		sub = loc[:]
	default:
		if sub = r.Regex.FindStringSubmatchIndex(l.Text); sub == nil {
			return Match{}, false
		}
	}
	if r.Exclude != nil && r.Exclude.MatchString(l.Text) {
		return Match{Line: l, Excluded: true}, false
	}
	m := Match{Line: l}
	if r.json {
		f, err := jsonFields(l.Text)
		if err != nil {
			return Match{}, false
		}
		m.Fields = f
		return withFields(m), true
	}
	for i, name := range r.Regex.SubexpNames() {
		if name == "" || sub[2*i] < 0 {
			continue
		}
		v := l.Text[sub[2*i]:sub[2*i+1]]
		if v == "" || v == "-" {
			continue
		}
		if m.Fields == nil {
			m.Fields = make(map[string]string, 4)
		}
		m.Fields[name] = v
	}
	return withFields(m), true
}

// withFields fills what a match's named captures say (request id, shadow
// host, status, upstream) from m.Fields.
func withFields(m Match) Match {
	m.RequestID = m.Fields["request_id"]
	if m.RequestID == "" {
		m.RequestID = m.Fields["rid"]
	}
	host := m.Fields["host"]
	if host == "" {
		host = m.Fields["authority"]
	}
	m.Shadow = IsShadowHost(host)
	if st, err := strconv.Atoi(m.Fields["status"]); err == nil && st > 0 {
		m.Status = st
	}
	m.Upstream = m.Fields["upstream"]
	if n, err := strconv.Atoi(m.Fields["attempt"]); err == nil && n > 0 {
		m.Attempt = n
	}
	return m
}

// IsShadowHost reports whether host is a mirrored copy's Host/:authority.
// Envoy appends "-shadow" to the host name, before the port since 2018
// (envoyproxy/envoy#2600: "foo-shadow:8080"); older proxies put it after the
// port ("foo:8080-shadow"), so both count. Proxies configured with
// disable_shadow_host_suffix_append (Envoy Gateway's default since 2025) do
// not mark copies at all: identify the mirror target by its pods then.
func IsShadowHost(host string) bool {
	if strings.HasSuffix(host, "-shadow") {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		return strings.HasSuffix(h, "-shadow")
	}
	return false
}
