package podlogs

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// referenceMatch is Rule.Match as it was before the fast path, the regex
// alone (FindStringSubmatch), kept as the reference the fast path must equal.
func referenceMatch(re, exclude *regexp.Regexp, l Line) (Match, bool) {
	sub := re.FindStringSubmatch(l.Text)
	if sub == nil {
		return Match{}, false
	}
	if exclude != nil && exclude.MatchString(l.Text) {
		return Match{Line: l, Excluded: true}, false
	}
	m := Match{Line: l}
	for i, name := range re.SubexpNames() {
		if name == "" || sub[i] == "" || sub[i] == "-" {
			continue
		}
		if m.Fields == nil {
			m.Fields = make(map[string]string, 4)
		}
		m.Fields[name] = sub[i]
	}
	// What the captures mean is shared; what is compared is which lines
	// match and what each capture holds.
	return withFields(m), true
}

// userPatterns are logs.match rules of the kind users write (README.md,
// observing logs), with literals in every position the derivation handles
// and in those it must skip (alternations, optional parts, case folding,
// U+FFFD, which the regexp package matches on invalid UTF-8).
var userPatterns = []string{
	`request_id=(?P<request_id>\S+)`,
	`(?i)GET /callme`,
	`(?:inbound|outbound)\|(?P<port>\d+)`,
	`^\[[^\]]+\] "(?P<method>[A-Z]+) (?P<path>\S+)(?: HTTP/1\.1)?"`,
	`x(?:abc)+y`,
	`(?:abc){2,3}d`,
	`(?:abc){0,3}zz`,
	`a?bc`,
	`\x{FFFD}+ok`,
	`"(?P<rid>[^"]*)" "callme-service(?:-shadow)?:8080"`,
	`Ping: name=(?P<service>[^,]+), version=(?P<version>v\d+)`,
	`(?s)first.second`,
	`^$`,
	``,
}

// sampleLines are every line of podlogs/testdata and attribution/testdata
// (real apps' and proxies' output, testdata/README.md), the generated lines
// of BenchmarkIngestFile, and edits of the Envoy lines that stop the regex
// at each of its parts.
func sampleLines(t testing.TB) []string {
	t.Helper()
	var lines []string
	for _, dir := range []string{"testdata", filepath.Join("..", "attribution", "testdata")} {
		files, err := filepath.Glob(filepath.Join(dir, "*"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no samples in %s: %v", dir, err)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, strings.Split(string(b), "\n")...)
		}
	}
	path, _, _ := ingestFile(t, 4)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimRight(string(b), "\n"), "\n") {
		// The follower's text: the kubelet's timestamp taken off.
		_, text, _ := strings.Cut(l, " ")
		lines = append(lines, text)
	}
	// Lines for the user patterns' literals, U+FFFD and invalid UTF-8.
	lines = append(lines, "\xff\xfeok", "\ufffdok", "xabcabcy", "abcabcd", "zz", "first\nsecond", "GeT /CALLME")
	envoy := readLines(t, "istio-proxy.log")[:5]
	edits := []struct{ old, new string }{
		{`[`, `(`}, {`]`, ``}, {`] "`, `]"`}, {`GET`, `get`}, {`GET `, `GET`}, {` HTTP/1.1"`, `"`},
		{`/`, "/\t"}, {`" 200`, `"200`}, {` 200 `, ` 2x0 `}, {`"-"`, `-`}, {`"-" "`, `"-"  "`},
		{`" "`, `"`}, {`" inbound|`, `"  inbound|`}, {` inbound|`, ` inbound`}, {`" outbound|`, `"outbound|`},
		{`"Java`, "\"Ja\"va"}, {`"Java`, `"Ja" "va`}, {` via_upstream `, " via\n_upstream "},
		{` via_upstream `, " via\xffupstream "}, {`Java`, "J\u00e4va"}, {`"-"`, `"-\n"`},
		{`] "`, `]] "`}, {`" 0 `, `" "" 0 `},
	}
	for _, l := range envoy {
		lines = append(lines, l, l+" ", l[:len(l)/2], strings.Repeat(l, 2))
		for _, e := range edits {
			lines = append(lines, strings.Replace(l, e.old, e.new, 1), strings.ReplaceAll(l, e.old, e.new))
		}
	}
	return lines
}

