package meshsim

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/envoylog"
)

// TestMatchRoutes: requests the route's match takes reach a backend
// (a real pod server on loopback); the others get Envoy's 404 with
// response flag NR and reach none. NoRoute answers everything 404.
func TestMatchRoutes(t *testing.T) {
	t.Parallel()
	hello := &Match{Hosts: []string{"*"}, URIs: []URIMatch{{Kind: URIExact, Value: "/hello"}}}
	tests := []struct {
		name       string
		p          Policy
		host, path string
		want       int
	}{
		{"exact /hello", Policy{Mode: ModePerPod, Match: hello}, "127.0.0.1:8080", "/hello", 200},
		{"exact ignores the query", Policy{Mode: ModePerPod, Match: hello}, "x", "/hello?a=1", 200},
		{"exact misses /other", Policy{Mode: ModePerPod, Match: hello}, "x", "/other", 404},
		{"exact misses a longer path", Policy{Mode: ModePerPod, Match: hello}, "x", "/hello/x", 404},
		{"exact is case-sensitive", Policy{Mode: ModePerPod, Match: hello}, "x", "/Hello", 404},
		{"ignoreUriCase", Policy{Mode: ModePerPod, Match: &Match{URIs: []URIMatch{{Kind: URIExact, Value: "/hello", IgnoreCase: true}}}}, "x", "/HELLO", 200},
		{"prefix", Policy{Mode: ModePerPod, Match: &Match{URIs: []URIMatch{{Kind: URIPrefix, Value: "/callme/"}}}}, "x", "/callme/ping", 200},
		{"prefix misses", Policy{Mode: ModePerPod, Match: &Match{URIs: []URIMatch{{Kind: URIPrefix, Value: "/callme/"}}}}, "x", "/callme", 404},
		{"regex matches the whole path", Policy{Mode: ModePerPod, Match: &Match{URIs: []URIMatch{{Kind: URIRegex, Value: "/v[0-9]+"}}}}, "x", "/v12", 200},
		{"regex is anchored", Policy{Mode: ModePerPod, Match: &Match{URIs: []URIMatch{{Kind: URIRegex, Value: "/v[0-9]+"}}}}, "x", "/v12/more", 404},
		{"any of the uris", Policy{Mode: ModePerPod, Match: &Match{URIs: []URIMatch{{Kind: URIExact, Value: "/a"}, {Kind: URIExact, Value: "/b"}}}}, "x", "/b", 200},
		{"host exact, port stripped", Policy{Mode: ModePerPod, Match: &Match{Hosts: []string{"hello.example.com"}}}, "Hello.Example.com:8080", "/", 200},
		{"host missed", Policy{Mode: ModePerPod, Match: &Match{Hosts: []string{"hello.example.com"}}}, "127.0.0.1:8080", "/", 404},
		{"host suffix wildcard", Policy{Mode: ModePerPod, Match: &Match{Hosts: []string{"*.example.com"}}}, "a.example.com", "/", 200},
		{"host suffix wildcard needs a character", Policy{Mode: ModePerPod, Match: &Match{Hosts: []string{"*.example.com"}}}, ".example.com", "/", 404},
		{"host prefix wildcard", Policy{Mode: ModePerPod, Match: &Match{Hosts: []string{"hello.*"}}}, "hello.org", "/", 200},
		{"no route at all", Policy{Mode: ModePerPod, NoRoute: "no VirtualService bound"}, "x", "/hello", 404},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v1 := startPod(t, "c1", "helloworld-v1", "v1")
			log := &accessLog{}
			sim, addr := serveWith(t, tc.p, backends(v1), Proxying{Envoy: true, AccessLog: log.add})
			req, err := http.NewRequest(http.MethodGet, "http://"+addr+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			req.Host = tc.host
			resp, err := client(t).Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tc.want {
				t.Fatalf("%s%s answered %d %q, want %d", tc.host, tc.path, resp.StatusCode, body, tc.want)
			}
			got := log.all()
			if len(got) != 1 {
				t.Fatalf("%d access records, want 1", len(got))
			}
			e := got[0].Entry
			routed := int64(0)
			if tc.want == http.StatusOK {
				routed = 1
			}
			if st := sim.Stats(); st.Requests != 1 || st.NoRoute != 1-routed || st.ByPod["c1/helloworld-v1"] != routed {
				t.Errorf("stats: %d requests, %d no route, %d to the pod", st.Requests, st.NoRoute, st.ByPod["c1/helloworld-v1"])
			}
			if tc.want == 404 {
				if v1.hits.Load() != 0 || len(body) != 0 || e.Code != 404 || e.Flags != envoylog.FlagNoRoute || e.Details != envoylog.DetailsRouteNotFound || e.UpstreamHost != "" {
					t.Errorf("no route: backend hits %d, body %q, record %+v; want Envoy's 404 NR route_not_found, no upstream", v1.hits.Load(), body, e)
				}
			} else if v1.hits.Load() != 1 || e.Flags != envoylog.FlagNone {
				t.Errorf("routed: backend hits %d, record %+v", v1.hits.Load(), e)
			}
		})
	}
}

