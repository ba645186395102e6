// Package kubeaccess_test runs the built binary against one lab (topology
// cilium-c2: caller-service in c1 calls callme-service, served in c2) to
// show that kubectl's connection flags change what a run reaches
// (README.md "Connecting to clusters"): --context per cluster, -n, exec
// credential plugins with --exec-timeout, and the in-cluster config of a
// pod.
package kubeaccess_test

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/reports"
)

// binary is the mesh-verify under test, built by TestMain.
var binary = new(e2etest.Binary)

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, binary, nil)) }

// kubeLab is the package's one lab (topology cilium-c2; kubeconfig with
// contexts kind-c1, kind-c2), shared by its tests.
func kubeLab(t *testing.T) *lab.Lab {
	t.Helper()
	return binary.SharedLab(t, e2etest.LabSpec{Topology: "cilium-c2"})
}

func kubeconfig(t *testing.T) string { return kubeLab(t).Kubeconfig }

// mv runs the binary with env added to a clean environment (no
// KUBECONFIG from the caller).
func mv(t *testing.T, env []string, args ...string) e2etest.Result {
	t.Helper()
	return runCmd(t, env, binary.Path, args...)
}

func runCmd(t *testing.T, env []string, name string, args ...string) e2etest.Result {
	t.Helper()
	c := e2etest.Cmd{Timeout: 3 * time.Minute, CleanEnv: true,
		Env: append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...),
		// A hung exec plugin that client-go started may outlive the binary
		// holding its stderr: do not wait for it (the test kills it).
		WaitDelay: 2 * time.Second}
	if b := os.Getenv("MESH_VERIFY_LAB_BIN"); b != "" {
		c.Env = append(c.Env, "MESH_VERIFY_LAB_BIN="+b)
	}
	return c.Exec(t, name, args...)
}

