package examples_test

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// The gates' commands are taken from the manifests and run for real
// against the package's lab (testdata/callme-zones/: a canary step
// where the caller in zone c1 sends 90% to callme v1 in both zones and
// 10% to the canary v2). Only what ties a command to a cluster is
// substituted, and each test says what: the binary's path, the paths the
// pod mounts (scenario, kubeconfig, run directory) and the contexts.
//
// The FAIL variant appends to the same scenario an expectation this lab
// cannot meet (the canary version gets no traffic, when it gets 10%):
// mesh-verify must exit non-zero, which fails the gate.

// canaryNever is the expectation the lab's route violates.
const canaryNever = "  - name: the canary gets nothing\n    never: {by: version, buckets: [v2]}\n"

// undecidable is an expectation 600 requests cannot settle when they all
// succeed: the interval's lower end stays under 99.99%, its upper end is
// 100%.
const undecidable = "  - name: four nines\n    successRate: {atLeast: 99.99%}\n"

// newFlags are the run flags the examples use that issue 11's other
// branches add; a build without them refuses the command with exit 4.
var newFlags = []string{"--context", "--wait-ready", "--converge", "--within"}

// configMapValue returns one key of a ConfigMap among a file's documents.
func configMapValue(t *testing.T, file, name, key string) string {
	t.Helper()
	for _, d := range readDocs(t, file) {
		if str(d, "kind") == "ConfigMap" && str(d, "metadata", "name") == name {
			if v := str(d, "data", key); v != "" {
				return v
			}
		}
	}
	t.Fatalf("%s: no ConfigMap %s with key %s", file, name, key)
	return ""
}

// mountedConfigMap resolves a pod spec's volume mount of a ConfigMap: the
// mount path and the ConfigMap's name.
func mountedConfigMap(t *testing.T, podSpec any, container any) (mountPath, configMap string) {
	t.Helper()
	vols, _ := dig(podSpec, "volumes").([]any)
	mounts, _ := dig(container, "volumeMounts").([]any)
	for _, v := range vols {
		cm := str(v, "configMap", "name")
		if cm == "" {
			continue
		}
		for _, m := range mounts {
			if str(m, "name") == str(v, "name") {
				return str(m, "mountPath"), cm
			}
		}
	}
	t.Fatalf("the pod mounts no ConfigMap (volumes %v, mounts %v)", vols, mounts)
	return "", ""
}

// verdictOf reads the verdict of the last run directory under runs (run
// ids sort by time; a gate that re-runs until converged leaves one per
// attempt, the last one deciding).
func verdictOf(t *testing.T, runs string) string {
	t.Helper()
	var rep struct {
		Verdict string `json:"verdict"`
	}
	lastReport(t, runs, &rep)
	return rep.Verdict
}

// lastReport decodes the report.json of the last run under runs (run ids
// sort by time) into v.
func lastReport(t *testing.T, runs string, v any) {
	t.Helper()
	reports, _ := filepath.Glob(filepath.Join(runs, "*", "report.json"))
	if len(reports) == 0 {
		t.Fatalf("%s: no run directory with a report.json", runs)
	}
	slices.Sort(reports)
	data, err := os.ReadFile(reports[len(reports)-1])
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", reports[len(reports)-1], err)
	}
}

