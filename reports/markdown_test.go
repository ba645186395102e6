package reports

import (
	"bytes"
	"strings"
	"testing"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	extast "github.com/yuin/goldmark/extension/ast"
	"github.com/yuin/goldmark/renderer/html"
	"github.com/yuin/goldmark/text"

	"github.com/mesh-verify/mesh-verify/assert"
)

// gfmTable is one table as GitHub's Markdown (GFM, through goldmark)
// reads it: its header's first cell and its body rows.
type gfmTable struct {
	head string
	rows int
}

// gfm parses md as GitHub does and returns its tables, its first
// heading's text and the HTML it renders to.
func gfm(t *testing.T, md []byte) (tables []gfmTable, heading string, out string) {
	t.Helper()
	g := goldmark.New(goldmark.WithExtensions(extension.GFM), goldmark.WithRendererOptions(html.WithUnsafe()))
	doc := g.Parser().Parse(text.NewReader(md))
	err := ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch n := n.(type) {
		case *extast.Table:
			tb := gfmTable{}
			for c := n.FirstChild(); c != nil; c = c.NextSibling() {
				switch c.(type) {
				case *extast.TableHeader:
					tb.head = strings.ToLower(strings.TrimSpace(inlineText(c.FirstChild(), md)))
				case *extast.TableRow:
					tb.rows++
				}
			}
			tables = append(tables, tb)
			return ast.WalkSkipChildren, nil
		case *ast.Heading:
			if heading == "" {
				heading = inlineText(n, md)
			}
		}
		return ast.WalkContinue, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := g.Convert(md, &b); err != nil {
		t.Fatal(err)
	}
	return tables, heading, b.String()
}

// inlineText is what an inline container shows: the values of its text
// leaves in order, a soft line break as a newline (what goldmark's
// deprecated Node.Text returned; the node's Lines are not set on inline
// containers such as a table cell or a heading's children).
func inlineText(n ast.Node, src []byte) string {
	var b strings.Builder
	_ = ast.Walk(n, func(c ast.Node, entering bool) (ast.WalkStatus, error) {
		if !entering {
			return ast.WalkContinue, nil
		}
		switch c := c.(type) {
		case *ast.Text:
			b.Write(c.Value(src))
			if c.SoftLineBreak() {
				b.WriteByte('\n')
			}
		case *ast.String:
			b.Write(c.Value)
		}
		return ast.WalkContinue, nil
	})
	return b.String()
}

// summary.md, -o md and the step summary render on GitHub as meant: the
// verdict in the first heading, the expectations' table first, every
// table with exactly its rows (a line of text after a table is not
// another row), details folded, and a URL from a response not a link.
func TestMarkdownRendersOnGitHub(t *testing.T) {
	r := sample()
	r.Warnings = []string{"the target answered slowly"}
	r.Metrics.Errors = []ErrorCount{{Message: `Get "https://evil.example/x": EOF`, Count: 3}}
	r.Samples = []string{"see https://evil.example/ or www.evil.example or mail a@evil.example"}
	r.Expectation[0].Split = &assert.SplitResult{Verdict: assert.Fail, Buckets: []assert.BucketResult{
		{Bucket: "c1", Count: 60, Observed: .6, Expected: .5, Verdict: assert.Fail},
		{Bucket: "c2", Count: 40, Observed: .4, Expected: .5, Verdict: assert.Fail},
	}, Evidence: assert.Evidence{N: 100}, PassLevel: .9, FailLevel: .975, DF: 1}
	r.Converge = &Converge{Need: 2, Attempts: []Attempt{{RunID: "a", Verdict: assert.Fail, ExitCode: 1}, {RunID: "b", Verdict: assert.Fail, ExitCode: 1}}}
	var md bytes.Buffer
	if err := Markdown(&md, r); err != nil {
		t.Fatal(err)
	}
	tables, heading, out := gfm(t, md.Bytes())
	want := []gfmTable{{"attempt", 2}, {"expectation", 3}, {"attack", 1}, {"cluster", 2}, {"cluster", 2}}
	if len(tables) != len(want) {
		t.Fatalf("GFM reads %d tables %v, want %v\n%s", len(tables), tables, want, md.String())
	}
	for i, w := range want {
		if tables[i] != w {
			t.Errorf("table %d: GFM reads %+v, want %+v\n%s", i, tables[i], w, md.String())
		}
	}
	if !strings.Contains(heading, "FAIL") || !strings.Contains(heading, "exit code 1") {
		t.Errorf("first heading %q does not give the verdict and exit code", heading)
	}
	if d, attack := strings.Index(out, "<details>"), strings.Index(out, ">ATTACK</th>"); d < 0 || attack < d {
		t.Errorf("the attack table is not folded in <details> (details at %d, attack table at %d):\n%s", d, attack, out)
	}
	if strings.Contains(out, "<a ") || strings.Contains(out, "mailto:") {
		t.Errorf("text from a response became a link:\n%s", out)
	}
	if !strings.Contains(out, "https://evil.example/") {
		t.Errorf("the URL is not shown as written:\n%s", out)
	}
}

// A run that judged nothing renders its failure alone, every line a line.
func TestMarkdownOfAFailure(t *testing.T) {
	r := &Report{Schema: Schema, RunID: "x", Scenario: ScenarioInfo{Name: "down"}, Verdict: assert.Inconclusive, Gate: assert.Inconclusive, ExitCode: 3,
		Failure: &Failure{Kind: FailureSetup, ExitCode: 3, Phase: PhasePrepare, Error: "cannot reach target http://h/: connection refused", Cause: "connection refused"}}
	var md bytes.Buffer
	if err := Markdown(&md, r); err != nil {
		t.Fatal(err)
	}
	tables, heading, out := gfm(t, md.Bytes())
	if len(tables) != 0 || !strings.Contains(heading, "exit code 3") || !strings.Contains(out, "SETUP ERROR (prepare)") || strings.Contains(out, "<a ") {
		t.Errorf("tables %v, heading %q:\n%s", tables, heading, out)
	}
}
