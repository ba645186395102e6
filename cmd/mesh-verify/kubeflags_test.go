package main

import (
	"context"
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// parseKubeFlags parses args with the flag set run and port-forward use.
func parseKubeFlags(t *testing.T, args ...string) (*kubeFlags, error) {
	t.Helper()
	var k kubeFlags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addKubeFlags(fs, &k, "", "")
	return &k, fs.Parse(args)
}

func TestScenarioContexts(t *testing.T) {
	for _, tc := range []struct {
		name     string
		args     []string
		clusters []string
		want     map[string]string
		err      string
	}{
		{"none", nil, []string{"c1", "c2"}, nil, ""},
		{"bare name, one cluster", []string{"--context", "kind-x"}, []string{"c1"}, map[string]string{"c1": "kind-x"}, ""},
		{"per cluster", []string{"--context", "c1=kind-a", "--context", "c2=kind-b"}, []string{"c1", "c2"}, map[string]string{"c1": "kind-a", "c2": "kind-b"}, ""},
		{"one of two", []string{"--context=c2=kind-b"}, []string{"c1", "c2"}, map[string]string{"c2": "kind-b"}, ""},
		{"bare name, two clusters", []string{"--context", "kind-x"}, []string{"c1", "c2"}, nil, "--context kind-x: the scenario has 2 clusters (c1, c2): say which one, --context CLUSTER=CONTEXT"},
		{"unknown cluster", []string{"--context", "c9=kind-x"}, []string{"c1", "c2"}, nil, "--context c9=kind-x: the scenario has no cluster c9 (scenario clusters: c1, c2)"},
		{"empty context", []string{"--context", "c1="}, []string{"c1"}, nil, `--context "c1=": want NAME or CLUSTER=CONTEXT`},
		{"twice", []string{"--context", "c1=a", "--context", "c1=b"}, []string{"c1", "c2"}, nil, "cluster c1 is given a context twice"},
		{"bare and per cluster", []string{"--context", "a", "--context", "c1=b"}, []string{"c1"}, nil, "cluster c1 is given a context twice"},
		{"no clusters", []string{"--context", "a"}, nil, nil, "the scenario has 0 clusters (none)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := parseKubeFlags(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.scenarioContexts(tc.clusters)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
}

func TestKubeOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want kube.Options
		err  string
	}{
		{"defaults", nil, kube.Options{ExecTimeout: kube.DefaultExecTimeout}, ""},
		{"all", []string{"--kubeconfig", "a,b", "-n", "demo", "--as", "jane", "--as-group", "devs", "--as-group", "ops", "--token", "t0k", "--request-timeout", "30", "--exec-timeout", "5s"},
			kube.Options{Kubeconfig: []string{"a", "b"}, Namespace: "demo", Impersonate: "jane", ImpersonateGroups: []string{"devs", "ops"}, Token: "t0k", RequestTimeout: 30 * time.Second, ExecTimeout: 5 * time.Second}, ""},
		{"request timeout with unit", []string{"--request-timeout", "1m"}, kube.Options{RequestTimeout: time.Minute, ExecTimeout: kube.DefaultExecTimeout}, ""},
		{"bad request timeout", []string{"--request-timeout", "-3"}, kube.Options{}, `--request-timeout "-3"`},
		{"group without user", []string{"--as-group", "devs"}, kube.Options{}, "--as-group needs --as"},
		{"bad namespace", []string{"-n", "Demo"}, kube.Options{}, `--namespace "Demo"`},
		{"zero exec timeout", []string{"--exec-timeout", "0s"}, kube.Options{}, "--exec-timeout 0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k, err := parseKubeFlags(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			got, err := k.options()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			// Every run names this binary as the exec plugin wrapper.
			tc.want.ExecWrapper = kube.ExecWrapper()
			if err != nil || tc.want.ExecWrapper == "" || fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", tc.want) {
				t.Fatalf("got %+v, %v\nwant %+v", got, err, tc.want)
			}
		})
	}
}

