package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// shipped is a built-in scenario's file as it is in the repository.
func shipped(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "scenarios", "catalog", name+".yaml"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestScenariosListShowInit(t *testing.T) {
	names := scenarios.BuiltinNames()
	if len(names) < 10 {
		t.Fatalf("built-in scenarios: %v", names)
	}
	var out, errb bytes.Buffer
	if code := execute([]string{"scenarios", "list"}, &out, &errb); code != exitcode.Pass {
		t.Fatalf("scenarios list: exit %d: %s", code, errb.String())
	}
	for _, n := range names {
		sc, err := scenarios.Builtin(n)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(out.String(), n+" ") || !strings.Contains(out.String(), sc.Metadata.Description) {
			t.Errorf("scenarios list lacks %s and its description %q:\n%s", n, sc.Metadata.Description, out.String())
		}
	}

	dir := t.TempDir()
	for _, n := range names {
		t.Run(n, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := execute([]string{"scenarios", "show", n}, &out, &errb); code != exitcode.Pass {
				t.Fatalf("scenarios show %s: exit %d: %s", n, code, errb.String())
			}
			if !bytes.Equal(out.Bytes(), shipped(t, n)) {
				t.Errorf("scenarios show %s is not the file as shipped:\n%s", n, out.String())
			}
			if _, err := scenarios.Parse(n, out.Bytes()); err != nil {
				t.Errorf("scenarios show %s does not parse: %v", n, err)
			}

			out.Reset()
			if code := execute([]string{"scenarios", "init", n}, &out, &errb); code != exitcode.Pass {
				t.Fatalf("scenarios init %s: exit %d: %s", n, code, errb.String())
			}
			got := out.String()
			first, _, _ := strings.Cut(got, "\n")
			if first != "# yaml-language-server: $schema=https://raw.githubusercontent.com/mesh-verify/mesh-verify/main/scenarios/scenario.schema.json" {
				t.Errorf("scenarios init %s: first line %q, want the modeline of the published schema", n, first)
			}
			if strings.Count(got, "yaml-language-server:") != 1 {
				t.Errorf("scenarios init %s: the shipped modeline (relative to the repository) is still there:\n%s", n, got)
			}
			// The shipped YAML follows the header, unchanged but for its modeline.
			_, body, _ := bytes.Cut(shipped(t, n), []byte("\n"))
			if !strings.HasSuffix(got, "#\n"+string(body)) {
				t.Errorf("scenarios init %s does not end with the shipped file:\n%s", n, got)
			}
			sc, _ := scenarios.Builtin(n)
			want := []string{"For your mesh, change:", "target.", "expect:", "mesh-verify validate FILE"}
			for _, c := range sc.Clusters {
				if c.Context != "" {
					want = append(want, "clusters[].context: ", c.Context)
				}
			}
			if f := sc.Target.Forward; f != nil {
				want = append(want, "namespaces: "+f.Namespace, f.Resource)
			}
			for _, w := range sc.Observe {
				want = append(want, "observe["+w.Name+"].selector: "+w.Selector)
			}
			header := strings.TrimSuffix(got, string(body))
			for _, w := range want {
				if !strings.Contains(header, w) {
					t.Errorf("scenarios init %s: the header does not say %q:\n%s", n, w, header)
				}
			}
			mine := filepath.Join(dir, n+".yaml")
			if err := os.WriteFile(mine, out.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			out.Reset()
			errb.Reset()
			if code := execute([]string{"validate", mine}, &out, &errb); code != exitcode.Pass {
				t.Errorf("validate the output of scenarios init %s: exit %d: %s", n, code, errb.String())
			}
		})
	}

	for _, args := range [][]string{{"scenarios", "show", "nope"}, {"scenarios", "init", "nope"}, {"scenarios", "show"}} {
		var out, errb bytes.Buffer
		if code := execute(args, &out, &errb); code != exitcode.InvalidInput {
			t.Errorf("%v: exit %d, want %d: %s", args, code, exitcode.InvalidInput, errb.String())
		}
	}
}

// run, validate and plan take a built-in's name where there is no file of
// that name; an argument that is neither names both and the built-ins.
func TestScenarioByName(t *testing.T) {
	var out, errb bytes.Buffer
	if code := execute([]string{"validate", "skupper-2", "url-split"}, &out, &errb); code != exitcode.Pass ||
		out.String() != "skupper-2: ok\nurl-split: ok\n" {
		t.Errorf("validate skupper-2 url-split: exit %d, %q %q", code, out.String(), errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := execute([]string{"plan", "skupper-2"}, &out, &errb); code != exitcode.Pass ||
		!strings.Contains(out.String(), "the attack sends 1200 requests: enough") {
		t.Errorf("plan skupper-2: exit %d:\n%s%s", code, out.String(), errb.String())
	}
	for _, args := range [][]string{{"run", "no-such"}, {"validate", "no-such"}, {"plan", "no-such"}} {
		out.Reset()
		errb.Reset()
		code := execute(args, &out, &errb)
		want := "no file no-such and no built-in scenario no-such; built-in: " + strings.Join(scenarios.BuiltinNames(), ", ")
		if code != exitcode.InvalidInput || !strings.Contains(errb.String(), want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", args, code, errb.String(), exitcode.InvalidInput, want)
		}
	}

	// A file wins over the built-in of the same name.
	urlSplit := shipped(t, "url-split")
	t.Chdir(t.TempDir())
	if err := os.WriteFile("skupper-2", urlSplit, 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := execute([]string{"plan", "skupper-2"}, &out, &errb); code != exitcode.Pass ||
		!strings.Contains(out.String(), "the attack sends 2000 requests") {
		t.Errorf("plan skupper-2 with a file skupper-2 (url-split's) in the directory: exit %d:\n%s%s", code, out.String(), errb.String())
	}
	if err := os.WriteFile("bad.yaml", []byte("kind: Scenario\nnope: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out.Reset()
	errb.Reset()
	if code := execute([]string{"validate", "bad.yaml"}, &out, &errb); code != exitcode.InvalidInput || !strings.Contains(errb.String(), "bad.yaml:2:") {
		t.Errorf("validate bad.yaml: exit %d, %q; want the file's own errors", code, errb.String())
	}

	// A built-in run writes the built-in, as shipped, into its run
	// directory before it reaches for the target (url-split's
	// 127.0.0.1:8080, where nothing should listen: the run then ends at
	// once with exit 3).
	if c, err := net.DialTimeout("tcp", "127.0.0.1:8080", time.Second); err == nil {
		c.Close()
		t.Skip("something listens on 127.0.0.1:8080, url-split's target: not running it")
	}
	out.Reset()
	errb.Reset()
	code := execute([]string{"run", "url-split", "--out", "runs", "-q"}, &out, &errb)
	if code != exitcode.Setup {
		t.Errorf("run url-split with nothing on 127.0.0.1:8080: exit %d, want %d: %s", code, exitcode.Setup, errb.String())
	}
	written, _ := filepath.Glob(filepath.Join("runs", "*", "scenario.yaml"))
	if len(written) != 1 {
		t.Fatalf("run url-split wrote scenario.yaml files %v, want one", written)
	}
	if b, _ := os.ReadFile(written[0]); !bytes.Equal(b, urlSplit) {
		t.Errorf("the run directory's scenario.yaml is not url-split as shipped:\n%s", b)
	}
}

// TestSetHelpExamplesWork: every --set example the help shows is accepted
// on a built-in scenario whose first expectation is a split, and changes
// the field it names (issue 26: the old example named a field that does
// not exist).
func TestSetHelpExamplesWork(t *testing.T) {
	t.Parallel()
	for _, ex := range setExamples {
		sc, _, err := loadScenario("url-split", []string{ex})
		if err != nil {
			t.Errorf("--set %s on url-split: %v", ex, err)
			continue
		}
		if ex == "attack.rate=500/s" && sc.Attack.Rate == nil {
			t.Errorf("--set %s: attack.rate is %v", ex, sc.Attack.Rate)
		}
		if ex == "clusters[1].context=kind-c2" && sc.Clusters[1].Context != "kind-c2" {
			t.Errorf("--set %s: clusters[1].context is %q", ex, sc.Clusters[1].Context)
		}
	}
}
