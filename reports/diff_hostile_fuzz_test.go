package reports

import (
	"io"
	"testing"
)

// FuzzHostileStringsInDiff is FuzzHostileStringsInEveryWriter for
// `report diff`: two crafted report.json files with a hostile string in
// every string (bucket, dimension, expectation and scenario names) are
// compared and rendered by the diff's terminal and HTML writers: no raw
// control byte leaves them, and the HTML gains no element.
func FuzzHostileStringsInDiff(f *testing.F) {
	for _, s := range []string{
		"\x1b[2J\x1b]0;owned\x07", "<img src=x onerror=alert(1)>", "https://evil.example/ www.evil.example",
		"<script>alert(1)</script>", "\r\x7f\u0085\u202e", "\xff\xfe", "--> <!--",
	} {
		f.Add(s)
	}
	base := richReport()
	d0, err := Diff(base, base, 0.95)
	if err != nil {
		f.Fatal(err)
	}
	baseHTMLTags := htmlTags(f, renderTo(f, func(w io.Writer, _ *Report) error { return DiffHTML(w, d0) }, nil))
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 200 {
			return
		}
		r := plant(t, base, s)
		d, err := Diff(r, r, 0.95)
		if err != nil {
			t.Fatalf("diff of a planted report: %v", err)
		}
		for _, w := range []struct {
			name   string
			render func(io.Writer, *Report) error
		}{
			{"terminal", func(w io.Writer, _ *Report) error { return DiffTerminal(w, d) }},
			{"html", func(w io.Writer, _ *Report) error { return DiffHTML(w, d) }},
		} {
			out := renderTo(t, w.render, nil)
			if ctx, ok := rawControl(out); ok {
				t.Errorf("diff %s: a raw control byte or invalid UTF-8 from %q: %q", w.name, s, ctx)
			}
			if w.name == "html" {
				if tags := htmlTags(t, out); !sameTags(tags, baseHTMLTags) {
					t.Errorf("diff html: %q changed the elements: %v, without it %v", s, tags, baseHTMLTags)
				}
			}
		}
	})
}
