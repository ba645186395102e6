// Package rbac_test runs the built mesh-verify against the lab's real
// kube-apiservers (authorization mode Node,RBAC) as a ServiceAccount bound
// by exactly what `mesh-verify rbac SCENARIO` generates: the run passes,
// every request it made is in the API server's own audit log and granted
// by that manifest, and with one permission taken away the run is a setup
// error (exit 3) naming the verb and resource (README.md, RBAC).
package rbac_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/lab"
)

// binary is the mesh-verify under test, built by TestMain.
var binary = new(e2etest.Binary)

func TestMain(m *testing.M) { os.Exit(e2etest.Main(m, binary, nil)) }

const (
	serviceAccount = "mesh-verify"
	saNamespace    = "default"
	saUser         = "system:serviceaccount:" + saNamespace + ":" + serviceAccount
)

// scenario runs on the istio-mirror topology: a port-forward to the
// caller's Service in c1 (the tunnel), callme v1's log in c1 (logs) and
// callme v2's sidecar counter in c2 through a port-forward (metrics), both
// inventoried. One second of load: the verdicts are not what is tested.
// Each request opens its own connection, so 100 requests all to v1 are
// 100 draws, not one per keep-alive connection (docs/statistics.md §3.3).
const scenario = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata:
  name: rbac-e2e
clusters:
  - {name: c1, context: kind-c1}
  - {name: c2, context: kind-c2}
target:
  portForward: {cluster: c1, namespace: default, resource: svc/caller-service, port: "8080"}
  path: /caller/ping
attack:
  rate: 100/s
  duration: 1s
  keepAlive: false
attribution:
  preset: tutorial
observe:
  - name: callme-v1
    selector: app=callme-service,version=v1
    clusters: [c1]
    logs: {preset: spring-callme, background: 0s, settle: 1s}
  - name: callme-v2
    selector: app=callme-service,version=v2
    clusters: [c2]
    metrics: {port: "15090", path: /stats/prometheus, counter: istio_requests_total, labels: {reporter: destination}, via: portForward}
expect:
  - only: {by: version, buckets: [v1]}
  - successRate: {atLeast: 90%}
`

// auditPolicy records, at Metadata level, the requests of the
// ServiceAccount only: what the run made, not the lab's own traffic.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: ["` + saUser + `"]
  - level: None
`

var clusters = []string{"c1", "c2"}

type env struct {
	lab        *lab.Lab
	kubeconfig string // the lab's, admin
	saConfig   string // the ServiceAccount's tokens
	scenario   string
	manifest   []byte
	work       string
}

func (e *env) kubectl(t *testing.T, stdin []byte, cluster string, args ...string) (string, error) {
	t.Helper()
	return e2etest.KubectlErr(t, e.lab, stdin, cluster, args...)
}

func (e *env) mustKubectl(t *testing.T, stdin []byte, cluster string, args ...string) string {
	t.Helper()
	out, err := e.kubectl(t, stdin, cluster, args...)
	if err != nil {
		t.Fatalf("kubectl %s (%s): %v: %s", strings.Join(args, " "), cluster, err, out)
	}
	return out
}

