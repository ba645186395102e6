package reports

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/extension"
	"golang.org/x/net/html"

	"github.com/mesh-verify/mesh-verify/assert"
)

// richReport has a string in every section a writer prints: names from a
// scenario, --set and a counts file, bodies and log lines, errors.
func richReport() *Report {
	r := sample()
	r.Scenario.Description = "description"
	r.Warnings = []string{"warning"}
	r.Samples = []string{"sample body"}
	r.Metrics.Errors = []ErrorCount{{Message: "error message", Count: 2}}
	r.Metrics.StatusCodes = map[string]int{"200": 100}
	r.ConfigErrors = []ConfigError{{Subject: "subject", Message: "message", Samples: []string{"line"}}}
	r.Rules = []RuleReport{{Source: "logs", Rule: "rule", Read: 3, Samples: []string{"line"}}}
	r.Reconciliation = []Reconciliation{{Source: "logs", Status: ReconcileOK, Reason: "reason",
		Pods: []PodReconciliation{{Cluster: "c1", Pod: "pod", Workload: "w", Mode: "window"}}}}
	r.Workers = &Workers{Image: "image", Count: 1, Jobs: []WorkerJob{{Cluster: "c1", Namespace: "ns", Job: "job", Workers: 1}},
		Rows: []WorkerRow{{Cluster: "c1", Pod: "pod", Error: "lost"}}}
	r.Converge = &Converge{Need: 2, Reason: "reason", Attempts: []Attempt{{RunID: "run", Verdict: assert.Fail, Reason: "reason"}}}
	r.Sequential = &Sequential{StoppedAt: 1, Rule: "rule", Plan: assert.SequentialPlan{Looks: []int64{10, 20}}}
	r.Timeline = Timeline{SliceWidth: 1e9, Slices: []Slice{{Requests: 10, Clusters: map[string]int64{"c1": 10}}}}
	r.Dimensions[0].Source = "body"
	r.Expectation[0].Source = "logs"
	r.Expectation[0].Model = &assert.Shares{Model: "weights", Shares: map[string]float64{"c1": .5, "c2": .5}, Explanation: []string{"weights c1: 1, c2: 1"}}
	r.Expectation[0].Split = &assert.SplitResult{Verdict: assert.Fail, Buckets: []assert.BucketResult{{Bucket: "c1", Count: 60, Verdict: assert.Fail}},
		Evidence: assert.Evidence{N: 100, BalancingReason: "balancing reason"}, FailMethod: "clopper-pearson"}
	r.Failure = &Failure{Kind: FailureSetup, Phase: PhaseAttack, Error: "error", Cause: "cause"}
	return r
}

// enums are the report's fields whose values are a closed set, which a
// crafted report.json cannot make arbitrary (decoding refuses it).
var enums = map[string]bool{"schema": true, "verdict": true, "gate": true}

// names are the report's maps keyed by names from the run.
var names = map[string]bool{"statusCodes": true, "clusters": true, "shares": true, "podShares": true, "extra": true, "sources": true, "latency": true}

// plant appends s to every string of the report but its enums.
func plant(t testing.TB, r *Report, s string) *Report {
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var doc any
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(key string, v any) any
	walk = func(key string, v any) any {
		switch v := v.(type) {
		case string:
			if _, err := time.Parse(time.RFC3339Nano, v); enums[key] || err == nil {
				return v // a verdict or a time: decoding refuses other text
			}
			return v + s
		case []any:
			for i := range v {
				v[i] = walk(key, v[i])
			}
		case map[string]any:
			out := map[string]any{}
			for k, x := range v {
				nk := k
				if names[key] {
					nk = k + s // a bucket's, a cluster's or a status code's name
				}
				out[nk] = walk(k, x)
			}
			return out
		}
		return v
	}
	if b, err = json.Marshal(walk("", doc)); err != nil {
		t.Fatal(err)
	}
	out, err := DecodeJSON("planted.json", b)
	if err != nil {
		t.Fatalf("the planted report does not decode: %v", err)
	}
	return out
}

