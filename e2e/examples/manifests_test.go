package examples_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mesh-verify/mesh-verify/lab/labtest"
)

// doc is one YAML document of a manifest file.
type doc = map[string]any

// readDocs decodes every document of a YAML file.
func readDocs(t *testing.T, path string) []doc {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []doc
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var d doc
		err := dec.Decode(&d)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if d != nil {
			docs = append(docs, d)
		}
	}
}

// dig walks maps by key and lists by index ("0"); nil where the path ends.
func dig(v any, path ...string) any {
	for _, p := range path {
		switch c := v.(type) {
		case map[string]any:
			v = c[p]
		case []any:
			i := 0
			for _, r := range p {
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				return nil
			}
			v = c[i]
		default:
			return nil
		}
	}
	return v
}

func str(v any, path ...string) string {
	s, _ := dig(v, path...).(string)
	return s
}

// manifestFiles lists the Kubernetes manifests in examples/: YAML files
// whose documents have an apiVersion and a kind (the GitHub workflow has
// neither), with the kinds each holds.
func manifestFiles(t *testing.T) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(examplesDir(), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !(strings.HasSuffix(p, ".yaml") || strings.HasSuffix(p, ".yml")) {
			return err
		}
		for _, doc := range readDocs(t, p) {
			if str(doc, "apiVersion") != "" && str(doc, "kind") != "" {
				out[p] = append(out[p], str(doc, "kind"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestManifestsServerDryRun applies every manifest in examples/ with
// `kubectl apply --dry-run=server` to a real API server on which
// Flagger's and Argo Rollouts' CRDs, as they publish them
// (testdata/crds, README there), are installed: the server validates
// each object against the built-in types and the CRDs' schemas.
func TestManifestsServerDryRun(t *testing.T) {
	files := manifestFiles(t)
	var kinds []string
	for _, ks := range files {
		kinds = append(kinds, ks...)
	}
	// The walk found the examples: a rename that hides one fails here.
	for _, k := range []string{"Canary", "AnalysisTemplate", "Rollout", "Job", "ConfigMap", "Deployment", "Service"} {
		if !slices.Contains(kinds, k) {
			t.Fatalf("no %s among the manifests of examples/ (%v)", k, files)
		}
	}
	l := labtest.Clusters(t, "c1")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	kubectl := func(stdin []byte, args ...string) (string, error) {
		return l.Lab.Kubectl(ctx, "c1", stdin, args...)
	}
	crds, err := filepath.Glob("testdata/crds/*.yaml")
	if err != nil || len(crds) != 4 {
		t.Fatalf("testdata/crds: %v %v", crds, err)
	}
	// The VirtualService Argo Rollouts patches (argo-rollouts/istio.yaml)
	// is checked against Istio's published CRDs, the ones the lab serves.
	installCRDs(t, kubectl, append(crds, istioCRDs())...)
	// The namespaces the examples use exist (a dry run creates none).
	namespaces := map[string]bool{}
	for f := range files {
		for _, d := range readDocs(t, f) {
			if ns := str(d, "metadata", "namespace"); ns != "" {
				namespaces[ns] = true
			}
		}
	}
	for ns := range namespaces {
		if ns == "default" || ns == "kube-system" {
			continue // every cluster has them
		}
		if _, err := kubectl(nil, "create", "namespace", ns); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range slices.Sorted(maps.Keys(files)) {
		rel, _ := filepath.Rel(labtest.RepoRoot(), f)
		out, err := kubectl(nil, "apply", "--dry-run=server", "-f", f)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			continue
		}
		t.Logf("%s: %s", rel, strings.Join(strings.Fields(strings.ReplaceAll(out, "\n", "; ")), " "))
	}

	// The schemas are in force: the same Canary and AnalysisTemplate with
	// one field of the wrong type, or misspelt, are refused by the server.
	for _, c := range []struct{ file, from, to string }{
		{"flagger/canary.yaml", "stepWeight: 10", "stepWeight: ten"},
		{"argo-rollouts/analysis-template.yaml", "failureLimit: 0", "failureLimit: [0]"},
		// A misspelt field is refused too (kubectl's strict field validation), not pruned.
		{"argo-rollouts/analysis-template.yaml", "backoffLimit: 0", "backofLimit: 0"},
	} {
		src, err := os.ReadFile(filepath.Join(examplesDir(), c.file))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(src, []byte(c.from)) {
			t.Fatalf("%s has no %q any more; update the test", c.file, c.from)
		}
		broken := bytes.Replace(src, []byte(c.from), []byte(c.to), 1)
		_, err = kubectl(broken, "apply", "--dry-run=server", "-f", "-")
		if err == nil {
			t.Errorf("%s with %q: accepted, the CRD's schema was not applied", c.file, c.to)
			continue
		}
		t.Logf("%s with %q: refused: %v", c.file, c.to, err)
	}
}

// TestExampleScenariosValidate runs `mesh-verify validate` on every
// scenario the examples carry in a ConfigMap (a value holding kind:
// Scenario), so a broken scenario is named by its file and key even where
// the gate's command needs flags this build may lack.
func TestExampleScenariosValidate(t *testing.T) {
	dir := t.TempDir()
	var files []string
	for f := range manifestFiles(t) {
		for _, d := range readDocs(t, f) {
			if str(d, "kind") != "ConfigMap" {
				continue
			}
			data, _ := dig(d, "data").(map[string]any)
			for k, v := range data {
				s, _ := v.(string)
				if !strings.Contains(s, "kind: Scenario") {
					continue
				}
				rel, _ := filepath.Rel(examplesDir(), f)
				out := filepath.Join(dir, strings.NewReplacer("/", "_", ".yaml", "").Replace(rel)+"--"+k)
				if err := os.WriteFile(out, []byte(s), 0o644); err != nil {
					t.Fatal(err)
				}
				files = append(files, out)
			}
		}
	}
	if len(files) < 3 {
		t.Fatalf("%d scenarios in the examples' ConfigMaps, want the Flagger, Argo Rollouts and Job ones", len(files))
	}
	if r := runCmd(t, nil, binary.Path, append([]string{"validate"}, files...)...); r.Code != 0 {
		t.Errorf("mesh-verify validate: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	// A gate that flakes on a correct mesh halts a rollout: every example
	// is planned for 99% power and its attack sends what the plan asks
	// (CI once saw the Flagger gate INCONCLUSIVE on a correct lab at the
	// default 80%, over 13 uneven open-loop connections).
	for _, f := range files {
		r := runCmd(t, nil, binary.Path, "plan", f)
		if r.Code != 0 || !strings.Contains(r.Stdout, "requests: enough") {
			t.Errorf("mesh-verify plan %s: exit %d, want the attack to send enough\n%s%s", filepath.Base(f), r.Code, r.Stdout, r.Stderr)
		}
		var sc struct {
			Statistics struct{ Power float64 } `yaml:"statistics"`
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(data, &sc); err != nil || sc.Statistics.Power < 0.99 {
			t.Errorf("%s: statistics.power %v (%v), want at least 0.99 for a gate", filepath.Base(f), sc.Statistics.Power, err)
		}
	}
}

// istioCRDs is the file of Istio's published CRDs the lab serves (lab/crds).
func istioCRDs() string { return filepath.Join(labtest.RepoRoot(), "lab", "crds", "istio.yaml") }

// installCRDs applies CRD files with kubectl and waits until the API
// server serves them all.
func installCRDs(t *testing.T, kubectl func(stdin []byte, args ...string) (string, error), files ...string) {
	t.Helper()
	for _, c := range files {
		// Server-side: the CRDs are larger than client-side apply's
		// last-applied annotation may be.
		if out, err := kubectl(nil, "apply", "--server-side", "--force-conflicts", "-f", c); err != nil {
			t.Fatalf("install the CRDs of %s: %v\n%s", c, err, out)
		}
	}
	// kubectl wait fails at once ("accessor error") on a CRD whose status
	// has no conditions yet, a moment after it is created: ask again.
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		_, err := kubectl(nil, "wait", "--for=condition=Established", "--timeout=30s", "crd", "--all")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
	}
}
