package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// TestGitHubActionsWorkflow reads examples/github-actions/mesh-verify.yml
// and holds every mesh-verify command in its steps to this build: the
// subcommand exists, its --help lists each flag used, the scenario is a
// built-in (`scenarios list`), the topology one of `lab list`; the run
// directory it uploads is the one `run --out` writes; and the make target
// and scripts it calls exist.
func TestGitHubActionsWorkflow(t *testing.T) {
	wf := readDocs(t, filepath.Join(examplesDir(), "github-actions", "mesh-verify.yml"))[0]
	jobs, _ := dig(wf, "jobs").(map[string]any)
	if len(jobs) != 1 {
		t.Fatalf("want one job, got %d", len(jobs))
	}
	var steps []any
	for _, j := range jobs {
		steps, _ = dig(j, "steps").([]any)
	}
	column := func(args ...string) []string {
		r := runCmd(t, nil, binary.Path, args...)
		if r.Code != 0 {
			t.Fatalf("mesh-verify %s: exit %d: %s", strings.Join(args, " "), r.Code, r.Stderr)
		}
		var names []string
		for _, line := range strings.Split(strings.TrimSpace(r.Stdout), "\n")[1:] {
			names = append(names, strings.Fields(line)[0])
		}
		return names
	}
	builtins, topologies := column("scenarios", "list"), column("lab", "list")

	var out, uploaded string
	var ran []string // subcommands run
	for _, s := range steps {
		if strings.HasPrefix(str(s, "uses"), "actions/upload-artifact@") {
			uploaded = str(s, "with", "path")
			if str(s, "if") != "always()" {
				t.Errorf("the upload step runs only on success (if: %q): a FAIL's report would be lost", str(s, "if"))
			}
		}
		for _, line := range strings.Split(str(s, "run"), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 0:
			case f[0] == "make":
				mk, err := os.ReadFile(filepath.Join(labtest.RepoRoot(), "Makefile"))
				if err != nil {
					t.Fatal(err)
				}
				for _, target := range f[1:] {
					if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(target) + `:`).Match(mk) {
						t.Errorf("step %q: the Makefile has no target %s", str(s, "name"), target)
					}
				}
			case slices.Contains(f, "tools/lab/build.sh"):
				if _, err := os.Stat(filepath.Join(labtest.RepoRoot(), "tools", "lab", "build.sh")); err != nil {
					t.Errorf("step %q: %v", str(s, "name"), err)
				}
			}
			i := slices.Index(f, "bin/mesh-verify")
			if i < 0 {
				continue
			}
			// Up to a pipe or a redirection, the command line of mesh-verify.
			args := f[i+1:]
			if j := slices.IndexFunc(args, func(a string) bool { return a == "|" || strings.HasPrefix(a, ">") }); j >= 0 {
				args = args[:j]
			}
			var sub, flags, pos []string
			for k := 0; k < len(args); k++ {
				a := args[k]
				switch {
				case strings.HasPrefix(a, "-"):
					name, _, hasValue := strings.Cut(a, "=")
					flags = append(flags, name)
					// The flags used here all take a value unless they are booleans the help marks so.
					if !hasValue && k+1 < len(args) && !strings.HasPrefix(args[k+1], "-") && !isBool(t, sub, name) {
						if name == "--out" {
							out = args[k+1]
						}
						if name == "--topology" && !slices.Contains(topologies, args[k+1]) {
							t.Errorf("lab up --topology %s: not a built-in topology (%v)", args[k+1], topologies)
						}
						k++
					}
				case len(flags) == 0 && len(pos) == 0 && isSubcommand(t, sub, a):
					sub = append(sub, a)
				default:
					pos = append(pos, a)
				}
			}
			ran = append(ran, strings.Join(sub, " "))
			help := helpOf(t, sub)
			for _, fl := range flags {
				if !regexp.MustCompile(`(^|[\s,])` + regexp.QuoteMeta(fl) + `[\s=,]`).MatchString(help) {
					t.Errorf("mesh-verify %s: flag %s is not in its --help", strings.Join(sub, " "), fl)
				}
			}
			if slices.Equal(sub, []string{"run"}) {
				if len(pos) != 1 || !slices.Contains(builtins, pos[0]) {
					t.Errorf("run %v: want one built-in scenario name (%v)", pos, builtins)
				}
				if !strings.Contains(help, "GITHUB_STEP_SUMMARY") {
					t.Errorf("the workflow relies on run appending to $GITHUB_STEP_SUMMARY; run --help does not say it does")
				}
			}
		}
	}
	for _, want := range []string{"lab up", "run", "lab down"} {
		if !slices.Contains(ran, want) {
			t.Errorf("no step runs mesh-verify %s (ran: %q)", want, ran)
		}
	}
	if out == "" || strings.TrimSuffix(uploaded, "/") != strings.TrimSuffix(out, "/") {
		t.Errorf("the workflow uploads %q but run writes under --out %q", uploaded, out)
	}
}

// helpOf is `mesh-verify SUB... --help`.
func helpOf(t *testing.T, sub []string) string {
	t.Helper()
	r := runCmd(t, nil, binary.Path, append(slices.Clone(sub), "--help")...)
	if r.Code != 0 {
		t.Fatalf("mesh-verify %s --help: exit %d: %s", strings.Join(sub, " "), r.Code, r.Stderr)
	}
	return r.Stdout
}

// isSubcommand reports whether word is a subcommand of mesh-verify SUB...
// (listed under "Available Commands" of its help).
func isSubcommand(t *testing.T, sub []string, word string) bool {
	t.Helper()
	help := helpOf(t, sub)
	_, cmds, ok := strings.Cut(help, "Available Commands:")
	if !ok {
		return false
	}
	cmds, _, _ = strings.Cut(cmds, "\n\n")
	for _, line := range strings.Split(cmds, "\n") {
		if f := strings.Fields(line); len(f) > 0 && f[0] == word {
			return true
		}
	}
	return false
}

// isBool reports whether flag is a boolean of mesh-verify SUB... (its help
// line shows no value type).
func isBool(t *testing.T, sub []string, flag string) bool {
	t.Helper()
	for _, line := range strings.Split(helpOf(t, sub), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, ",", " "))
		for i, w := range f {
			if w == flag {
				return i+1 >= len(f) || !slices.Contains([]string{"string", "strings", "int", "uint", "uint64", "duration", "stringArray", "float"}, f[i+1])
			}
		}
	}
	return false
}