// rawControl finds a byte no output may carry: a C0 control other than
// newline, tab (and, in XML and HTML, carriage return), DEL, a C1
// control, or invalid UTF-8.
func rawControl(out string) (string, bool) {
	for i, r := range out {
		switch {
		case r == utf8.RuneError:
			if _, size := utf8.DecodeRuneInString(out[i:]); size == 1 {
				return out[max(0, i-20):min(len(out), i+20)], true
			}
		case r == '\n' || r == '\t':
		case r < 0x20 || r == 0x7f || 0x80 <= r && r <= 0x9f:
			return out[max(0, i-20):min(len(out), i+20)], true
		}
	}
	return "", false
}

// htmlTags counts the start tags of an HTML document by name.
func htmlTags(t testing.TB, doc string) map[string]int {
	tags := map[string]int{}
	z := html.NewTokenizer(strings.NewReader(doc))
	for {
		switch z.Next() {
		case html.ErrorToken:
			if z.Err() != io.EOF {
				t.Fatal(z.Err())
			}
			return tags
		case html.StartTagToken, html.SelfClosingTagToken:
			name, _ := z.TagName()
			tags[string(name)]++
		}
	}
}

// markdownHTML is what GitHub makes of md (GFM, raw HTML kept).
func markdownHTML(t testing.TB, md string) string {
	var b bytes.Buffer
	if err := goldmark.New(goldmark.WithExtensions(extension.GFM)).Convert([]byte(md), &b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// FuzzHostileStringsInEveryWriter plants a hostile string in every string
// of a report (as a crafted report.json, a response, a log line, a
// scenario's or a counts file's names would) and renders it with every
// writer: no raw control byte leaves any of them, the HTML report and
// the Markdown (as GitHub renders it) gain no element, and no bare link.
func FuzzHostileStringsInEveryWriter(f *testing.F) {
	for _, s := range []string{
		"\x1b[2J\x1b]0;owned\x07", "<img src=x onerror=alert(1)>", "https://evil.example/ www.evil.example a@evil.example",
		"<script>alert(1)</script>", "| x | y |\n\n| - |", "\r\x7f\u0085\u202e", "[link](https://evil.example)", "\xff\xfe",
		"<details><summary>x</summary>", "&lt;b&gt;", "`code` *em* _u_ ~~s~~ \\", "javascript:alert(1)", "--> <!--",
	} {
		f.Add(s)
	}
	base := richReport()
	baseMD, baseHTML := renderTo(f, Markdown, base), renderTo(f, HTML, base)
	baseMDTags, baseHTMLTags := htmlTags(f, markdownHTML(f, baseMD)), htmlTags(f, baseHTML)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 200 {
			return
		}
		r := plant(t, base, s)
		for _, w := range []struct {
			name   string
			render func(io.Writer, *Report) error
		}{{"terminal", Terminal}, {"markdown", Markdown}, {"html", HTML}, {"junit", JUnit}} {
			out := renderTo(t, w.render, r)
			if ctx, ok := rawControl(out); ok {
				t.Errorf("%s: a raw control byte or invalid UTF-8 from %q: %q", w.name, s, ctx)
			}
			switch w.name {
			case "markdown":
				got := markdownHTML(t, out)
				if tags := htmlTags(t, got); !sameTags(tags, baseMDTags) {
					t.Errorf("markdown: %q changed the elements GitHub renders: %v, without it %v\n%s", s, tags, baseMDTags, got)
				}
			case "html":
				if tags := htmlTags(t, out); !sameTags(tags, baseHTMLTags) {
					t.Errorf("html: %q changed the elements: %v, without it %v", s, tags, baseHTMLTags)
				}
			case "junit":
				var v junitSuites
				if err := xml.Unmarshal([]byte(out), &v); err != nil {
					t.Errorf("junit: %q made invalid XML: %v", s, err)
				}
			}
		}
	})
}

// sameTags: the same elements, but for table rows and cells (a planted
// newline may not add rows: the Markdown test counts those) and paragraphs
// and line breaks, which text can add without being markup.
func sameTags(a, b map[string]int) bool {
	for _, m := range []map[string]int{a, b} {
		for tag, n := range m {
			switch tag {
			case "p", "br", "tr", "td", "th":
				continue
			}
			if a[tag] != b[tag] {
				_ = n
				return false
			}
		}
	}
	return true
}

func renderTo(t testing.TB, f func(io.Writer, *Report) error, r *Report) string {
	t.Helper()
	var b bytes.Buffer
	if err := f(&b, r); err != nil {
		t.Fatal(err)
	}
	return b.String()
}
