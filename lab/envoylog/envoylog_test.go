package envoylog

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/podlogs"
)

// The istio.io access-log task's lines (docs/real-apps.md, "Envoy access
// logs"): the inbound line on httpbin and the outbound line on curl.
const (
	istioInbound  = `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 3 1 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "127.0.0.1:80" inbound|8000|| 127.0.0.1:41854 10.44.1.27:80 10.44.1.23:37652 outbound_.8000_._.httpbin.foo.svc.cluster.local default`
	istioOutbound = `[2020-11-25T21:26:18.409Z] "GET /status/418 HTTP/1.1" 418 - via_upstream - "-" 0 135 4 4 "-" "curl/7.73.0-DEV" "84961386-6d84-929d-98bd-c5aee93b5c88" "httpbin:8000" "10.44.1.27:80" outbound|8000||httpbin.foo.svc.cluster.local 10.44.1.23:37652 10.0.45.184:8000 10.44.1.23:46520 - default`
	// Kuma's default format filled in as its control plane does for an
	// inbound (source "unknown", the dataplane's own address).
	kumaInbound = `[2024-01-12T10:00:00.123Z] default "GET / HTTP/1.1" 200 - 0 210 2 1 "-" "curl/8.5.0" "-" "1b4e28ba-2fa1-41d2-883f-0016d3cca427" "test-server:80" "unknown" "test-server_kuma-demo_svc_80" "10.244.0.7" "127.0.0.1:80"`
)

func start(t *testing.T) time.Time {
	t.Helper()
	ts, err := time.Parse(TimeLayout, "2020-11-25T21:26:18.409Z")
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func TestFormatReproducesTheDocumentedLines(t *testing.T) {
	base := Entry{
		Start: start(t), Method: "GET", Path: "/status/418", Protocol: "HTTP/1.1", Code: 418,
		Flags: FlagNone, Details: DetailsViaUpstream, BytesOut: 135, UserAgent: "curl/7.73.0-DEV",
		RequestID: "84961386-6d84-929d-98bd-c5aee93b5c88", Authority: "httpbin:8000", Route: "default",
	}
	in := base
	in.Duration, in.Upstream = 3*time.Millisecond, time.Millisecond
	in.UpstreamHost, in.UpstreamCluster, in.UpstreamLocal = "127.0.0.1:80", "inbound|8000||", "127.0.0.1:41854"
	in.DownstreamLocal, in.DownstreamRemote, in.SNI = "10.44.1.27:80", "10.44.1.23:37652", "outbound_.8000_._.httpbin.foo.svc.cluster.local"
	out := base
	out.Duration, out.Upstream = 4*time.Millisecond, 4*time.Millisecond
	out.UpstreamHost, out.UpstreamCluster, out.UpstreamLocal = "10.44.1.27:80", "outbound|8000||httpbin.foo.svc.cluster.local", "10.44.1.23:37652"
	out.DownstreamLocal, out.DownstreamRemote = "10.0.45.184:8000", "10.44.1.23:46520"

	kts, _ := time.Parse(TimeLayout, "2024-01-12T10:00:00.123Z")
	kuma := Entry{
		Start: kts, Mesh: "default", Method: "GET", Path: "/", Protocol: "HTTP/1.1", Code: 200, BytesOut: 210,
		Duration: 2 * time.Millisecond, Upstream: time.Millisecond, UserAgent: "curl/8.5.0",
		RequestID: "1b4e28ba-2fa1-41d2-883f-0016d3cca427", Authority: "test-server:80", SourceService: "unknown",
		DestService: "test-server_kuma-demo_svc_80", SourceAddress: "10.244.0.7", UpstreamHost: "127.0.0.1:80",
	}
	cases := []struct {
		name, format, want string
		e                  Entry
	}{
		{"istio inbound", Istio, istioInbound, in},
		{"istio outbound", Istio, istioOutbound, out},
		{"kuma inbound", Kuma, kumaInbound, kuma},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Format(tc.format, tc.e)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("Format:\n got %s\nwant %s", got, tc.want)
			}
			back, err := Parse(tc.format, tc.want)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			// The two fields Format always writes as "-" are not in Entry.
			if again, _ := Format(tc.format, back); again != tc.want {
				t.Errorf("Parse then Format:\n got %s\nwant %s", again, tc.want)
			}
			if back.RequestID != tc.e.RequestID || back.Authority != tc.e.Authority || back.Code != tc.e.Code || back.UpstreamHost != tc.e.UpstreamHost {
				t.Errorf("Parse = %+v", back)
			}
		})
	}
}

