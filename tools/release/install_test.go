package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/zip"
)

// TestGoInstall: the README's `go install
// github.com/mesh-verify/mesh-verify/cmd/mesh-verify@VERSION` line works
// with the module path as published. The module is served, as
// proxy.golang.org would serve a tag, from a file:// GOPROXY holding the
// module zip of this checkout's HEAD (made by golang.org/x/mod/zip, the
// code the go command itself uses); its dependencies come from the module
// cache or the usual proxy. The installed binary must say the version it
// was installed at, which `go install` records in the build info and
// mesh-verify reports without any -ldflags.
func TestGoInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds mesh-verify from a module zip")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Command("git", "-C", root, "rev-parse", "--verify", "HEAD").Output(); err != nil {
		t.Skipf("%s is not a git checkout with a commit: %v", root, err)
	}
	const path = "github.com/mesh-verify/mesh-verify"
	mv := module.Version{Path: path, Version: testVersion}
	proxy := t.TempDir()
	dir := filepath.Join(proxy, path, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, testVersion+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	// The committed tree at HEAD, as a tag would publish it (git archive,
	// which also works in a git worktree, where zip.CreateFromVCS finds no
	// .git directory); the tools/ modules, with go.mod files of their own,
	// are left out by the zip rules.
	tree := t.TempDir()
	if out, err := exec.Command("bash", "-c", `git -C "$1" archive --format=tar HEAD | tar -x -C "$2"`, "-", root, tree).CombinedOutput(); err != nil {
		t.Fatalf("git archive HEAD: %v\n%s", err, out)
	}
	if err := zip.CreateFromDir(zf, mv, tree); err != nil {
		t.Fatalf("module zip of HEAD: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	gomod, err := exec.Command("git", "-C", root, "show", "HEAD:go.mod").Output()
	if err != nil {
		t.Fatal(err)
	}
	info, _ := json.Marshal(map[string]any{"Version": testVersion, "Time": time.Unix(1700000000, 0).UTC()})
	for name, data := range map[string][]byte{
		testVersion + ".mod":  gomod,
		testVersion + ".info": info,
		"list":                []byte(testVersion + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gobin := t.TempDir()
	upstream := os.Getenv("GOPROXY")
	if upstream == "" {
		upstream = "https://proxy.golang.org,direct"
	}
	cmd := exec.Command("go", "install", path+"/cmd/mesh-verify@"+testVersion)
	cmd.Dir = t.TempDir() // outside any module, as a user runs it
	cmd.Env = append(os.Environ(), "GOBIN="+gobin, "GOPROXY=file://"+filepath.ToSlash(proxy)+","+upstream,
		// The test's version is in no checksum database; the dependencies
		// still are, and go.sum in the zip pins them.
		"GONOSUMDB="+path, "GOWORK=off",
		// make build's flags, so the packages compiled for the other tests
		// (and `make build`) are reused from the build cache.
		"GOFLAGS=-trimpath", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go install %s/cmd/mesh-verify@%s: %v\n%s", path, testVersion, err, out)
	}
	out, err := exec.Command(filepath.Join(gobin, "mesh-verify"), "version", "-o", "json").Output()
	if err != nil {
		t.Fatalf("installed mesh-verify version: %v", err)
	}
	var v struct{ Version string }
	if err := json.Unmarshal(out, &v); err != nil || v.Version != testVersion {
		t.Errorf("installed mesh-verify says %s (%v), want version %s", strings.TrimSpace(string(out)), err, testVersion)
	}
}