// checkRun fails the test unless a gate's command ended with want;
// a flag this build lacks is named as such.
func checkRun(t *testing.T, what string, r run, want int) {
	t.Helper()
	if r.Code == 4 && strings.Contains(r.Stderr, "unknown flag") {
		t.Fatalf("%s: this build lacks a flag the example uses (one of %v, added by issue 11's other branches): %s",
			what, newFlags, strings.TrimSpace(r.Stderr))
	}
	if r.Code != want {
		t.Fatalf("%s: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.Code, want, r.Stdout, r.Stderr)
	}
}

// TestFlaggerGate runs the Canary's bash webhooks as Flagger's loadtester
// does (`bash -c cmd`; a non-zero exit is an HTTP 500, a failed check).
// Substituted: "mesh-verify" by this build's path; the loadtester's mounts
// (the scenario ConfigMap, the zones' kubeconfig Secret, /tmp) by files of
// the test; the zones' contexts zone-1, zone-2 by the lab's kind-c1, kind-c2,
// and the global control plane's (global) by kind-c1, whose API server
// holds the TrafficRoute in the lab.
func TestFlaggerGate(t *testing.T) {
	dir := filepath.Join(examplesDir(), "flagger")
	canary := readDocs(t, filepath.Join(dir, "canary.yaml"))[0]
	cmds := map[string]string{}
	hooks, _ := dig(canary, "spec", "analysis", "webhooks").([]any)
	for _, h := range hooks {
		if str(h, "metadata", "type") == "bash" {
			cmds[str(h, "type")] = str(h, "metadata", "cmd")
		}
	}
	for _, typ := range []string{"pre-rollout", "rollout"} {
		if !strings.HasPrefix(cmds[typ], "mesh-verify run ") {
			t.Fatalf("canary.yaml: no %s bash webhook running mesh-verify run (%v)", typ, cmds)
		}
	}
	// The loadtester's mounts, which the commands refer to.
	var deploy any
	for _, d := range readDocs(t, filepath.Join(dir, "loadtester.yaml")) {
		if str(d, "kind") == "Deployment" {
			deploy = d
		}
	}
	pod := dig(deploy, "spec", "template", "spec")
	container := dig(pod, "containers", "0")
	mount, cmName := mountedConfigMap(t, pod, container)
	const key = "callme-zones.yaml"
	scenario := configMapValue(t, filepath.Join(dir, "scenario.yaml"), cmName, key)
	var zonesMount string
	for _, m := range dig(container, "volumeMounts").([]any) {
		if str(m, "name") == "zones" {
			zonesMount = str(m, "mountPath")
		}
	}

	l := zonesLab(t)
	tmp := t.TempDir()
	pass := filepath.Join(tmp, "pass.yaml")
	fail := filepath.Join(tmp, "fail.yaml")
	if err := os.WriteFile(pass, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(fail, []byte(scenario+canaryNever), 0o644); err != nil {
		t.Fatal(err)
	}
	gate := func(cmd, scenarioFile, runs string) string {
		for _, s := range []string{mount + "/" + key, zonesMount + "/kubeconfig", "global=global", "zone1=zone-1", "zone2=zone-2", "/tmp/mesh-verify-runs"} {
			if !strings.Contains(cmd, s) {
				t.Fatalf("the webhook's command has no %q any more; update the test: %s", s, cmd)
			}
		}
		return strings.NewReplacer("mesh-verify run ", binary.Path+" run ", mount+"/"+key, scenarioFile, zonesMount+"/kubeconfig", l.Kubeconfig,
			"global=global", "global=kind-c1", "zone1=zone-1", "zone1=kind-c1", "zone2=zone-2", "zone2=kind-c2", "/tmp/mesh-verify-runs", runs).Replace(cmd)
	}
	for _, c := range []struct {
		name, hook, scenario string
		code                 int
		verdict              string
	}{
		{"pre-rollout passes", "pre-rollout", pass, 0, "PASS"},
		{"rollout step passes", "rollout", pass, 0, "PASS"},
		// --converge would retry a FAIL until --within ends: the pre-rollout
		// gate has none, so the failing variant runs there.
		{"pre-rollout fails", "pre-rollout", fail, 1, "FAIL"},
	} {
		t.Run(c.name, func(t *testing.T) {
			runs := filepath.Join(t.TempDir(), "runs")
			r := runCmd(t, nil, "bash", "-c", gate(cmds[c.hook], c.scenario, runs))
			checkRun(t, c.hook+" webhook", r, c.code)
			// Each run must fit the allowance the timing test gives it.
			if per := r.Took / time.Duration(max(1, attempts(t, runs))); per > runAllowance {
				t.Errorf("%s: a run took %s, more than the %s TestFlaggerWebhookTiming allows", c.hook, per, runAllowance)
			}
			if v := verdictOf(t, runs); v != c.verdict {
				t.Errorf("%s: verdict %s, want %s", c.hook, v, c.verdict)
			}
		})
	}

	// Flagger's next step: its Kuma router rewrites the TrafficRoute on the
	// global control plane to 80/20. The same rollout gate, the scenario
	// unchanged, reads the new weight and passes only if the zones' sidecars
	// follow it (the lab's caller sidecar routes by the watched route).
	t.Run("the next step's weight is read from the route", func(t *testing.T) {
		before := e2etest.Kubectl(t, l, "c1", "get", "trafficroute", "callme-service", "-o", "jsonpath={.metadata.resourceVersion}")
		setStep := func(canary int) {
			e2etest.Kubectl(t, l, "c1", "patch", "trafficroute", "callme-service", "--type", "json", "-p",
				fmt.Sprintf(`[{"op":"replace","path":"/spec/conf/split/0/weight","value":%d},{"op":"replace","path":"/spec/conf/split/1/weight","value":%d}]`, 100-canary, canary))
		}
		setStep(20)
		t.Cleanup(func() { setStep(10) }) // the lab is shared: back to the 10% step
		runs := filepath.Join(t.TempDir(), "runs")
		r := runCmd(t, nil, "bash", "-c", gate(cmds["rollout"], pass, runs))
		checkRun(t, "rollout webhook at 20%", r, 0)
		e := stepExpectation(t, runs, flaggerStep)
		if e.Verdict != "PASS" || !near(e.Model.Shares["v2"], 0.2) || !near(e.Model.Shares["v1"], 0.8) {
			t.Errorf("step expectation %s with expected shares %v, want PASS at v1 80%%, v2 20%%", e.Verdict, e.Model.Shares)
		}
		if src := strings.Join(e.Model.Explanation, "\n"); !strings.Contains(src, "TrafficRoute callme-service in cluster global") || strings.Contains(src, "(resourceVersion "+before+")") {
			t.Errorf("the expectation does not name the patched route (resourceVersion was %s):\n%s", before, src)
		}

		// A broken step: Flagger moves the route to 50% but the zones'
		// sidecars keep routing 80/20 (the lab's fault switch freezes its
		// data plane). The gate (the single-run pre-rollout command, which
		// does not retry) FAILs on the step weight.
		freeze := func(on bool) {
			v := daemon.FreezeAnnotation + "-"
			if on {
				v = daemon.FreezeAnnotation + "=true"
			}
			e2etest.Kubectl(t, l, "c1", "annotate", "--overwrite", "trafficroute", "callme-service", v)
		}
		freeze(true)
		t.Cleanup(func() { freeze(false) }) // runs before setStep(10)
		setStep(50)
		runs = filepath.Join(t.TempDir(), "runs")
		r = runCmd(t, nil, "bash", "-c", gate(cmds["pre-rollout"], pass, runs))
		checkRun(t, "pre-rollout webhook with the route not followed", r, 1)
		if e := stepExpectation(t, runs, flaggerStep); e.Verdict != "FAIL" || !near(e.Model.Shares["v2"], 0.5) {
			t.Errorf("step expectation %s with expected shares %v, want FAIL against v2 50%%", e.Verdict, e.Model.Shares)
		}
	})
}

// flaggerStep is the Flagger scenario's step-weight expectation.
const flaggerStep = "the step weight Flagger set"

// stepExpectation is the expectation called name (a step weight's) of
// the last run's report.
func stepExpectation(t *testing.T, runs, name string) (e struct {
	Verdict string `json:"verdict"`
	Model   struct {
		Shares      map[string]float64 `json:"shares"`
		Explanation []string           `json:"explanation"`
	} `json:"model"`
}) {
	t.Helper()
	var rep struct {
		Expectations []json.RawMessage `json:"expectations"`
	}
	lastReport(t, runs, &rep)
	for _, raw := range rep.Expectations {
		var named struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &named) == nil && named.Name == name {
			if err := json.Unmarshal(raw, &e); err != nil {
				t.Fatal(err)
			}
			return e
		}
	}
	t.Fatalf("%s: the last report has no expectation %q", runs, name)
	return e
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// jobContainer is what the test takes from a Job's pod template.
type jobContainer struct {
	args     []string
	scenario string // the mounted ConfigMap's scenario
	path     string // where the pod sees it
}

// readJob takes the container's args and the scenario it mounts from a
// pod spec, checking that a non-zero exit fails the Job: no restart, no
// retry, and the image's entrypoint (no command) receiving the args.
func readJob(t *testing.T, jobSpec any, configMaps string) jobContainer {
	t.Helper()
	if n, _ := dig(jobSpec, "backoffLimit").(int); n != 0 || dig(jobSpec, "backoffLimit") == nil {
		t.Errorf("backoffLimit %v: want 0, so one failed run fails the Job", dig(jobSpec, "backoffLimit"))
	}
	pod := dig(jobSpec, "template", "spec")
	if rp := str(pod, "restartPolicy"); rp != "Never" {
		t.Errorf("restartPolicy %q: want Never (OnFailure would rerun a FAIL in the same pod)", rp)
	}
	c := dig(pod, "containers", "0")
	if dig(c, "command") != nil {
		t.Errorf("the container sets command %v: the image's entrypoint /mesh-verify takes the args", dig(c, "command"))
	}
	if img := str(c, "image"); !strings.Contains(img, "/mesh-verify:") {
		t.Errorf("image %q is not the mesh-verify image", img)
	}
	var jc jobContainer
	for _, a := range dig(c, "args").([]any) {
		jc.args = append(jc.args, fmt.Sprint(a))
	}
	if len(jc.args) < 2 || jc.args[0] != "run" {
		t.Fatalf("args %q: want run SCENARIO ...", jc.args)
	}
	mount, cm := mountedConfigMap(t, pod, c)
	rel, ok := strings.CutPrefix(jc.args[1], mount+"/")
	if !ok {
		t.Fatalf("args[1] %q is not in the mounted ConfigMap %s at %s", jc.args[1], cm, mount)
	}
	jc.path = jc.args[1]
	jc.scenario = configMapValue(t, configMaps, cm, rel)
	return jc
}

// runJob runs a Job container's args against lab l. Substituted: the
// image's /mesh-verify by this build (the same binary, TestImageLayout);
// the in-cluster configuration by --kubeconfig with the lab's and the
// scenario's context "in-cluster" by kind-c1; /tmp/mesh-verify-runs by a
// directory of the test; any argument by subst's value for it.
func runJob(t *testing.T, l *lab.Lab, jc jobContainer, scenario string, env []string, subst map[string]string) (run, string) {
	t.Helper()
	if !strings.Contains(scenario, "context: in-cluster") {
		t.Fatalf("the scenario names no context in-cluster any more; update the test:\n%s", scenario)
	}
	file := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(scenario, "context: in-cluster", "context: kind-c1")), 0o644); err != nil {
		t.Fatal(err)
	}
	runs := filepath.Join(t.TempDir(), "runs")
	args := slices.Clone(jc.args)
	for i, a := range args {
		switch a {
		case jc.path:
			args[i] = file
		case "/tmp/mesh-verify-runs":
			args[i] = runs
		default:
			if v, ok := subst[a]; ok {
				args[i] = v
			}
		}
	}
	args = append(args, "--kubeconfig", l.Kubeconfig)
	return runCmd(t, env, binary.Path, args...), runs
}