func TestEmptyValuesAreDashes(t *testing.T) {
	line, err := Format(Istio, Entry{Start: start(t), Method: "GET", Path: "/", Protocol: "HTTP/1.1", Code: 503,
		Flags: FlagNoHealthyUpstream, Details: DetailsNoHealthyUpstream, Upstream: -1})
	if err != nil {
		t.Fatal(err)
	}
	want := `[2020-11-25T21:26:18.409Z] "GET / HTTP/1.1" 503 UH no_healthy_upstream - "-" 0 0 0 - "-" "-" "-" "-" "-" - - - - - -`
	if line != want {
		t.Fatalf("got  %s\nwant %s", line, want)
	}
	e, err := Parse(Istio, line)
	if err != nil || e.Upstream != -1 || e.UserAgent != "" || e.Flags != "UH" {
		t.Fatalf("Parse = %+v, %v", e, err)
	}
}

func TestParseRejects(t *testing.T) {
	cases := []struct{ name, format, line, want string }{
		{"unknown format", "zipkin", istioInbound, `format "zipkin"`},
		{"kuma line as istio", Istio, kumaInbound, "fields, want 22"},
		{"unterminated quote", Istio, `[2020-11-25T21:26:18.409Z] "GET /`, "unterminated"},
		{"bad time", Istio, strings.Replace(istioInbound, "21:26:18.409Z", "21:26", 1), "start time"},
		{"bad code", Istio, strings.Replace(istioInbound, " 418 - ", " x18 - ", 1), "response code"},
		{"quote inside a value", Istio, strings.Replace(istioInbound, "curl/7.73.0-DEV", `cu"rl`, 1), "field"},
		{"double space", Istio, strings.Replace(istioInbound, " 0 135", "  0 135", 1), "empty field"},
		{"too long", Istio, istioInbound + strings.Repeat("x", maxLine), "longer than"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.format, tc.line)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Parse error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestNewRequestIDIsUUIDv4(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		id := NewRequestID()
		if len(id) != 36 || id[14] != '4' || !strings.ContainsRune("89ab", rune(id[19])) || seen[id] {
			t.Fatalf("request id %q: want a fresh version-4 UUID", id)
		}
		seen[id] = true
	}
}

// FuzzParse: any line either fails to parse or reads back into an entry
// that formats to a line parsing to the same entry.
func FuzzParse(f *testing.F) {
	for _, l := range []string{istioInbound, istioOutbound, kumaInbound, "", `[x] "a b c"`} {
		f.Add(Istio, l)
		f.Add(Kuma, l)
	}
	f.Fuzz(func(t *testing.T, format, line string) {
		e, err := Parse(format, line)
		if err != nil {
			return
		}
		out, err := Format(format, e)
		if err != nil {
			t.Fatalf("Format of a parsed entry: %v", err)
		}
		e2, err := Parse(format, out)
		if err != nil {
			t.Fatalf("re-parse %q (from %q): %v", out, line, err)
		}
		if out2, _ := Format(format, e2); out2 != out {
			t.Fatalf("not stable:\n%q\n%q", out, out2)
		}
	})
}

// FuzzRoundTrip: an entry whose values Envoy could write unambiguously
// (no quote, bracket or space inside a field) reads back as written.
func FuzzRoundTrip(f *testing.F) {
	f.Add("GET", "/callme/ping", "Java/11.0.11", "rid", "callme-service:8080", "127.0.0.1:8080", int64(21), int64(3), 200)
	f.Fuzz(func(t *testing.T, method, path, ua, rid, authority, host string, bytes, durMS int64, code int) {
		clean := func(s string, spaces bool) string {
			return strings.Map(func(r rune) rune {
				if r == '"' || r == ']' || r == '[' || (!spaces && r == ' ') || r < 0x20 {
					return -1
				}
				return r
			}, s)
		}
		if bytes < 0 || durMS < 0 || durMS > 1<<40 || code < 0 {
			return
		}
		e := Entry{
			Start: start(t), Method: clean(method, false), Path: clean(path, false), Protocol: "HTTP/1.1",
			Code: code, Flags: FlagNone, Details: DetailsViaUpstream, BytesIn: bytes, BytesOut: bytes,
			Duration: time.Duration(durMS) * time.Millisecond, Upstream: -1, UserAgent: clean(ua, true),
			RequestID: clean(rid, true), Authority: clean(authority, true), UpstreamHost: clean(host, true),
			UpstreamCluster: "inbound|8080||", Route: "default", Mesh: "default",
		}
		for _, s := range []*string{&e.Method, &e.Path, &e.UserAgent, &e.RequestID, &e.Authority, &e.UpstreamHost} {
			if *s == "-" {
				*s = "" // "-" is how an empty value is written
			}
		}
		for _, format := range Formats() {
			line, err := Format(format, e)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Parse(format, line)
			if err != nil {
				t.Fatalf("Parse(%q): %v", line, err)
			}
			if got.Method != e.Method || got.Path != e.Path || got.UserAgent != e.UserAgent || got.RequestID != e.RequestID ||
				got.Authority != e.Authority || got.UpstreamHost != e.UpstreamHost || got.Code != e.Code ||
				got.BytesOut != e.BytesOut || got.Duration != e.Duration || !got.Start.Equal(e.Start) {
				t.Fatalf("%s round trip:\nline %q\n got %+v\nwant %+v", format, line, got, e)
			}
		}
	})
}

// The JSON formats: what the lab writes reads back as the same entry, and
// mesh-verify's envoy-json presets read the request from it, on the side
// the upstream cluster (Istio) or the source service (Kuma) says.
func TestJSONFormatsRoundTripAndMatchThePresets(t *testing.T) {
	in := Entry{Start: start(t), Method: "GET", Path: "/status/418", Protocol: "HTTP/1.1", Code: 418, Flags: FlagNone,
		Details: DetailsViaUpstream, BytesOut: 135, Duration: 3 * time.Millisecond, Upstream: time.Millisecond,
		UserAgent: "curl/7.73.0-DEV", RequestID: "84961386-6d84-929d-98bd-c5aee93b5c88", Authority: "httpbin:8000",
		UpstreamHost: "127.0.0.1:80", UpstreamCluster: "inbound|8000||", UpstreamLocal: "127.0.0.1:41854",
		DownstreamLocal: "10.44.1.27:80", DownstreamRemote: "10.44.1.23:37652", Route: "default",
		Mesh: "default", SourceService: "unknown", DestService: "httpbin_foo_svc_8000", SourceAddress: "10.44.1.27"}
	for _, c := range []struct {
		format   string
		keep     func(Entry) Entry // the fields the format has
		inbound  string
		outbound func(*Entry)
	}{
		{IstioJSON, func(e Entry) Entry {
			e.Mesh, e.SourceService, e.DestService, e.SourceAddress = "", "", "", ""
			return e
		}, `"upstream_cluster":"inbound|8000||"`, func(e *Entry) { e.UpstreamCluster = "outbound|8000||httpbin.foo.svc.cluster.local" }},
		{KumaJSON, func(e Entry) Entry {
			e.Details, e.UpstreamCluster, e.UpstreamLocal, e.DownstreamLocal, e.DownstreamRemote, e.SNI, e.Route = "", "", "", "", "", "", ""
			return e
		}, `"kuma_source_service":"unknown"`, func(e *Entry) { e.SourceService = "curl_foo_svc" }},
	} {
		line, err := Format(c.format, in)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(line, c.inbound) || !strings.Contains(line, `"response_code":418`) {
			t.Errorf("%s: %s", c.format, line)
		}
		back, err := Parse(c.format, line)
		if err != nil {
			t.Fatal(err)
		}
		want := c.keep(in)
		want.Flags = "" // "-" reads back empty, as in the text formats
		if back != want {
			t.Errorf("%s: read back %+v, want %+v", c.format, back, want)
		}
		for _, side := range []string{"inbound", "outbound"} {
			e := in
			if side == "outbound" {
				c.outbound(&e)
			}
			line, _ := Format(c.format, e)
			for _, preset := range []string{"envoy-json", "envoy-json-outbound"} {
				p, _ := podlogs.LookupPreset(preset)
				r := podlogs.NewRule(regexp.MustCompile(p.Match))
				if p.Exclude != "" {
					r.Exclude = regexp.MustCompile(p.Exclude)
				}
				m, ok := r.Match(podlogs.Line{Text: line})
				if want := (preset == "envoy-json") == (side == "inbound"); ok != want {
					t.Errorf("%s %s line: preset %s matched %v", c.format, side, preset, ok)
				} else if ok && (m.Status != 418 || m.RequestID != in.RequestID || m.Upstream != "127.0.0.1:80" || m.Fields["authority"] != "httpbin:8000") {
					t.Errorf("%s %s line: preset %s read %+v", c.format, side, preset, m)
				}
			}
		}
	}
	if _, err := Parse(IstioJSON, `{"response_code":"x"}`); err == nil {
		t.Error("a bad response_code parsed")
	}
}