// The fast path (NewRule) gives every preset's and every user pattern's
// matches, captures and exclusions exactly as the regex alone does.
func TestFastPathEqualsRegex(t *testing.T) {
	lines := sampleLines(t)
	var patterns []Preset
	for _, name := range PresetNames() {
		p, _ := LookupPreset(name)
		patterns = append(patterns, p)
	}
	for _, expr := range userPatterns {
		patterns = append(patterns, Preset{Match: expr})
	}
	for _, p := range patterns {
		expr, re := p.Match, regexp.MustCompile(p.Match)
		fast := NewRule(re)
		// The JSON presets' fields come from decoding, not from the regex:
		// TestPresetsOnRealLines and FuzzJSONFields test them.
		fast.json = false
		var exclude *regexp.Regexp
		if p.Exclude != "" {
			exclude = regexp.MustCompile(p.Exclude)
			fast.Exclude = exclude
		}
		matched := 0
		for _, l := range lines {
			got, gok := fast.Match(Line{Text: l})
			want, wok := referenceMatch(re, exclude, Line{Text: l})
			if gok != wok || !reflect.DeepEqual(got, want) {
				t.Errorf("%s on %q: fast %v %+v, regex %v %+v", expr, l, gok, got, wok, want)
			}
			if wok {
				matched++
			}
		}
		t.Logf("%d of %d lines matched %s", matched, len(lines), expr)
	}
	// The bench's preset takes the Envoy path, not the regex.
	for _, name := range []string{"istio-proxy", "istio-proxy-outbound"} {
		p, _ := LookupPreset(name)
		if r := NewRule(regexp.MustCompile(p.Match)); r.fast == nil || r.fast.envoy == "" {
			t.Errorf("%s: no Envoy fast path", name)
		}
	}
}

// The literal a prefilter may require is only one every match contains.
func TestRequiredLiteral(t *testing.T) {
	ip, _ := LookupPreset("istio-proxy")
	for _, tc := range []struct{ expr, want string }{
		{ip.Match, `" inbound|`},
		{`request_id=(?P<request_id>\S+)`, `request_id=`},
		{`(?i)GET /callme`, ``},
		{`(?:inbound|outbound)\|`, `|`},
		{`x(?:abc)+y`, `abc`},
		{`(?:abc){2,3}d`, `abc`},
		{`(?:abc){0,3}zz`, `zz`},
		{`a?bc`, `bc`},
		{`\x{FFFD}+ok`, `ok`},
		{`\x{FFFD}`, ``},
		{`(?P<x>abcd)e`, `abcd`},
		{`a*`, ``},
		{`(`, ``},
	} {
		if got := requiredLiteral(tc.expr); got != tc.want {
			t.Errorf("requiredLiteral(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// FuzzFastPath: on any line, with the presets' and any valid pattern, the
// fast path matches and captures exactly what the regex alone does.
func FuzzFastPath(f *testing.F) {
	for i, l := range sampleLines(f) {
		f.Add(userPatterns[i%len(userPatterns)], l)
	}
	var presets []*regexp.Regexp
	for _, name := range PresetNames() {
		p, _ := LookupPreset(name)
		presets = append(presets, regexp.MustCompile(p.Match))
	}
	f.Fuzz(func(t *testing.T, expr, text string) {
		res := presets
		if re, err := regexp.Compile(expr); err == nil {
			res = append(res[:len(res):len(res)], re)
		}
		for _, re := range res {
			r := NewRule(re)
			r.json = false // as in TestFastPathEqualsRegex
			got, gok := r.Match(Line{Text: text})
			want, wok := referenceMatch(re, nil, Line{Text: text})
			if gok != wok || !reflect.DeepEqual(got, want) {
				t.Fatalf("%s on %q: fast %v %+v, regex %v %+v", re, text, gok, got, wok, want)
			}
		}
	})
}
