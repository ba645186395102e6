package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// actionFile is the composite action at the repository's root.
type actionFile struct {
	Runs struct {
		Using string
		Steps []struct {
			ID  string
			Run string
		}
	}
}

// testAction runs action.yml's two steps with bash, as the runner does,
// against the release in dir served by a local HTTP server standing in
// for GitHub's release downloads (download-url input): the install step
// verifies the checksum and puts the binary on GITHUB_PATH; the run step
// runs a scenario against a local app and its exit code and outputs follow
// the verdict. A tampered checksum stops the install.
func testAction(t *testing.T, releaseDir string) {
	raw, err := os.ReadFile("../../action.yml")
	if err != nil {
		t.Fatal(err)
	}
	var a actionFile
	if err := yaml.Unmarshal(raw, &a); err != nil {
		t.Fatalf("action.yml: %v", err)
	}
	steps := map[string]string{}
	for _, s := range a.Runs.Steps {
		steps[s.ID] = s.Run
	}
	if a.Runs.Using != "composite" || steps["install"] == "" || steps["run"] == "" {
		t.Fatalf("action.yml: want a composite action with steps install and run, got %+v", a.Runs)
	}
	downloads := httptest.NewServer(http.StripPrefix("/"+testVersion, http.FileServer(http.Dir(releaseDir))))
	defer downloads.Close()
	runnerArch := map[string]string{"amd64": "X64", "arm64": "ARM64"}[runtime.GOARCH]
	runnerOS := map[string]string{"linux": "Linux", "darwin": "macOS"}[runtime.GOOS]
	if runnerArch == "" || runnerOS == "" {
		t.Skipf("no GitHub runner looks like %s/%s", runtime.GOOS, runtime.GOARCH)
	}
	type result struct {
		code    int
		out     string
		outputs string
	}
	step := func(t *testing.T, script string, env ...string) (result, string) {
		t.Helper()
		dir := t.TempDir()
		outputs, path := filepath.Join(dir, "output"), filepath.Join(dir, "path")
		cmd := exec.Command("bash", "-e", "-c", script)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "RUNNER_OS="+runnerOS, "RUNNER_ARCH="+runnerArch, "RUNNER_TEMP="+dir,
			"GITHUB_OUTPUT="+outputs, "GITHUB_PATH="+path, "GITHUB_STEP_SUMMARY="+filepath.Join(dir, "summary"))
		cmd.Env = append(cmd.Env, env...)
		b, err := cmd.CombinedOutput()
		r := result{out: string(b)}
		if err != nil {
			ee, ok := err.(*exec.ExitError)
			if !ok {
				t.Fatal(err)
			}
			r.code = ee.ExitCode()
		}
		o, _ := os.ReadFile(outputs)
		p, _ := os.ReadFile(path)
		r.outputs = string(o)
		return r, strings.TrimSpace(string(p))
	}
	install := func(t *testing.T, url string) (result, string) {
		return step(t, steps["install"], "MV_VERSION="+testVersion, "MV_ACTION_REF=main", "MV_DOWNLOAD_URL="+url)
	}

	r, bindir := install(t, downloads.URL)
	if r.code != 0 || !strings.Contains(r.outputs, "version="+testVersion+"\n") || bindir == "" {
		t.Fatalf("install step: exit %d, outputs %q, GITHUB_PATH %q\n%s", r.code, r.outputs, bindir, r.out)
	}

	for _, tc := range []struct {
		name   string
		status int
		code   int
	}{{"pass", http.StatusOK, 0}, {"fail", http.StatusServiceUnavailable, 1}} {
		t.Run(tc.name, func(t *testing.T) {
			app := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				fmt.Fprint(w, "I'm callme-service v1")
			}))
			defer app.Close()
			scenario := filepath.Join(t.TempDir(), "scenario.yaml")
			if err := os.WriteFile(scenario, []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: action-test}
clusters: [{name: c1}]
target: {url: "`+app.URL+`/"}
attack: {rate: 100/s, duration: 1s, keepAlive: false}
attribution:
  preset: tutorial
  map: [{from: version, to: cluster, values: {v1: c1}}]
expect:
  - successRate: {atLeast: 90%}
`), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), "runs")
			r, _ := step(t, steps["run"], "PATH="+bindir+string(os.PathListSeparator)+os.Getenv("PATH"),
				"MV_SCENARIO="+scenario, "MV_ARGS=--set attack.duration=2s", "MV_OUT="+out)
			if r.code != tc.code || !strings.Contains(r.outputs, fmt.Sprintf("exit-code=%d\n", tc.code)) ||
				!strings.Contains(r.outputs, "run-dir="+out+"\n") {
				t.Errorf("run step: exit %d, outputs %q; want exit %d and exit-code=%d\n%s", r.code, r.outputs, tc.code, tc.code, r.out)
			}
		})
	}

	t.Run("tampered checksum", func(t *testing.T) {
		bad := t.TempDir()
		for _, name := range []string{"checksums.txt", "mesh-verify_" + testVersion + "_" + runtime.GOOS + "_" + runtime.GOARCH + ".tar.gz"} {
			b, err := os.ReadFile(filepath.Join(releaseDir, name))
			if err != nil {
				t.Fatal(err)
			}
			if name == "checksums.txt" {
				b = []byte(strings.Replace(string(b), string(b[0]), map[bool]string{true: "1", false: "0"}[b[0] == '0'], 1))
			}
			if err := os.WriteFile(filepath.Join(bad, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		srv := httptest.NewServer(http.StripPrefix("/"+testVersion, http.FileServer(http.Dir(bad))))
		defer srv.Close()
		r, path := install(t, srv.URL)
		if r.code == 0 || path != "" {
			t.Errorf("install with a checksum that does not match: exit %d, GITHUB_PATH %q, want a refusal\n%s", r.code, path, r.out)
		}
	})
}
