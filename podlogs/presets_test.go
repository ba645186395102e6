package podlogs

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func presetRule(t testing.TB, name string) Rule {
	t.Helper()
	p, err := LookupPreset(name)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRule(regexp.MustCompile(p.Match))
	if p.Exclude != "" {
		r.Exclude = regexp.MustCompile(p.Exclude)
	}
	return r
}

func readLines(t testing.TB, name string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\n"), "\n")
}

// The log presets against lines the real apps and proxies write
// (testdata/README.md): for every line of a file, the fields the preset
// reads, or nil where it must not count the line.
func TestPresetsOnRealLines(t *testing.T) {
	cases := []struct {
		preset, file string
		want         []map[string]string
	}{
		{"spring-callme", "callme.log", []map[string]string{nil, nil, nil,
			{"service": "callme-service", "version": "v1"},
			{"service": "callme-service", "version": "v2"},
			{"service": "callme-service", "version": "v2"},
			{"service": "callme-service", "version": "v1", "status": "200"},
			{"service": "callme-service", "version": "v1", "status": "504"},
		}},
		{"spring-callme", "caller.log", []map[string]string{nil, nil, nil, nil}},
		{"spring-caller", "caller.log", []map[string]string{
			{"service": "caller-service", "version": "v1"}, nil,
			{"service": "caller-service", "version": "v2"}, nil,
		}},
		{"spring-caller", "callme.log", make([]map[string]string, 8)},
		{"spring-persons", "persons.log", []map[string]string{nil, {}, {}, nil, {}}},
		{"istio-proxy", "istio-proxy.log", []map[string]string{
			{"method": "GET", "path": "/status/418", "status": "418", "request_id": "84961386-6d84-929d-98bd-c5aee93b5c88", "authority": "httpbin:8000", "upstream": "127.0.0.1:80"},
			nil,
			{"method": "GET", "path": "/callme/ping", "status": "200", "request_id": "0f5c3e2a-7b1d-4c9e-8a6f-1d2e3f4a5b6c", "authority": "callme-service:8080", "upstream": "10.244.0.15:8080"},
			{"method": "GET", "path": "/callme/ping", "status": "200", "request_id": "0f5c3e2a-7b1d-4c9e-8a6f-1d2e3f4a5b6c", "authority": "callme-service-shadow:8080", "upstream": "10.245.0.9:8080"},
			nil, nil,
		}},
		{"istio-proxy-outbound", "istio-proxy.log", []map[string]string{
			nil,
			{"method": "GET", "path": "/status/418", "status": "418", "request_id": "84961386-6d84-929d-98bd-c5aee93b5c88", "authority": "httpbin:8000", "upstream": "10.44.1.27:80"},
			nil, nil,
			{"method": "GET", "path": "/callme/ping", "status": "503", "request_id": "6a7b8c9d-0e1f-4a2b-9c3d-4e5f6a7b8c9d", "authority": "callme-service:8080"},
			nil,
		}},
		{"kuma-sidecar", "kuma-sidecar.log", []map[string]string{
			{"method": "GET", "path": "/", "status": "200", "request_id": "5f0c2a6e-3b1d-4e8a-9c7f-2d4b6a8c0e1f", "authority": "test-server:80", "upstream": "10.244.1.7:80"},
			nil, nil,
		}},
		{"kuma-sidecar-outbound", "kuma-sidecar.log", []map[string]string{
			nil, // inbound: excluded
			{"method": "GET", "path": "/", "status": "200", "request_id": "5f0c2a6e-3b1d-4e8a-9c7f-2d4b6a8c0e1f", "authority": "test-server:80", "upstream": "10.244.1.7:80"},
			nil,
		}},
		{"envoy-json", "envoy-json.log", []map[string]string{
			nil,
			{"method": "GET", "path": "/headers", "status": "200", "request_id": "6618b006-b862-927e-ac43-aaf4f2026c0d", "authority": "httpbin:8000", "upstream": "10.10.241.82:80"},
			{"method": "GET", "path": "/status/418", "status": "418", "request_id": "b6d7d73c-3f47-919f-9836-e8cd5d8df2da", "authority": "httpbin:8000", "upstream": "127.0.0.1:80"},
			{"method": "GET", "path": "/", "status": "200", "request_id": "5f0c2a6e-3b1d-4e8a-9c7f-2d4b6a8c0e1f", "authority": "test-server:80", "upstream": "10.244.1.7:80"},
			nil, nil,
		}},
		{"envoy-json-outbound", "envoy-json.log", []map[string]string{
			{"method": "GET", "path": "/headers", "status": "200", "request_id": "6618b006-b862-927e-ac43-aaf4f2026c0d", "authority": "httpbin:8000", "upstream": "10.10.241.82:80"},
			nil, nil, nil,
			{"method": "GET", "path": "/", "status": "200", "request_id": "5f0c2a6e-3b1d-4e8a-9c7f-2d4b6a8c0e1f", "authority": "test-server:80", "upstream": "10.244.1.7:80"},
			nil,
		}},
		{"nginx", "nginx.log", []map[string]string{
			{"method": "GET", "path": "/", "status": "200"},
			nil, // the kubelet's probe
			{"method": "GET", "path": "/missing", "status": "404"},
			nil, // the error log
		}},
	}
	for _, tc := range cases {
		r := presetRule(t, tc.preset)
		lines := readLines(t, tc.file)
		if len(lines) != len(tc.want) {
			t.Fatalf("%s: %d lines, %d expectations", tc.file, len(lines), len(tc.want))
		}
		for i, text := range lines {
			m, ok := r.Match(Line{Text: text})
			switch want := tc.want[i]; {
			case want == nil && ok:
				t.Errorf("%s on %s:%d counts the line: %+v", tc.preset, tc.file, i+1, m.Fields)
			case want != nil && !ok:
				t.Errorf("%s on %s:%d does not count the line", tc.preset, tc.file, i+1)
			case want != nil && !maps.Equal(m.Fields, want) && !(len(want) == 0 && len(m.Fields) == 0):
				t.Errorf("%s on %s:%d: fields %v, want %v", tc.preset, tc.file, i+1, m.Fields, want)
			}
		}
	}
	// What the fields mean for the counts: a copy, a status, an upstream.
	r := presetRule(t, "istio-proxy")
	lines := readLines(t, "istio-proxy.log")
	primary, _ := r.Match(Line{Text: lines[2]})
	copied, _ := r.Match(Line{Text: lines[3]})
	if primary.Shadow || !copied.Shadow || primary.RequestID != copied.RequestID || primary.Status != 200 || copied.Upstream != "10.245.0.9:8080" {
		t.Errorf("primary %+v, copy %+v", primary, copied)
	}
	m, _ := presetRule(t, "nginx").Match(Line{Text: readLines(t, "nginx.log")[1]})
	if !m.Excluded {
		t.Error("the probe line is not marked excluded")
	}
	if _, err := LookupPreset("envoy"); err == nil || !strings.Contains(err.Error(), "istio-proxy") {
		t.Errorf("unknown preset: %v", err)
	}
}

