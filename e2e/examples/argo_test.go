package examples_test

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/expr-lang/expr"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/internal/promtest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// argoTopology is the lab of the Argo Rollouts gate: an Istio canary of
// callme-service with Argo's host-level traffic splitting
// (testdata/argo-istio/: the VirtualService at the 25% step).
const argoTopology = "testdata/argo-istio"

// The ReplicaSets' rollouts-pod-template-hash in testdata/argo-istio.
const (
	argoStableHash = "6b8d5c7f9d"
	argoCanaryHash = "5f7b9c6d48"
)

// The Argo scenario's step-weight expectations: from the VirtualService
// and from the Rollout's status.canary.weights.
const (
	argoStep     = "the step weight Argo set"
	argoRecorded = "the weights Argo recorded"
)

// argoLab is the package's Argo lab, shared by the Argo tests.
func argoLab(t *testing.T) *lab.Lab { t.Helper(); return sharedLab(t, argoTopology) }

// argoAnalysis is one AnalysisTemplate metric of the example.
type argoAnalysis struct {
	template string
	metric   any
}

// argoTemplates reads analysis-template.yaml: the Job metric and the
// Prometheus verdict metric, each the only metric of its template.
func argoTemplates(t *testing.T, dir string) (job, verdict argoAnalysis) {
	t.Helper()
	for _, d := range readDocs(t, filepath.Join(dir, "analysis-template.yaml")) {
		metrics, _ := dig(d, "spec", "metrics").([]any)
		if len(metrics) != 1 {
			t.Fatalf("analysis-template.yaml: AnalysisTemplate %s has %d metrics, want one", str(d, "metadata", "name"), len(metrics))
		}
		a := argoAnalysis{template: str(d, "metadata", "name"), metric: metrics[0]}
		switch {
		case dig(a.metric, "provider", "job") != nil:
			job = a
		case dig(a.metric, "provider", "prometheus") != nil:
			verdict = a
		}
	}
	if job.metric == nil || verdict.metric == nil {
		t.Fatalf("analysis-template.yaml: want a Job metric and a Prometheus metric")
	}
	return job, verdict
}

// argoArgs resolves a Rollout analysis step's args as Argo's
// BuildArgumentsForRolloutAnalysisRun does (utils/analysis/factory.go):
// podTemplateHashValue Latest is the new ReplicaSet's hash (here
// status.currentPodHash, which the stand-in controller sets: no
// ReplicaSet exists), a fieldRef is read from the Rollout as JSON by its
// path, split at dots and brackets.
func argoArgs(t *testing.T, step any, rollout map[string]any) map[string]string {
	t.Helper()
	out := map[string]string{}
	args, _ := dig(step, "analysis", "args").([]any)
	for _, a := range args {
		name := str(a, "name")
		switch {
		case str(a, "valueFrom", "podTemplateHashValue") == "Latest":
			out[name] = str(rollout, "status", "currentPodHash")
		case str(a, "valueFrom", "fieldRef", "fieldPath") != "":
			var v any = rollout
			for _, sec := range regexp.MustCompile(`[.\[\]]+`).Split(str(a, "valueFrom", "fieldRef", "fieldPath"), -1) {
				if sec != "" {
					v = dig(v, sec)
				}
			}
			if v == nil {
				t.Fatalf("analysis arg %s: the Rollout has no %s", name, str(a, "valueFrom", "fieldRef", "fieldPath"))
			}
			out[name] = fmt.Sprint(v)
		default:
			out[name] = str(a, "value")
		}
	}
	return out
}

// resolveArgs replaces {{args.NAME}} as Argo's templateutil does.
func resolveArgs(t *testing.T, s string, args map[string]string) string {
	t.Helper()
	out := regexp.MustCompile(`\{\{\s*args\.([^}\s]+)\s*\}\}`).ReplaceAllStringFunc(s, func(m string) string {
		name := regexp.MustCompile(`args\.([^}\s]+)`).FindStringSubmatch(m)[1]
		v, ok := args[name]
		if !ok {
			t.Fatalf("%s: no argument %s (have %v)", m, name, args)
		}
		return v
	})
	return out
}

