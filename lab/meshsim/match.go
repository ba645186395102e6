package meshsim

import (
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
)

// Limits of a Match: each is validated (validate), so a route the lab
// derives from a mesh object cannot make the simulator compile an
// unbounded number of regular expressions per policy change.
const (
	// MaxMatchHosts bounds Match.Hosts.
	MaxMatchHosts = 64
	// MaxURIMatches bounds Match.URIs.
	MaxURIMatches = 64
	// MaxURIRegex bounds the length of one regular expression.
	MaxURIRegex = 1024
)

// URI match kinds (Istio's StringMatch, Envoy's route match).
const (
	URIExact  = "exact"
	URIPrefix = "prefix"
	URIRegex  = "regex"
)

// Match selects the requests a route takes, as Envoy's route
// configuration does: a request whose Host no domain of Hosts matches, or
// whose path no URI of URIs matches, finds no route and is answered 404
// with response flag NR (route_not_found), reaching no backend.
type Match struct {
	// Hosts are the virtual host's domains (Envoy's virtual_hosts[].domains
	// from a gateway VirtualService's hosts): "*", an exact name, a suffix
	// wildcard "*.example.com" or a prefix wildcard "foo.*". The request's
	// Host is compared without its port (Istio's gateways strip any host
	// port) and case-insensitively. Empty: every host.
	Hosts []string
	// URIs: a request matches when its path matches any of them, in order.
	// Empty: every path.
	URIs []URIMatch
}

// URIMatch is one HTTPMatchRequest's uri: exact and regex compare the
// path without its query string (Envoy's path and safe_regex, the regex
// matching the whole path, RE2 syntax as Envoy's), prefix compares the
// start of the path with its query string (Envoy's prefix).
type URIMatch struct {
	// Kind is one of URIExact, URIPrefix, URIRegex.
	Kind  string
	Value string
	// IgnoreCase is Istio's ignoreUriCase (Envoy's case_sensitive: false);
	// not for regex, as istiod rejects it there.
	IgnoreCase bool
}

// matcher is a Match ready to test requests: regexes compiled once per
// policy.
type matcher struct {
	hosts []string
	uris  []uriMatcher
}

type uriMatcher struct {
	URIMatch
	re *regexp.Regexp
}

// compileMatch validates m and compiles its regexes; nil for nil.
func compileMatch(m *Match) (*matcher, error) {
	if m == nil {
		return nil, nil
	}
	if len(m.Hosts) > MaxMatchHosts {
		return nil, fmt.Errorf("%d match hosts; want at most %d", len(m.Hosts), MaxMatchHosts)
	}
	if len(m.URIs) > MaxURIMatches {
		return nil, fmt.Errorf("%d URI matches; want at most %d", len(m.URIs), MaxURIMatches)
	}
	out := &matcher{}
	for i, h := range m.Hosts {
		if h == "" || strings.Count(h, "*") > 1 || (strings.Contains(h, "*") && h != "*" && !strings.HasPrefix(h, "*") && !strings.HasSuffix(h, "*")) {
			return nil, fmt.Errorf("match host %d %q: want \"*\", a name, \"*suffix\" or \"prefix*\" (Envoy's domains)", i, h)
		}
		out.hosts = append(out.hosts, strings.ToLower(h))
	}
	for i, u := range m.URIs {
		um := uriMatcher{URIMatch: u}
		switch u.Kind {
		case URIExact, URIPrefix:
		case URIRegex:
			if len(u.Value) > MaxURIRegex {
				return nil, fmt.Errorf("URI match %d: regex of %d bytes; want at most %d", i, len(u.Value), MaxURIRegex)
			}
			if u.IgnoreCase {
				return nil, fmt.Errorf("URI match %d: ignoreCase with a regex (istiod refuses it)", i)
			}
			re, err := regexp.Compile(`^(?:` + u.Value + `)$`)
			if err != nil {
				return nil, fmt.Errorf("URI match %d: regex %q: %w", i, u.Value, err)
			}
			um.re = re
		default:
			return nil, fmt.Errorf("URI match %d: kind %q; want %s, %s or %s", i, u.Kind, URIExact, URIPrefix, URIRegex)
		}
		out.uris = append(out.uris, um)
	}
	return out, nil
}

// takes reports whether the route takes r; a nil matcher takes all.
func (m *matcher) takes(r *http.Request) bool {
	if m == nil {
		return true
	}
	return m.takesHost(r.Host) && m.takesURI(r.RequestURI, r.URL.RequestURI())
}

func (m *matcher) takesHost(host string) bool {
	if len(m.hosts) == 0 {
		return true
	}
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	for _, d := range m.hosts {
		if domainMatches(d, host) {
			return true
		}
	}
	return false
}

// domainMatches is Envoy's virtual host domain match: a wildcard matches
// at least one character.
func domainMatches(d, host string) bool {
	switch {
	case d == "*":
		return true
	case strings.HasPrefix(d, "*"):
		return len(host) > len(d)-1 && strings.HasSuffix(host, d[1:])
	case strings.HasSuffix(d, "*"):
		return len(host) > len(d)-1 && strings.HasPrefix(host, d[:len(d)-1])
	}
	return host == d
}

// takesURI matches the request's :path (requestURI as received; uri, the
// parsed form, when the server set none, as outside Serve).
func (m *matcher) takesURI(requestURI, uri string) bool {
	if len(m.uris) == 0 {
		return true
	}
	full := requestURI
	if full == "" {
		full = uri
	}
	path, _, _ := strings.Cut(full, "?")
	for _, u := range m.uris {
		if u.matches(path, full) {
			return true
		}
	}
	return false
}

func (u uriMatcher) matches(path, full string) bool {
	switch u.Kind {
	case URIExact:
		if u.IgnoreCase {
			return strings.EqualFold(path, u.Value)
		}
		return path == u.Value
	case URIPrefix:
		if u.IgnoreCase {
			return len(full) >= len(u.Value) && strings.EqualFold(full[:len(u.Value)], u.Value)
		}
		return strings.HasPrefix(full, u.Value)
	case URIRegex:
		return u.re.MatchString(path)
	}
	return false
}