// FuzzPresets: every log preset on any line never panics, and what it
// captures is text of the line.
func FuzzPresets(f *testing.F) {
	for _, name := range []string{"callme.log", "caller.log", "persons.log", "istio-proxy.log", "kuma-sidecar.log", "nginx.log", "envoy-json.log"} {
		for _, l := range readLines(f, name) {
			f.Add(l)
		}
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, name := range PresetNames() {
			m, ok := presetRule(t, name).Match(Line{Text: text})
			if !ok {
				continue
			}
			for g, v := range m.Fields {
				// A JSON preset's values are decoded: escapes differ.
				if !strings.Contains(text, v) && utf8.ValidString(text) && !strings.HasPrefix(name, "envoy-json") {
					t.Errorf("%s: %s %q is not in %q", name, g, v, text)
				}
			}
		}
	})
}

// FuzzJSONFields: any line decodes to fields of known groups, non-empty
// and never "-", or to an error; a JSON object of string values always
// decodes, and its known keys come back.
func FuzzJSONFields(f *testing.F) {
	for _, l := range readLines(f, "envoy-json.log") {
		f.Add(l)
	}
	f.Add(`{"a":{"b":{"c":{"d":{"e":{"f":{"g":{"h":{"i":1}}}}}}}}}`)
	f.Add(`{"method":"GET"} {"x":1}`)
	f.Fuzz(func(t *testing.T, text string) {
		fields, err := jsonFields(text)
		if err != nil {
			return
		}
		for g, v := range fields {
			if v == "" || v == "-" || !slices.Contains([]string{"method", "path", "authority", "request_id", "status", "upstream", "attempt"}, g) {
				t.Fatalf("%q: field %s = %q", text, g, v)
			}
		}
	})
}