// argoPhase evaluates a metric's conditions on a measurement's result as
// Argo's EvaluateResult does (utils/evaluate/evaluate.go, with the
// expression library it uses, github.com/expr-lang/expr; of the names
// its environment gives conditions, result, isNaN and isInf): both set
// and neither true is Inconclusive; a condition that does not evaluate is
// an Error.
func argoPhase(result any, success, failure string) (string, error) {
	eval := func(cond string) (bool, error) {
		env := map[string]any{
			"result": result,
			"isNaN":  math.IsNaN,
			"isInf":  func(f float64) bool { return math.IsInf(f, 0) },
		}
		p, err := expr.Compile(cond, expr.Env(env))
		if err != nil {
			return false, err
		}
		out, err := expr.Run(p, env)
		if err != nil {
			return false, err
		}
		b, ok := out.(bool)
		if !ok {
			return false, fmt.Errorf("expected bool, but got %T", out)
		}
		return b, nil
	}
	var ok, bad bool
	var err error
	if success != "" {
		if ok, err = eval(success); err != nil {
			return "Error", fmt.Errorf("successCondition %q: %w", success, err)
		}
	}
	if failure != "" {
		if bad, err = eval(failure); err != nil {
			return "Error", fmt.Errorf("failureCondition %q: %w", failure, err)
		}
	}
	switch {
	case success == "" && failure == "":
		return "Successful", nil
	case failure == "":
		bad = !ok
	case success == "":
		ok = !bad
	}
	switch {
	case bad:
		return "Failed", nil
	case !ok:
		return "Inconclusive", nil
	}
	return "Successful", nil
}

// TestArgoPhase pins argoPhase to Argo's outcomes for the verdict
// metric's conditions (utils/evaluate/evaluate_test.go's cases for both
// conditions set): an empty vector (no run wrote a verdict) meets neither.
func TestArgoPhase(t *testing.T) {
	t.Parallel()
	const ok, bad = "len(result) == 1 && result[0] == 1", "len(result) == 1 && result[0] == -1"
	for _, c := range []struct {
		result []float64
		want   string
	}{
		{[]float64{1}, "Successful"},
		{[]float64{-1}, "Failed"},
		{[]float64{0}, "Inconclusive"},
		{[]float64{}, "Inconclusive"},
		{[]float64{1, 1}, "Inconclusive"},
	} {
		if got, err := argoPhase(c.result, ok, bad); err != nil || got != c.want {
			t.Errorf("result %v: %s (%v), want %s", c.result, got, err, c.want)
		}
	}
	if got, err := argoPhase([]float64{}, "result[0] == 1", ""); err == nil || got != "Error" {
		t.Errorf("result[0] of an empty result: %s (%v), want an Error", got, err)
	}
}