// labUp brings the lab up with the binary under test, the API servers
// auditing the ServiceAccount: kwokctl reads KWOK_KUBE_AUDIT_POLICY, the
// environment form of its --kube-audit-policy flag, and writes the log to
// the cluster's logs/audit.log.
func labUp(t *testing.T) *env {
	t.Helper()
	work := t.TempDir()
	policy := filepath.Join(work, "audit-policy.yaml")
	if err := os.WriteFile(policy, []byte(auditPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	// Read by kwokctl when Up creates the clusters; a lab of this test's
	// own, since no other test's API servers audit.
	t.Setenv("KWOK_KUBE_AUDIT_POLICY", policy)
	l := binary.Lab(t, e2etest.LabSpec{Topology: "istio-mirror"})
	e := &env{lab: l, kubeconfig: l.Kubeconfig, work: work,
		scenario: filepath.Join(work, "scenario.yaml"), saConfig: filepath.Join(work, "sa.kubeconfig")}
	if err := os.WriteFile(e.scenario, []byte(scenario), 0o644); err != nil {
		t.Fatal(err)
	}
	// The API servers authorize: an unbound ServiceAccount may not list
	// pods (an AlwaysAllow server would say yes).
	for _, c := range clusters {
		out, _ := e.kubectl(t, nil, c, "auth", "can-i", "list", "pods", "-n", "default", "--as", "system:serviceaccount:default:nobody")
		if strings.TrimSpace(out) != "no" {
			t.Fatalf("cluster %s authorizes an unbound ServiceAccount to list pods (%q): the lab's API server does not enforce RBAC", c, out)
		}
	}
	return e
}

// applyGenerated applies exactly `mesh-verify rbac SCENARIO` in every
// cluster and writes a kubeconfig with a token of the ServiceAccount per
// cluster (in the test's directory; ~/.kube is never touched).
func (e *env) applyGenerated(t *testing.T) {
	t.Helper()
	e.manifest = generate(t, e.scenario)
	lab, err := clientcmd.LoadFromFile(e.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	for _, c := range clusters {
		e.mustKubectl(t, e.manifest, c, "apply", "-f", "-")
		token := strings.TrimSpace(e.mustKubectl(t, nil, c, "create", "token", serviceAccount, "-n", saNamespace, "--duration", "1h"))
		ctx := lab.Contexts["kind-"+c]
		if ctx == nil || lab.Clusters[ctx.Cluster] == nil {
			t.Fatalf("the lab's kubeconfig has no context kind-%s", c)
		}
		cfg.Clusters[c] = lab.Clusters[ctx.Cluster]
		cfg.AuthInfos[serviceAccount+"-"+c] = &clientcmdapi.AuthInfo{Token: token}
		cfg.Contexts["kind-"+c] = &clientcmdapi.Context{Cluster: c, AuthInfo: serviceAccount + "-" + c}
	}
	if err := clientcmd.WriteToFile(*cfg, e.saConfig); err != nil {
		t.Fatal(err)
	}
}

// run runs a scenario file as the ServiceAccount.
func (e *env) run(t *testing.T, scenario string) (code int, output string) {
	t.Helper()
	// KUBECONFIG empty: only the file given.
	r := binary.Run(t, e2etest.Cmd{Env: []string{"KUBECONFIG="}}, "run", scenario, "--kubeconfig", e.saConfig, "--out", filepath.Join(e.work, "runs"), "-q")
	return r.Code, r.Stdout + r.Stderr
}

// generate is `mesh-verify rbac ARGS`' manifest.
func generate(t *testing.T, args ...string) []byte {
	t.Helper()
	r := binary.Run(t, e2etest.Cmd{Timeout: time.Minute}, append([]string{"rbac"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("mesh-verify rbac %s: exit %d: %s", strings.Join(args, " "), r.Code, r.Stderr)
	}
	return []byte(r.Stdout)
}

// generatedRole is the Role a manifest has in namespace default.
func generatedRole(t *testing.T, manifest []byte) *rbacv1.Role {
	t.Helper()
	for _, doc := range strings.Split(string(manifest), "\n---\n") {
		var r rbacv1.Role
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatalf("manifest document: %v", err)
		}
		if r.Kind == "Role" && r.Namespace == "default" {
			return &r
		}
	}
	t.Fatalf("the generated manifest has no Role in default:\n%s", manifest)
	return nil
}

// auditEvent is what the test reads of an audit.k8s.io/v1 Event.
type auditEvent struct {
	AuditID    string `json:"auditID"`
	Stage      string `json:"stage"`
	RequestURI string `json:"requestURI"`
	Verb       string `json:"verb"`
	User       struct {
		Username string `json:"username"`
	} `json:"user"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Name        string `json:"name"`
		APIGroup    string `json:"apiGroup"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
	ResponseStatus *struct {
		Code int `json:"code"`
	} `json:"responseStatus"`
	Annotations map[string]string `json:"annotations"`
}

func (e *env) auditLog(c string) string {
	return filepath.Join(e.lab.Dir, "kwok", "clusters", c, "logs", "audit.log")
}

// auditFrom reads the ServiceAccount's requests logged after offset, one
// per audit ID.
func (e *env) auditFrom(t *testing.T, c string, offset int64) []auditEvent {
	t.Helper()
	f, err := os.Open(e.auditLog(c))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	var out []auditEvent
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev auditEvent
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("%s: %v", e.auditLog(c), err)
		}
		if ev.User.Username != saUser || seen[ev.AuditID] {
			continue
		}
		seen[ev.AuditID] = true
		out = append(out, ev)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) auditSize(t *testing.T, c string) int64 {
	t.Helper()
	st, err := os.Stat(e.auditLog(c))
	if err != nil {
		t.Fatalf("audit log of %s: %v (kwokctl did not take the audit policy?)", c, err)
	}
	return st.Size()
}

// applyRole applies manifest in every cluster at once and waits until the
// API server's authorizer says want to verb on resource for the
// ServiceAccount: RBAC changes reach it through an informer.
func (e *env) applyRole(t *testing.T, manifest []byte, verb, resource string, want bool) {
	t.Helper()
	errs := make([]error, len(clusters))
	var wg sync.WaitGroup
	for i, c := range clusters {
		wg.Go(func() { errs[i] = e.applyAndWait(t, c, manifest, verb, resource, want) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
}

func (e *env) applyAndWait(t *testing.T, c string, manifest []byte, verb, resource string, want bool) error {
	if out, err := e.kubectl(t, manifest, c, "apply", "-f", "-"); err != nil {
		return fmt.Errorf("cluster %s: kubectl apply: %v: %s", c, err, out)
	}
	// kubectl reads pods/log as the pod named log: a subresource is a flag.
	args := []string{"auth", "can-i", verb, resource, "-n", "default", "--as", saUser}
	switch res, sub, ok := strings.Cut(resource, "/"); {
	case res == "namespaces":
		args[3] = "namespaces/default" // the Role grants its own namespace by name
	case ok:
		args[3] = res
		args = append(args, "--subresource", sub)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, _ := e.kubectl(t, nil, c, args...)
		// The answer is the last line; kubectl may warn before it.
		lines := strings.Split(strings.TrimSpace(out), "\n")
		answer := strings.TrimSpace(lines[len(lines)-1])
		if (answer == "yes") == want {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster %s: can-i %s %s is still %q", c, verb, resource, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestGeneratedRBAC(t *testing.T) {
	e := labUp(t)
	e.applyGenerated(t)
	role := generatedRole(t, e.manifest)
	// What the scenario's features call; the port-forward dials SPDY over
	// WebSocket (a GET) first, and API servers from 1.35 also check create.
	want := []string{"list pods", "watch pods", "get services", "get pods/portforward", "get pods/log", "get pods", "get namespaces"}

	t.Run("the run passes and every request it made is granted by the manifest", func(t *testing.T) {
		offsets := map[string]int64{}
		for _, c := range clusters {
			offsets[c] = e.auditSize(t, c)
		}
		start := time.Now()
		code, out := e.run(t, e.scenario)
		t.Logf("run as the ServiceAccount: exit %d in %s", code, time.Since(start).Round(time.Millisecond))
		if code != 0 {
			t.Fatalf("run with the generated RBAC: exit %d, want 0:\n%s", code, out)
		}
		e.checkAudit(t, offsets, e.manifest, want)
	})

	// Each case takes one verb of one rule away (a fresh edit of the
	// generated Role in every cluster), runs, and puts the Role back.
	for _, tc := range []struct {
		verb, resource string
		want           []string
	}{
		{"list", "pods", []string{"forbidden to list pods in namespace default", `cannot list resource "pods"`}},
		{"create", "pods/portforward", []string{"forbidden to create pods/portforward", `cannot create resource "pods/portforward"`}},
		{"get", "pods/log", []string{"forbidden to get pods/log", `cannot get resource "pods/log"`}},
		{"get", "services", []string{"forbidden to get service default/caller-service", `cannot get resource "services"`}},
		{"watch", "pods", []string{"forbidden to watch pods in namespace default", `cannot watch resource "pods"`}},
		{"get", "pods", []string{"forbidden to get pod default/callme-service-v2", `cannot get resource "pods"`}},
	} {
		t.Run("without "+tc.verb+" "+tc.resource, func(t *testing.T) {
			e.applyRole(t, withoutVerb(t, role, tc.verb, tc.resource), tc.verb, tc.resource, false)
			t.Cleanup(func() { e.applyRole(t, e.manifest, tc.verb, tc.resource, true) })
			start := time.Now()
			code, out := e.run(t, e.scenario)
			t.Logf("exit %d in %s", code, time.Since(start).Round(time.Millisecond))
			if code != 3 {
				t.Errorf("exit %d, want 3 (setup error):\n%s", code, out)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("the error does not say %q:\n%s", w, out)
				}
			}
		})
	}

	// A deploy/ target takes get deployments (apps) instead of get
	// services: the manifest generated for it is enough, and what the run
	// called is again all in it.
	t.Run("a deploy/ target passes with its own manifest", func(t *testing.T) {
		sc := filepath.Join(e.work, "deploy.yaml")
		if err := os.WriteFile(sc, []byte(strings.Replace(scenario, "resource: svc/caller-service", "resource: deploy/caller-service", 1)), 0o644); err != nil {
			t.Fatal(err)
		}
		m := generate(t, sc)
		if strings.Contains(string(m), "- services") || !strings.Contains(string(m), "- deployments") {
			t.Fatalf("manifest for a deploy/ target:\n%s", m)
		}
		e.applyRole(t, m, "get", "services", false)
		t.Cleanup(func() { e.applyRole(t, e.manifest, "get", "services", true) })
		offsets := map[string]int64{}
		for _, c := range clusters {
			offsets[c] = e.auditSize(t, c)
		}
		if code, out := e.run(t, sc); code != 0 {
			t.Fatalf("exit %d, want 0:\n%s", code, out)
		}
		e.checkAudit(t, offsets, m, []string{"get deployments.apps", "list pods", "get pods/portforward"})
	})

	// The generic manifests (the committed example, and --cluster-wide)
	// carry the ClusterRole and bindings the scenario's does not: the API
	// server accepts them as they are.
	t.Run("the API server accepts the generic manifests", func(t *testing.T) {
		example, err := os.ReadFile(filepath.Join("..", "..", "examples", "rbac.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		wide := generate(t, "--cluster-wide", "--service-account", "gate")
		for name, m := range map[string][]byte{"examples/rbac.yaml": example, "rbac --cluster-wide": wide} {
			out, err := e.kubectl(t, m, "c1", "apply", "--dry-run=server", "-f", "-")
			if err != nil {
				t.Errorf("%s: server-side dry run: %v: %s", name, err, out)
			}
		}
	})

	// get namespaces is the one optional permission: without it a missing
	// namespace reads as one without pods, and the run goes on.
	t.Run("without get namespaces the run still passes", func(t *testing.T) {
		e.applyRole(t, withoutVerb(t, role, "get", "namespaces"), "get", "namespaces", false)
		t.Cleanup(func() { e.applyRole(t, e.manifest, "get", "namespaces", true) })
		start := time.Now()
		code, out := e.run(t, e.scenario)
		t.Logf("exit %d in %s", code, time.Since(start).Round(time.Millisecond))
		if code != 0 {
			t.Errorf("exit %d, want 0:\n%s", code, out)
		}
	})
}

// withoutVerb is the Role as YAML with verb taken off resource's rule (the
// rule dropped when it has no verb left).
func withoutVerb(t *testing.T, role *rbacv1.Role, verb, resource string) []byte {
	t.Helper()
	r := role.DeepCopy()
	found := false
	var rules []rbacv1.PolicyRule
	for _, rule := range r.Rules {
		if slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
			found = true
			rule.Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == verb })
			if len(rule.Verbs) == 0 {
				continue
			}
		}
		rules = append(rules, rule)
	}
	if !found {
		t.Fatalf("the generated Role grants no %s %s to take away: %+v", verb, resource, role.Rules)
	}
	r.Rules = rules
	out, err := yaml.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// checkAudit reads what the API servers recorded of the run: every request
// the ServiceAccount made must have been allowed by a binding of the
// generated manifest, be granted by its rules, and be declared in
// access.Permissions.
func (e *env) checkAudit(t *testing.T, offsets map[string]int64, manifest []byte, want []string) {
	t.Helper()
	role := generatedRole(t, manifest)
	cluster := clusterRules(t, manifest)
	seen := map[string]int{}
	for _, c := range clusters {
		events := e.auditFrom(t, c, offsets[c])
		if len(events) == 0 {
			t.Errorf("cluster %s: the audit log holds no request of %s after the run", c, saUser)
		}
		for _, ev := range events {
			decision := ev.Annotations["authorization.k8s.io/decision"]
			reason := ev.Annotations["authorization.k8s.io/reason"]
			if ev.ObjectRef == nil {
				key := ev.Verb + " " + strings.SplitN(ev.RequestURI, "?", 2)[0]
				seen[key]++
				if !slices.ContainsFunc(access.Permissions(), func(p access.Permission) bool {
					return p.Scope == access.ScopeNonResource && p.Default && p.String() == key
				}) {
					t.Errorf("cluster %s: %s is no non-resource call access.Permissions declares granted by default", c, key)
				}
				if decision != "allow" {
					t.Errorf("cluster %s: %s was not allowed: %q %q", c, key, decision, reason)
				}
				continue
			}
			o := ev.ObjectRef
			res := o.Resource
			if o.Subresource != "" {
				res += "/" + o.Subresource
			}
			key := ev.Verb + " " + res
			if o.APIGroup != "" {
				key += "." + o.APIGroup
			}
			seen[key]++
			if !slices.ContainsFunc(access.Permissions(), func(p access.Permission) bool {
				return p.Verb == ev.Verb && p.Group == o.APIGroup && p.RBACResource() == res
			}) {
				t.Errorf("cluster %s: the run made %s (%s), which access.Permissions does not declare", c, key, ev.RequestURI)
			}
			granted := access.Grants(cluster, ev.Verb, o.APIGroup, res, o.Name)
			if o.Namespace == role.Namespace {
				granted = granted || access.Grants(role.Rules, ev.Verb, o.APIGroup, res, o.Name)
			}
			if !granted {
				t.Errorf("cluster %s: the run made %s in namespace %q (%s), which the generated manifest does not grant", c, key, o.Namespace, ev.RequestURI)
			}
			if decision != "allow" || !strings.Contains(reason, "Binding \""+serviceAccount) {
				t.Errorf("cluster %s: %s was not allowed by the generated bindings: decision %q, reason %q", c, key, decision, reason)
			}
		}
	}
	keys := make([]string, 0, len(seen))
	for k, n := range seen {
		keys = append(keys, fmt.Sprintf("%s ×%d", k, n))
	}
	slices.Sort(keys)
	t.Logf("requests of the run in the audit logs: %s", strings.Join(keys, ", "))
	// The run reached every feature the scenario has: an audit log that
	// missed them would prove nothing.
	for _, w := range want {
		if _, ok := seen[w]; !ok {
			t.Errorf("the audit logs hold no %s of the run", w)
		}
	}
}

// clusterRules are the rules of the manifest's ClusterRoles.
func clusterRules(t *testing.T, manifest []byte) []rbacv1.PolicyRule {
	t.Helper()
	var rules []rbacv1.PolicyRule
	for _, doc := range strings.Split(string(manifest), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "ClusterRole" {
			rules = append(rules, r.Rules...)
		}
	}
	return rules
}