// TestRunContextFlagErrors: run refuses a --context that does not fit the
// scenario as invalid input (exit 4), before connecting to anything.
func TestRunContextFlagErrors(t *testing.T) {
	dir := t.TempDir()
	file := "cilium-both" // built-in, clusters c1 and c2
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--context", "kind-x"}, "--context kind-x: the scenario has 2 clusters (c1, c2)"},
		{[]string{"--context", "c3=kind-x"}, "the scenario has no cluster c3 (scenario clusters: c1, c2)"},
		{[]string{"--as-group", "g"}, "--as-group needs --as"},
	} {
		var stdout, stderr strings.Builder
		code := execute(append([]string{"run", file, "--out", dir}, tc.args...), &stdout, &stderr)
		if code != exitcode.InvalidInput || !strings.Contains(stderr.String(), tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", tc.args, code, stderr.String(), exitcode.InvalidInput, tc.msg)
		}
	}
}

// TestOIDCAuthProvider: a kubeconfig with the legacy auth-provider: oidc
// works in this binary (the provider is registered by kubeflags.go's
// import), sending its id-token; without the import every call fails
// with "no Auth Provider found for name \"oidc\"".
func TestOIDCAuthProvider(t *testing.T) {
	var got string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37"}`)
	}))
	defer srv.Close()
	b64 := base64.RawURLEncoding.EncodeToString
	// An unexpired id-token: the provider sends it without asking the issuer.
	idToken := b64([]byte(`{"alg":"RS256"}`)) + "." + b64(fmt.Appendf(nil, `{"iss":"https://issuer.invalid","exp":%d}`, time.Now().Add(time.Hour).Unix())) + ".c2ln"
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kc, fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: %q, insecure-skip-tls-verify: true}}]
users:
- name: oidc-user
  user:
    auth-provider:
      name: oidc
      config: {client-id: mesh, idp-issuer-url: "https://issuer.invalid", id-token: %q}
contexts: [{name: a, context: {cluster: a, user: oidc-user}}]
`, srv.URL, idToken), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: []string{kc}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.Connect(context.Background(), kube.ClusterRef{Name: "c1", Context: "a"}); err != nil {
		t.Fatal(err)
	}
	if got != "Bearer "+idToken {
		t.Errorf("Authorization %q, want the oidc id-token", got)
	}
}

// TestNamespaceFlagNeverIgnored: -n fills in the namespaces a scenario
// leaves unset and keeps those it names; a -n that would apply nowhere is
// refused naming the fields (issue 26: -n was silently ignored there).
func TestNamespaceFlagNeverIgnored(t *testing.T) {
	t.Parallel()
	const src = `apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: ns}
clusters: [{name: c1, context: kind-c1}]
target:
  portForward: {cluster: c1, %s resource: svc/web, port: "8080"}
attack: {rate: 10/s, duration: 1s}
observe:
  - {name: web, clusters: [c1], %s selector: app=web}
attribution: {rules: [{header: X-Cluster, field: cluster}]}
expect: [{successRate: {atLeast: 90%%}}]
`
	for _, tc := range []struct {
		name, fwd, obs, flag, want string
	}{
		{"unset fills in", "", "", "shop", ""},
		{"same namespace", "namespace: shop,", "namespace: shop,", "shop", ""},
		{"no flag", "namespace: shop,", "", "", ""},
		{"target named, observe filled in", "namespace: interconnect,", "", "shop", ""},
		{"observe named, target filled in", "", "namespace: interconnect,", "shop", ""},
		{"every namespace named otherwise", "namespace: interconnect,", "namespace: sample,", "shop", "target.portForward.namespace is interconnect; observe[0].namespace is sample"},
		{"one named the same, one otherwise", "namespace: shop,", "namespace: sample,", "shop", "observe[0].namespace is sample"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc, err := scenarios.Parse("ns.yaml", []byte(fmt.Sprintf(src, tc.fwd, tc.obs)))
			if err != nil {
				t.Fatal(err)
			}
			k := kubeFlags{namespace: tc.flag, execTimeout: kube.DefaultExecTimeout, requestTimeout: "0"}
			_, err = k.forScenario(sc)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("-n %q: %v", tc.flag, err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "--set")):
				t.Errorf("-n %q: %v, want a refusal naming %q and --set", tc.flag, err, tc.want)
			}
		})
	}
}

// TestNamespaceFlagNamesBuiltin: a built-in scenario has no file; the
// refusal of a -n that applies nowhere names it by its name, not by an
// empty path.
func TestNamespaceFlagNamesBuiltin(t *testing.T) {
	t.Parallel()
	e2e{args: []string{"run", "istio-helloworld", "-n", "foo", "--out", t.TempDir(), "-q"}, code: exitcode.InvalidInput,
		stderr: []string{"the scenario istio-helloworld names every namespace itself"}}.run(t)
}