// scenario is the catalog's cilium-c2 check, shortened, with the
// clusters' contexts and the observe namespace as given ("" leaves it
// unset).
func scenario(t *testing.T, ctx1, ctx2, observeNS string) string {
	t.Helper()
	ns := ""
	if observeNS != "" {
		ns = "\n    namespace: " + observeNS
	}
	text := fmt.Sprintf(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: kubeaccess}
clusters:
  - {name: c1, context: %s}
  - {name: c2, context: %s}
target:
  portForward: {cluster: c1, namespace: default, resource: svc/caller-service, port: "8080"}
  path: /caller/ping
attack: {concurrency: 4, repetitions: 40, keepAlive: false}
observe:
  - name: callme
    selector: app=callme-service%s
    clusters: [c1, c2]
    logs: {preset: spring-callme}
expect:
  - successRate: {atLeast: 90%%}
  - reached: {buckets: [c2]}
`, ctx1, ctx2, ns)
	p := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// readReport is the one report.json of a run written to out (checked
// against the schema).
func readReport(t *testing.T, out string) *reports.Report {
	t.Helper()
	found := e2etest.ReadReports(t, out)
	if len(found) != 1 {
		t.Fatalf("want one report.json under %s, found %d", out, len(found))
	}
	for _, r := range found {
		return r
	}
	return nil
}

// TestContextOverride: a scenario whose contexts are wrong fails as a
// setup error; --context CLUSTER=CONTEXT makes the same file pass.
func TestContextOverride(t *testing.T) {
	sc := scenario(t, "kind-wrong", "kind-c2", "")
	out := t.TempDir()
	r := mv(t, nil, "run", sc, "--kubeconfig", kubeconfig(t), "--out", out, "-q")
	if r.Code != 3 || !strings.Contains(r.Stderr, "context kind-wrong not found") {
		t.Fatalf("without --context: exit %d, want 3 naming the context\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	out = t.TempDir()
	r = mv(t, nil, "run", sc, "--kubeconfig", kubeconfig(t), "--context", "c1=kind-c1", "--out", out, "-q", "--token", "not-a-secret-but-hidden")
	// --token replaces the admin's client certificate as kubectl does: the
	// API server authenticates the certificate first, so it still passes.
	if r.Code != 0 {
		t.Fatalf("with --context c1=kind-c1: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	rep := readReport(t, out)
	if got := rep.Kubernetes.Clusters; len(got) != 2 || got[0].Context != "kind-c1" {
		t.Errorf("report clusters %+v, want c1 through kind-c1", got)
	}
	cmd := strings.Join(rep.Command, " ")
	if !strings.Contains(cmd, "--context c1=kind-c1") || strings.Contains(cmd, "not-a-secret-but-hidden") || !strings.Contains(cmd, "--token REDACTED") {
		t.Errorf("report command %q: want the --context and the token redacted", cmd)
	}
	if strings.Contains(r.Stdout+r.Stderr, "not-a-secret-but-hidden") {
		t.Errorf("output shows the token")
	}
}

// TestNamespaceOverride: -n replaces the namespace the scenario leaves
// unset (observe), not the one it names (the target's default).
func TestNamespaceOverride(t *testing.T) {
	e2etest.Kubectl(t, kubeLab(t), "c1", "create", "namespace", "kubeaccess-empty")
	e2etest.Kubectl(t, kubeLab(t), "c2", "create", "namespace", "kubeaccess-empty")
	sc := scenario(t, "kind-c1", "kind-c2", "")
	out := t.TempDir()
	r := mv(t, nil, "run", sc, "--kubeconfig", kubeconfig(t), "--out", out, "-q", "-n", "kubeaccess-empty")
	// The observed workload is looked for in the empty namespace: no pods,
	// no log lines, so the split cannot be judged.
	if r.Code == 0 {
		t.Fatalf("-n kubeaccess-empty: exit 0, want a run that sees no pods\n%s%s", r.Stdout, r.Stderr)
	}
	var inv struct {
		Workloads []struct{ Namespace string } `json:"workloads"`
		Clusters  []struct{ Pods []any }       `json:"clusters"`
	}
	b, err := json.Marshal(readReport(t, out).Kubernetes.Inventory)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &inv); err != nil {
		t.Fatal(err)
	}
	if len(inv.Workloads) != 1 || inv.Workloads[0].Namespace != "kubeaccess-empty" || len(inv.Clusters) != 2 || len(inv.Clusters[0].Pods)+len(inv.Clusters[1].Pods) != 0 {
		t.Errorf("inventory %+v: want the workload in kubeaccess-empty with no pods", inv)
	}
	// A namespace that does not exist is a setup error naming it.
	r = mv(t, nil, "run", sc, "--kubeconfig", kubeconfig(t), "--out", t.TempDir(), "-q", "-n", "kubeaccess-missing")
	if r.Code != 3 || !strings.Contains(r.Stderr, "kubeaccess-missing") {
		t.Errorf("-n kubeaccess-missing: exit %d, want 3 naming the namespace\n%s", r.Code, r.Stderr)
	}
	// A -n that every namespace the scenario names would override is not
	// silently ignored: refused before the run, naming the fields.
	sc = scenario(t, "kind-c1", "kind-c2", "default")
	if r := mv(t, nil, "run", sc, "--kubeconfig", kubeconfig(t), "--out", t.TempDir(), "-q", "-n", "kubeaccess-empty"); r.Code != 4 ||
		!strings.Contains(r.Stderr, "target.portForward.namespace is default; observe[0].namespace is default") {
		t.Fatalf("every namespace named, -n given: exit %d, want 4 naming the fields\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
}

// execKubeconfig is the lab's kubeconfig with each cluster's user
// replaced by an exec plugin: script, run with the cluster's admin
// certificate file as $CRED.
func execKubeconfig(t *testing.T, script string) (path, pids string) {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	pids = filepath.Join(dir, "pids")
	plugin := filepath.Join(dir, "credential-plugin.sh")
	if err := os.WriteFile(plugin, []byte("#!/bin/sh\necho $$ >> "+pids+"\n"+script+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, ai := range cfg.AuthInfos {
		cert, err := os.ReadFile(ai.ClientCertificate)
		if err != nil {
			t.Fatal(err)
		}
		key, err := os.ReadFile(ai.ClientKey)
		if err != nil {
			t.Fatal(err)
		}
		cred, _ := json.Marshal(map[string]any{"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
			"status": map[string]string{"clientCertificateData": string(cert), "clientKeyData": string(key)}})
		credFile := filepath.Join(dir, name+".json")
		if err := os.WriteFile(credFile, cred, 0o600); err != nil {
			t.Fatal(err)
		}
		ai.ClientCertificate, ai.ClientKey = "", ""
		ai.Exec = &clientcmdapi.ExecConfig{Command: plugin, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: clientcmdapi.NeverExecInteractiveMode,
			Env: []clientcmdapi.ExecEnvVar{{Name: "CRED", Value: credFile}}}
	}
	path = filepath.Join(dir, "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path, pids
}

// killPids kills the plugin processes listed, should one outlive the
// binary (the hang test fails then).
func killPids(file string) {
	b, _ := os.ReadFile(file)
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid > 1 {
			if p, err := os.FindProcess(pid); err == nil {
				_ = p.Kill()
			}
		}
	}
}

// TestExecPlugin: a plugin that takes 7 s (longer than the 5 s probe)
// works; one that hangs is reported as the plugin within --exec-timeout.
func TestExecPlugin(t *testing.T) {
	t.Run("slow", func(t *testing.T) {
		kc, pids := execKubeconfig(t, `sleep 7; cat "$CRED"`)
		t.Cleanup(func() { killPids(pids) })
		out := t.TempDir()
		r := mv(t, nil, "run", scenario(t, "kind-c1", "kind-c2", ""), "--kubeconfig", kc, "--out", out, "-q")
		if r.Code != 0 || r.Took < 7*time.Second {
			t.Fatalf("exit %d after %v, want 0 after at least 7s\n%s%s", r.Code, r.Took, r.Stdout, r.Stderr)
		}
		t.Logf("slow plugin: exit 0 after %v", r.Took)
	})
	t.Run("hangs", func(t *testing.T) {
		kc, pids := execKubeconfig(t, `exec sleep 300`)
		t.Cleanup(func() { killPids(pids) })
		out := t.TempDir()
		r := mv(t, nil, "run", scenario(t, "kind-c1", "kind-c2", ""), "--kubeconfig", kc, "--out", out, "-q", "--exec-timeout", "3s")
		if r.Code != 3 || r.Took > 15*time.Second {
			t.Fatalf("exit %d after %v, want 3 within the exec timeout\n%s%s", r.Code, r.Took, r.Stdout, r.Stderr)
		}
		for _, w := range []string{"credential-plugin.sh", "kubeconfig user kwok-c1", "gave no credentials within 3s (--exec-timeout)"} {
			if !strings.Contains(r.Stderr, w) {
				t.Errorf("stderr lacks %q:\n%s", w, r.Stderr)
			}
		}
		b, _ := os.ReadFile(pids)
		for _, f := range strings.Fields(string(b)) {
			if pid, _ := strconv.Atoi(f); pid > 1 && syscall.Kill(pid, 0) == nil {
				t.Errorf("the hung plugin (pid %d) still runs after mesh-verify ended", pid)
			}
		}
		if strings.Contains(r.Stderr, "unreachable") {
			t.Errorf("a hung plugin reported as an unreachable API server:\n%s", r.Stderr)
		}
		t.Logf("hung plugin: exit 3 after %v", r.Took)
	})
}

// TestInCluster runs the binary as in a pod: a private mount namespace
// with a ServiceAccount's files at /var/run/secrets/kubernetes.io/
// serviceaccount (a tmpfs over /run), KUBERNETES_SERVICE_HOST/PORT at the
// lab's c1 API server, a real token of a ServiceAccount bound to
// cluster-admin, no kubeconfig and an empty HOME.
func TestInCluster(t *testing.T) {
	if out, err := exec.Command("unshare", "-m", "true").CombinedOutput(); err != nil {
		t.Skipf("unshare -m is not permitted here (%v: %s): the in-cluster test needs a private mount namespace to place the ServiceAccount files at their fixed path", err, out)
	}
	e2etest.Kubectl(t, kubeLab(t), "c1", "-n", "default", "create", "serviceaccount", "kubeaccess")
	e2etest.Kubectl(t, kubeLab(t), "c1", "create", "clusterrolebinding", "kubeaccess", "--clusterrole", "cluster-admin", "--serviceaccount", "default:kubeaccess")
	token := strings.TrimSpace(e2etest.Kubectl(t, kubeLab(t), "c1", "-n", "default", "create", "token", "kubeaccess", "--duration", "1h"))
	cfg, err := clientcmd.LoadFromFile(kubeconfig(t))
	if err != nil {
		t.Fatal(err)
	}
	cl := cfg.Clusters[cfg.Contexts["kind-c1"].Cluster]
	ca, err := os.ReadFile(cl.CertificateAuthority)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(cl.Server)
	if err != nil {
		t.Fatal(err)
	}
	sa := t.TempDir()
	for name, data := range map[string]string{"token": token, "ca.crt": string(ca), "namespace": "default"} {
		if err := os.WriteFile(filepath.Join(sa, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// One cluster, so the in-cluster config serves it whatever context the
	// file names; the body names the version, not the cluster.
	sc := filepath.Join(t.TempDir(), "in-cluster.yaml")
	if err := os.WriteFile(sc, []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: in-cluster}
clusters: [{name: c1, context: kind-c1}]
target:
  portForward: {cluster: c1, resource: svc/caller-service, port: "8080"}
  path: /caller/ping
attack: {concurrency: 2, repetitions: 20, keepAlive: false}
attribution:
  rules: [{body: "callme-service (?P<version>v[0-9]+)"}]
expect:
  - successRate: {atLeast: 90%}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	const mountSA = `set -e
mount -t tmpfs tmpfs /run
mkdir -p /run/secrets/kubernetes.io/serviceaccount
cp "$SA"/token "$SA"/ca.crt "$SA"/namespace /run/secrets/kubernetes.io/serviceaccount/
exec "$@"`
	env := []string{"SA=" + sa, "KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port()}
	out := t.TempDir()
	r := runCmd(t, env, "unshare", "-m", "sh", "-c", mountSA, "sh", binary.Path, "run", sc, "--out", out, "-q")
	if r.Code != 0 {
		t.Fatalf("in-cluster run: exit %d\n%s%s", r.Code, r.Stdout, r.Stderr)
	}
	rep := readReport(t, out)
	if got := rep.Kubernetes.Clusters; len(got) != 1 || got[0].Context != "in-cluster" || got[0].Server != cl.Server {
		t.Errorf("report clusters %+v, want c1 in-cluster at %s", got, cl.Server)
	}
	// A context named on the command line is not silently replaced.
	r = runCmd(t, env, "unshare", "-m", "sh", "-c", mountSA, "sh", binary.Path, "run", sc, "--out", t.TempDir(), "-q", "--context", "kind-c1")
	if r.Code != 3 || !strings.Contains(r.Stderr, "context kind-c1 not found: no kubeconfig") || !strings.Contains(r.Stderr, "running in a pod") {
		t.Errorf("in-cluster with --context: exit %d, want 3 explaining in-cluster\n%s", r.Code, r.Stderr)
	}
}
