package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// grammarCase is one command of the -o grammar: its arguments before -o,
// the exit code of its -o json, and the values its -o takes.
type grammarCase struct {
	name    string
	args    []string
	code    int
	allowed []string
}

// grammarCases are every command that prints results (issue 26: "every
// command accepts -o json"); run's -o json is TestRunFailureOutputs' and
// TestRunBatch's. A saved run and a second one for report and diff come
// from a real run against a real HTTP server.
func grammarCases(t *testing.T) []grammarCase {
	t.Helper()
	url := v1Server(t)
	dir := t.TempDir()
	sc := writeFile(t, dir, "s.yaml", batchScenario("grammar", url, "c1"))
	out := filepath.Join(dir, "runs")
	for range 2 {
		var stdout, stderr bytes.Buffer
		if code := execute([]string{"run", sc, "--out", out, "-q"}, &stdout, &stderr); code != exitcode.Pass {
			t.Fatalf("run: exit %d\n%s", code, stderr.String())
		}
	}
	runs, err := filepath.Glob(filepath.Join(out, "2*"))
	if err != nil || len(runs) != 2 {
		t.Fatalf("run directories %v (%v)", runs, err)
	}
	bad := writeFile(t, dir, "bad.yaml", "kind: Nonsense\n")
	return []grammarCase{
		{"version", []string{"version"}, exitcode.Pass, []string{"text", "table", "json"}},
		{"scenarios list", []string{"scenarios", "list"}, exitcode.Pass, []string{"table", "json", "yaml"}},
		{"scenarios show", []string{"scenarios", "show", "url-split"}, exitcode.Pass, []string{"yaml", "json"}},
		{"schema", []string{"schema", "report"}, exitcode.Pass, []string{"json"}},
		{"rbac", []string{"rbac", "istio-helloworld"}, exitcode.Pass, []string{"yaml", "json"}},
		{"validate, one file invalid", []string{"validate", sc, bad, "url-split"}, exitcode.InvalidInput, []string{"table", "json"}},
		{"plan scenario", []string{"plan", "istio-helloworld"}, exitcode.Pass, []string{"table", "json"}},
		{"plan flags", []string{"plan", "--weights", "c2=1,c3=3", "--looks", "3"}, exitcode.Pass, []string{"table", "json"}},
		{"check", []string{"check", "--counts", "c1=50,c2=50", "--expect", "equal"}, exitcode.Inconclusive, []string{"table", "json"}},
		{"report", []string{"report", runs[0]}, exitcode.Pass, []string{"table", "json", "html", "junit", "md", "plot"}},
		{"report diff", []string{"report", "diff", runs[0], runs[1]}, exitcode.Pass, []string{"table", "json", "html"}},
		{"lab list", []string{"lab", "list"}, exitcode.Pass, []string{"table", "json"}},
	}
}

// TestEveryCommandOutputsJSON: every command that prints results takes
// -o json and prints one JSON document on stdout, nothing else, whatever
// it warns about on stderr; a value it cannot print is an error naming the
// flag and the values it takes; and -o completes those values.
func TestEveryCommandOutputsJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range grammarCases(t) {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr bytes.Buffer
			code := execute(append(slices.Clone(tc.args), "-o", "json"), &stdout, &stderr)
			if code != tc.code {
				t.Errorf("-o json: exit %d, want %d\n%s", code, tc.code, stderr.String())
			}
			dec := json.NewDecoder(&stdout)
			var v any
			if err := dec.Decode(&v); err != nil {
				t.Fatalf("-o json: stdout is not JSON: %v\n%s", err, stdout.String())
			}
			if err := dec.Decode(&v); !errors.Is(err, io.EOF) {
				t.Errorf("-o json: stdout holds more than one document (%v)", err)
			}

			stdout.Reset()
			stderr.Reset()
			code = execute(append(slices.Clone(tc.args), "-o", "xml"), &stdout, &stderr)
			want := `--output "xml": want ` + strings.Join(tc.allowed[:len(tc.allowed)-1], ", ")
			if len(tc.allowed) > 1 {
				want += " or " + tc.allowed[len(tc.allowed)-1]
			}
			if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), want) || stdout.Len() > 0 {
				t.Errorf("-o xml: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, stderr naming %s", code, stdout.String(), stderr.String(), exitcode.InvalidInput, want)
			}

			if tc.args[0] == "lab" {
				return // the lab program completes its own flags
			}
			cmdPath := slices.DeleteFunc(slices.Clone(tc.args), func(a string) bool { return strings.HasPrefix(a, "-") || strings.Contains(a, string(os.PathSeparator)) })
			if got := complete(t, append(cmdPath[:min(len(cmdPath), 2)], "-o", "")...); !slices.Equal(got, tc.allowed) {
				t.Errorf("-o completes %q, want %q", got, tc.allowed)
			}
		})
	}
}

// TestFormatAlias: report's and report diff's old -f/--format and check's
// --json still work, with the notice on stderr only (stdout stays one
// document), and refuse to be given with another -o.
func TestFormatAlias(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	code := execute([]string{"check", "--counts", "c1=50,c2=50", "--expect", "equal", "--json"}, &stdout, &stderr)
	var doc checkOutput
	if err := json.Unmarshal(stdout.Bytes(), &doc); err != nil || code != exitcode.Inconclusive || !strings.Contains(stderr.String(), "--json is deprecated") {
		t.Errorf("check --json: exit %d, %v, stderr %q\n%s", code, err, stderr.String(), stdout.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = execute([]string{"check", "--counts", "c1=50,c2=50", "--expect", "equal", "--json", "-o", "table"}, &stdout, &stderr)
	if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), "--json is --output json: it cannot be given with --output table") {
		t.Errorf("check --json -o table: exit %d, %s", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = execute([]string{"report", "diff", "-f", "json", "-o", "json", "a", "b"}, &stdout, &stderr)
	if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), "give --output or its old name --format, not both") {
		t.Errorf("-f with -o: exit %d, %s", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	code = execute([]string{"report", "no/such/run", "--format", "pdf"}, &stdout, &stderr)
	if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), "--format is deprecated, use --output") || stdout.Len() > 0 {
		t.Errorf("--format pdf: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
}