// TestArgoRolloutsGate runs the example's two analyses of a canary step
// as Argo would against the Argo lab (testdata/argo-istio/: Istio
// sidecars, Argo's stableService/canaryService and the VirtualService it
// patches): the Job's container (runJob's substitutions, and its
// --remote-write URL by a real Prometheus the test starts), then the
// verdict metric's PromQL against that Prometheus, its conditions
// evaluated as Argo's evaluate package does. The scenario's two step
// expectations read the VirtualService and the Rollout's recorded
// weights: a correct step PASSes (Successful) naming the weight and each
// object's resourceVersion, INCONCLUSIVE is Inconclusive, and a step the
// frozen data plane does not follow, or a VirtualService reverted behind
// Argo's back, FAILs (Failed).
//
// The Argo Rollouts controller cannot run here (no ReplicaSets, no
// kubelet for its pods): a stand-in in the test moves each step as Argo's
// Istio traffic routing does, the VirtualService's route weights first,
// then the Rollout's status.canary.weights (rollout/trafficrouting.go),
// and resolves the analysis steps' args from the Rollout as Argo does.
// The lab's apps play the two ReplicaSets.
func TestArgoRolloutsGate(t *testing.T) {
	dir := filepath.Join(examplesDir(), "argo-rollouts")
	job, verdict := argoTemplates(t, dir)
	if fl, ok := dig(job.metric, "failureLimit").(int); !ok || fl != 0 {
		t.Errorf("%s: failureLimit %v: want 0, so one failed Job fails the analysis", job.template, dig(job.metric, "failureLimit"))
	}
	success, failure := str(verdict.metric, "successCondition"), str(verdict.metric, "failureCondition")
	if success == "" || failure == "" {
		t.Fatalf("%s: successCondition %q, failureCondition %q: both are needed for Inconclusive", verdict.template, success, failure)
	}
	// The Rollout's steps: setWeight, then the Job in dry run, then the
	// verdict, with the same args.
	var rolloutDoc any
	for _, d := range readDocs(t, filepath.Join(dir, "rollout.yaml")) {
		if str(d, "kind") == "Rollout" {
			rolloutDoc = d
		}
	}
	steps, _ := dig(rolloutDoc, "spec", "strategy", "canary", "steps").([]any)
	var jobStep, verdictStep any
	var weights []int
	for i, s := range steps {
		if w, ok := dig(s, "setWeight").(int); ok {
			weights = append(weights, w)
		}
		switch str(s, "analysis", "templates", "0", "templateName") {
		case job.template:
			jobStep = s
			if str(s, "analysis", "dryRun", "0", "metricName") != str(job.metric, "name") {
				t.Errorf("rollout.yaml step %d: the Job's metric is not in dry run: its exit 2 would abort before the verdict step", i)
			}
			if i+1 >= len(steps) || str(steps[i+1], "analysis", "templates", "0", "templateName") != verdict.template {
				t.Errorf("rollout.yaml step %d: the Job's analysis is not followed by the verdict's (%s)", i, verdict.template)
			}
		case verdict.template:
			verdictStep = s
		}
	}
	if jobStep == nil || verdictStep == nil || len(weights) < 2 {
		t.Fatalf("rollout.yaml: want setWeight steps each followed by the analyses %s and %s", job.template, verdict.template)
	}
	jc := readJob(t, dig(job.metric, "provider", "job", "spec"), filepath.Join(dir, "scenario.yaml"))
	const exampleWrite = "http://prometheus.monitoring.svc:9090/api/v1/write"
	if !strings.Contains(strings.Join(jc.args, " "), "--remote-write "+exampleWrite) {
		t.Fatalf("the Job's args have no --remote-write %s any more; update the test: %q", exampleWrite, jc.args)
	}
	if addr := str(verdict.metric, "provider", "prometheus", "address"); addr+"/api/v1/write" != exampleWrite {
		t.Errorf("%s queries %s, but the Job writes to %s", verdict.template, addr, exampleWrite)
	}

	l := argoLab(t)
	installCRDs(t, func(stdin []byte, args ...string) (string, error) {
		return e2etest.KubectlErr(t, l, stdin, "c1", args...)
	},
		filepath.Join("testdata", "crds", "argo-rollouts-rollout-crd.yaml"),
		filepath.Join("testdata", "crds", "argo-rollouts-analysis-template-crd.yaml"),
		filepath.Join("testdata", "crds", "argo-rollouts-analysis-run-crd.yaml"))
	e2etest.Kubectl(t, l, "c1", "apply", "-f", filepath.Join(dir, "rollout.yaml"), "-f", filepath.Join(dir, "analysis-template.yaml"))
	// The lab's VirtualService is the example's, its route at a step.
	exampleVS := readDocs(t, filepath.Join(dir, "istio.yaml"))
	for _, d := range exampleVS {
		if str(d, "kind") == "VirtualService" {
			route := e2etest.Kubectl(t, l, "c1", "get", "virtualservice", "-n", "callme", str(d, "metadata", "name"),
				"-o", "jsonpath={.spec.http[0].name} {.spec.http[0].route[*].destination.host}")
			want := str(d, "spec", "http", "0", "name") + " " + str(d, "spec", "http", "0", "route", "0", "destination", "host") + " " + str(d, "spec", "http", "0", "route", "1", "destination", "host")
			if route != want {
				t.Fatalf("the lab's VirtualService routes %q, the example's %q", route, want)
			}
		}
	}

	// The stand-in controller's step: the VirtualService's weights as
	// Argo's Istio reconciler sets them (canaryService w, stableService
	// 100-w), then status.canary.weights.
	setStep := func(w int) {
		e2etest.Kubectl(t, l, "c1", "patch", "virtualservice", "-n", "callme", "callme-service", "--type", "json", "-p",
			fmt.Sprintf(`[{"op":"replace","path":"/spec/http/0/route/0/weight","value":%d},{"op":"replace","path":"/spec/http/0/route/1/weight","value":%d}]`, 100-w, w))
		status := map[string]any{"status": map[string]any{
			"currentPodHash": argoCanaryHash, "stableRS": argoStableHash, "phase": "Paused",
			"canary": map[string]any{"weights": map[string]any{
				"canary": map[string]any{"weight": w, "podTemplateHash": argoCanaryHash, "serviceName": "callme-service-canary"},
				"stable": map[string]any{"weight": 100 - w, "podTemplateHash": argoStableHash, "serviceName": "callme-service-stable"},
			}},
		}}
		p, _ := json.Marshal(status)
		e2etest.Kubectl(t, l, "c1", "patch", "rollout", "-n", "callme", "callme-service", "--subresource", "status", "--type", "merge", "-p", string(p))
	}
	freeze := func(on bool) {
		v := daemon.FreezeAnnotation + "-"
		if on {
			v = daemon.FreezeAnnotation + "=true"
		}
		e2etest.Kubectl(t, l, "c1", "annotate", "--overwrite", "virtualservice", "-n", "callme", "callme-service", v)
	}
	t.Cleanup(func() { setStep(25) }) // the lab is shared: back to its 25% step

	prom := promtest.Start(t, "")
	// gate runs the step's two analyses: the Job (its exit code, which the
	// dry run records), then the verdict metric's query and conditions.
	gate := func(t *testing.T, scenario string) (code int, phase string, runs string) {
		t.Helper()
		var ro map[string]any
		if err := json.Unmarshal([]byte(e2etest.Kubectl(t, l, "c1", "get", "rollout", "-n", "callme", "callme-service", "-o", "json")), &ro); err != nil {
			t.Fatal(err)
		}
		args := argoArgs(t, jobStep, ro)
		if va := argoArgs(t, verdictStep, ro); fmt.Sprint(va) != fmt.Sprint(args) {
			t.Fatalf("the steps' args differ: %v and %v", args, va)
		}
		subst := map[string]string{exampleWrite: prom.WriteURL()}
		for _, a := range jc.args {
			if strings.Contains(a, "{{") {
				subst[a] = resolveArgs(t, a, args)
			}
		}
		r, runs := runJob(t, l, jc, scenario, nil, subst)
		if !strings.Contains(r.Stderr, "wrote metrics to "+prom.WriteURL()) {
			t.Errorf("the run did not write its verdict to Prometheus:\n%s", r.Stderr)
		}
		query := resolveArgs(t, str(verdict.metric, "provider", "prometheus", "query"), args)
		samples := prom.Eventually(t, query, 15*time.Second, func(s []promtest.Sample) bool { return len(s) > 0 })
		// Argo's Prometheus provider gives a vector's values as []float64.
		result := make([]float64, len(samples))
		for i, s := range samples {
			result[i] = s.Value
		}
		phase, err := argoPhase(result, success, failure)
		if err != nil {
			t.Fatalf("%s on %v: %v", verdict.template, result, err)
		}
		t.Logf("step %v: exit %d, query %v: %s", args, r.Code, result, phase)
		if r.Code != 0 {
			t.Logf("the Job's log:\n%s\n%s", r.Stdout, r.Stderr)
		}
		return r.Code, phase, runs
	}
	// checkStep checks an expectation of the last run: its verdict, the
	// expected shares at v2 weight%, and the object it names.
	checkStep := func(t *testing.T, runs, name string, weight int, verdict, kind string) {
		t.Helper()
		e := stepExpectation(t, runs, name)
		// "!FAIL": the verdict may be PASS or INCONCLUSIVE (a 100/0 split's
		// empty bucket is not always settled by one run).
		wrong := e.Verdict != verdict
		if v, ok := strings.CutPrefix(verdict, "!"); ok {
			wrong = e.Verdict == v
		}
		if wrong || !near(e.Model.Shares["v2"], float64(weight)/100) || !near(e.Model.Shares["v1"], float64(100-weight)/100) {
			t.Errorf("%s: %s with expected shares %v, want %s at v2 %d%%", name, e.Verdict, e.Model.Shares, verdict, weight)
		}
		rv := e2etest.Kubectl(t, l, "c1", "get", kind, "-n", "callme", "callme-service", "-o", "jsonpath={.metadata.resourceVersion}")
		if src := strings.Join(e.Model.Explanation, "\n"); !strings.Contains(src, " callme/callme-service in cluster local (resourceVersion "+rv+")") {
			t.Errorf("%s does not name the %s at resourceVersion %s:\n%s", name, kind, rv, src)
		}
	}

	setStep(weights[0])
	t.Run("a correct step passes", func(t *testing.T) {
		code, phase, runs := gate(t, jc.scenario)
		if code != 0 || phase != "Successful" {
			t.Errorf("exit %d, verdict metric %s: want 0 and Successful", code, phase)
		}
		checkStep(t, runs, argoStep, weights[0], "PASS", "virtualservice")
		checkStep(t, runs, argoRecorded, weights[0], "PASS", "rollout")
	})
	// The Job alone would fail on exit 2 like a FAIL; the verdict metric
	// carries it to Argo's Inconclusive (the Rollout pauses).
	t.Run("inconclusive is Argo's Inconclusive", func(t *testing.T) {
		code, phase, runs := gate(t, jc.scenario+undecidable)
		if code != 2 || phase != "Inconclusive" {
			t.Errorf("exit %d, verdict metric %s: want 2 and Inconclusive", code, phase)
		}
		if v := verdictOf(t, runs); v != "INCONCLUSIVE" {
			t.Errorf("verdict %s, want INCONCLUSIVE", v)
		}
	})
	// A broken step: Argo moves the VirtualService to the next weight but
	// the caller's sidecar keeps the last one (the lab's fault switch).
	t.Run("a step the data plane does not follow fails", func(t *testing.T) {
		freeze(true)
		defer freeze(false)
		setStep(weights[1])
		code, phase, runs := gate(t, jc.scenario)
		if code != 1 || phase != "Failed" {
			t.Errorf("exit %d, verdict metric %s: want 1 and Failed", code, phase)
		}
		checkStep(t, runs, argoStep, weights[1], "FAIL", "virtualservice")
		checkStep(t, runs, argoRecorded, weights[1], "FAIL", "rollout")
	})
	t.Run("the next step passes, the gate unchanged", func(t *testing.T) {
		setStep(weights[1])
		code, phase, runs := gate(t, jc.scenario)
		if code != 0 || phase != "Successful" {
			t.Errorf("exit %d, verdict metric %s: want 0 and Successful", code, phase)
		}
		checkStep(t, runs, argoStep, weights[1], "PASS", "virtualservice")
		checkStep(t, runs, argoRecorded, weights[1], "PASS", "rollout")
	})
	// The route reverted behind Argo's back (a GitOps sync of the
	// VirtualService's manifest, weights 100/0): the sidecars follow the
	// VirtualService, so the expectation that reads it does not fail; the
	// one that reads the weights Argo recorded FAILs the step.
	t.Run("a route reverted behind Argo's back fails", func(t *testing.T) {
		setStep(weights[1])
		e2etest.Kubectl(t, l, "c1", "patch", "virtualservice", "-n", "callme", "callme-service", "--type", "json", "-p",
			`[{"op":"replace","path":"/spec/http/0/route/0/weight","value":100},{"op":"replace","path":"/spec/http/0/route/1/weight","value":0}]`)
		code, phase, runs := gate(t, jc.scenario)
		if code != 1 || phase != "Failed" {
			t.Errorf("exit %d, verdict metric %s: want 1 and Failed", code, phase)
		}
		checkStep(t, runs, argoStep, 0, "!FAIL", "virtualservice")
		checkStep(t, runs, argoRecorded, weights[1], "FAIL", "rollout")
	})
}
