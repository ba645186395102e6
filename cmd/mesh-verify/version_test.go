package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// versionJSON is what `version --output json` prints.
type versionJSON struct {
	Name     string `json:"name"`
	Version  string `json:"version"`
	Go       string `json:"go"`
	Vegeta   string `json:"vegeta"`
	Platform string `json:"platform"`
	VCS      string `json:"vcs"`
	Revision string `json:"revision"`
	Time     string `json:"time"`
	Modified bool   `json:"modified"`
}

func parseVersion(t *testing.T, out []byte) versionJSON {
	t.Helper()
	var v versionJSON
	dec := json.NewDecoder(bytes.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("version --output json is not the expected JSON: %v\n%s", err, out)
	}
	if v.Name != "mesh-verify" || v.Go != runtime.Version() || !strings.HasPrefix(v.Vegeta, "v12.") ||
		v.Platform != runtime.GOOS+"/"+runtime.GOARCH || v.Version == "" {
		t.Errorf("version --output json = %+v; want mesh-verify, %s, vegeta v12.*, %s/%s", v, runtime.Version(), runtime.GOOS, runtime.GOARCH)
	}
	return v
}

// versionLines maps the labels of version's text to what follows them.
func versionLines(text string) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		label, rest, _ := strings.Cut(l, " ")
		out[label] = strings.TrimSpace(rest)
	}
	return out
}

func TestVersionCommand(t *testing.T) {
	var out, errb bytes.Buffer
	if code := execute([]string{"version", "--output", "json"}, &out, &errb); code != exitcode.Pass {
		t.Fatalf("version --output json: exit %d: %s", code, errb.String())
	}
	v := parseVersion(t, out.Bytes())
	out.Reset()
	if code := execute([]string{"version"}, &out, &errb); code != exitcode.Pass {
		t.Fatalf("version: exit %d: %s", code, errb.String())
	}
	lines := versionLines(out.String())
	for label, want := range map[string]string{"mesh-verify": v.Version, "go": v.Go + " " + v.Platform, "vegeta": v.Vegeta} {
		if lines[label] != want {
			t.Errorf("version prints %s %q, want %q:\n%s", label, lines[label], want, out.String())
		}
	}
	if lines["revision"] == "" || v.Revision != "" && !strings.HasPrefix(lines["revision"], v.Revision) {
		t.Errorf("version prints revision %q, want %q:\n%s", lines["revision"], v.Revision, out.String())
	}
	out.Reset()
	if code := execute([]string{"version", "-o", "yaml"}, &out, &errb); code != exitcode.InvalidInput {
		t.Errorf("version -o yaml: exit %d, want %d", code, exitcode.InvalidInput)
	}
	// report.json's tool is the same.
	if tool := toolInfo(); tool.Version != v.Version || tool.Go != v.Go || tool.Vegeta != v.Vegeta {
		t.Errorf("toolInfo() = %+v, version prints %+v", tool, v)
	}
}

// A binary built with plain `go build` from a git checkout says which
// checkout, not "dev": Go records the commit (and, since Go 1.24, a
// pseudo-version). The checkout is a copy of this source tree committed
// afresh, as the repository's own checkout may be a git worktree, which
// Go does not recognise (it looks for a .git directory). -buildvcs=auto
// is Go's default; a machine may set -buildvcs=false in go env.
func TestVersionOfAGoBuildFromACheckout(t *testing.T) {
	out, err := exec.Command(binary, "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("%s version -o json: %v", binary, err)
	}
	parseVersion(t, out)

	if testing.Short() {
		t.Skip("builds mesh-verify from a copy of the checkout")
	}
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=auto", "GOWORK=off",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
		}
		return stdout.String()
	}
	files := strings.Split(strings.TrimSuffix(run(root, git, "ls-files", "-z", "--cached", "--others", "--exclude-standard"), "\x00"), "\x00")
	src := t.TempDir()
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(root, f))
		if os.IsNotExist(err) {
			continue // deleted in the work tree, not yet in the index
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run(src, git, "init", "-q")
	run(src, git, "add", "-A")
	run(src, git, "commit", "-q", "--no-gpg-sign", "-m", "a checkout")
	rev := strings.TrimSpace(run(src, git, "rev-parse", "HEAD"))
	// Built as the tests' own builds are (no -trimpath, same
	// CGO_ENABLED), so every dependency comes from the build cache and only
	// this module's packages, at the copy's paths, are compiled again; a
	// -trimpath build compiled all of client-go once more (minutes on a
	// loaded CI machine). Neither changes the VCS stamp.
	bin := filepath.Join(t.TempDir(), "mesh-verify")
	run(src, "go", "build", "-o", bin, "./cmd/mesh-verify")

	v := parseVersion(t, []byte(run(src, bin, "version", "--output", "json")))
	if v.Version == "dev" || !strings.Contains(v.Version, rev[:12]) {
		t.Errorf("go build from a checkout at %s reports version %q", rev, v.Version)
	}
	if v.VCS != "git" || v.Revision != rev || v.Modified || v.Time == "" {
		t.Errorf("go build from a checkout at %s reports %+v", rev, v)
	}
	if text := run(src, bin, "version"); versionLines(text)["revision"] != rev+" ("+v.Time+")" {
		t.Errorf("version does not name revision %s:\n%s", rev, text)
	}
	if got := run(src, bin, "--version"); got != "mesh-verify version "+v.Version+"\n" {
		t.Errorf("--version printed %q, version says %s", got, v.Version)
	}
}