// TestMatchRejects: every limit of a Match is checked, by New and by
// SetPolicy (which keeps the old policy).
func TestMatchRejects(t *testing.T) {
	t.Parallel()
	many := func(n int) []URIMatch {
		out := make([]URIMatch, n)
		for i := range out {
			out[i] = URIMatch{Kind: URIExact, Value: "/"}
		}
		return out
	}
	tests := []struct {
		name string
		m    Match
		err  string
	}{
		{"a bad regex", Match{URIs: []URIMatch{{Kind: URIRegex, Value: "("}}}, "regex \"(\""},
		{"a regex over the limit", Match{URIs: []URIMatch{{Kind: URIRegex, Value: strings.Repeat("a", MaxURIRegex+1)}}}, "want at most 1024"},
		{"too many uris", Match{URIs: many(MaxURIMatches + 1)}, "65 URI matches; want at most 64"},
		{"too many hosts", Match{Hosts: strings.Split(strings.Repeat("a,", MaxMatchHosts)+"a", ",")}, "65 match hosts"},
		{"an unknown kind", Match{URIs: []URIMatch{{Kind: "suffix", Value: "/"}}}, `kind "suffix"`},
		{"a wildcard in the middle", Match{Hosts: []string{"a.*.com"}}, `match host 0 "a.*.com"`},
		{"an empty host", Match{Hosts: []string{""}}, `match host 0 ""`},
		{"ignoreCase with a regex", Match{URIs: []URIMatch{{Kind: URIRegex, Value: "/", IgnoreCase: true}}}, "ignoreCase with a regex"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			m := tc.m
			if _, err := New(Policy{Mode: ModePerPod, Match: &m}); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("New: %v, want an error containing %q", err, tc.err)
			}
			s, err := New(Policy{Mode: ModePerPod})
			if err != nil {
				t.Fatal(err)
			}
			if err := s.SetPolicy(Policy{Mode: ModePerPod, Match: &m}); err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("SetPolicy: %v, want an error containing %q", err, tc.err)
			}
		})
	}
}

// FuzzMatch: any pattern either compiles or is refused, never panics; a
// compiled exact or prefix match agrees with its definition, a regex
// with Go's anchored RE2 match, on any path.
func FuzzMatch(f *testing.F) {
	f.Add("exact", "/hello", "/hello?x=1", "*.example.com", "a.example.com:80", false)
	f.Add("prefix", "/api/", "/api/v1", "hello.*", "hello.org", true)
	f.Add("regex", "/v[0-9]+", "/v1/x", "*", "", false)
	f.Fuzz(func(t *testing.T, kind, value, uri, domain, host string, ignoreCase bool) {
		m, err := compileMatch(&Match{Hosts: []string{domain}, URIs: []URIMatch{{Kind: kind, Value: value, IgnoreCase: ignoreCase}}})
		if err != nil {
			return
		}
		_ = m.takesHost(host)
		got := m.takesURI(uri, uri)
		path, _, _ := strings.Cut(uri, "?")
		var want bool
		switch kind {
		case URIExact:
			want = path == value || (ignoreCase && strings.EqualFold(path, value))
		case URIPrefix:
			want = strings.HasPrefix(uri, value) || (ignoreCase && len(uri) >= len(value) && strings.EqualFold(uri[:len(value)], value))
		case URIRegex:
			want = regexp.MustCompile(`^(?:` + value + `)$`).MatchString(path)
		}
		if got != want {
			t.Errorf("%s %q on %q: takes %v, want %v", kind, value, uri, got, want)
		}
	})
}