// TestKubernetesJob runs examples/kubernetes/job.yaml's container the same
// way, with $GITHUB_STEP_SUMMARY set as a CI runner sets it.
func TestKubernetesJob(t *testing.T) {
	f := filepath.Join(examplesDir(), "kubernetes", "job.yaml")
	var job any
	for _, d := range readDocs(t, f) {
		if str(d, "kind") == "Job" {
			job = d
		}
	}
	if sa := str(job, "spec", "template", "spec", "serviceAccountName"); sa == "" || sa == "default" {
		t.Errorf("the Job runs as ServiceAccount %q: want the one examples/rbac.yaml binds", sa)
	}
	jc := readJob(t, dig(job, "spec"), f)
	summary := filepath.Join(t.TempDir(), "step-summary.md")
	r, runs := runJob(t, zonesLab(t), jc, jc.scenario, []string{"GITHUB_STEP_SUMMARY=" + summary}, nil)
	checkRun(t, "Job", r, 0)
	if v := verdictOf(t, runs); v != "PASS" {
		t.Errorf("verdict %s, want PASS", v)
	}
	sum, err := os.ReadFile(summary)
	if err != nil || !regexp.MustCompile(`VERDICT: PASS`).Match(sum) {
		t.Errorf("$GITHUB_STEP_SUMMARY: want the run's Markdown summary appended (%v):\n%s", err, sum)
	}
}
