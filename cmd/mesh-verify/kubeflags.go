package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	// The client-go auth plugins: a kubeconfig's legacy auth-provider
	// (oidc) needs its provider registered in the binary, else every call
	// fails with "no Auth Provider found for name".
	_ "k8s.io/client-go/plugin/pkg/client/auth"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// kubeFlags are kubectl's connection flags, shared by every command that
// talks to clusters (README.md "Connecting to clusters").
type kubeFlags struct {
	kubeconfig     []string
	contexts       []string
	namespace      string
	as             string
	asGroups       []string
	token          string
	requestTimeout string
	execTimeout    time.Duration
}

// addKubeFlags registers the connection flags. contextHelp says what
// --context means for the command (a scenario's clusters or one context).
func addKubeFlags(fs *pflag.FlagSet, k *kubeFlags, contextHelp, namespaceHelp string) {
	fs.StringSliceVar(&k.kubeconfig, "kubeconfig", nil, "kubeconfig files, merged like KUBECONFIG (default: $KUBECONFIG, else ~/.kube/config, else the in-cluster config in a pod; only read)")
	fs.StringArrayVar(&k.contexts, "context", nil, contextHelp)
	fs.StringVarP(&k.namespace, "namespace", "n", "", namespaceHelp)
	fs.StringVar(&k.as, "as", "", "user to impersonate for the API calls, like kubectl --as")
	fs.StringArrayVar(&k.asGroups, "as-group", nil, "group to impersonate (repeatable; needs --as), like kubectl --as-group")
	fs.StringVar(&k.token, "token", "", "bearer token for the API servers instead of the kubeconfig user's (never printed or stored)")
	fs.StringVar(&k.requestTimeout, "request-timeout", "0", `bound on every API call, log streams included, like kubectl: "0" (none), "30s", or whole seconds`)
	fs.DurationVar(&k.execTimeout, "exec-timeout", kube.DefaultExecTimeout, "bound on one run of a kubeconfig exec credential plugin (gke-gcloud-auth-plugin, aws eks get-token, ...)")
}

// options turns the flags into kube.Options without the contexts, which
// depend on what the command connects to (scenarioContexts, singleContext).
func (k *kubeFlags) options() (kube.Options, error) {
	o := kube.Options{
		Kubeconfig: k.kubeconfig, Namespace: k.namespace, Impersonate: k.as, ImpersonateGroups: k.asGroups,
		Token: k.token, ExecTimeout: k.execTimeout, ExecWrapper: kube.ExecWrapper(),
	}
	if k.namespace != "" && !isDNSLabel(k.namespace) {
		return o, fmt.Errorf("--namespace %q: want a namespace name (lowercase letters, digits and '-')", k.namespace)
	}
	if len(k.asGroups) > 0 && k.as == "" {
		return o, fmt.Errorf("--as-group needs --as: Kubernetes impersonates groups only together with a user")
	}
	if k.execTimeout <= 0 {
		return o, fmt.Errorf("--exec-timeout %s: want a positive duration like 2m", k.execTimeout)
	}
	d, err := kube.ParseRequestTimeout(k.requestTimeout)
	if err != nil {
		return o, fmt.Errorf("--request-timeout %w", err)
	}
	o.RequestTimeout = d
	return o, nil
}

// scenarioContexts reads --context for a scenario: NAME for a scenario
// with one cluster, CLUSTER=CONTEXT (repeatable) for any.
func (k *kubeFlags) scenarioContexts(clusters []string) (map[string]string, error) {
	if len(k.contexts) == 0 {
		return nil, nil
	}
	have := "none"
	if len(clusters) > 0 {
		have = strings.Join(clusters, ", ")
	}
	out := map[string]string{}
	for _, v := range k.contexts {
		cluster, kctx, ok := strings.Cut(v, "=")
		if !ok {
			if len(clusters) != 1 {
				return nil, fmt.Errorf("--context %s: the scenario has %d clusters (%s): say which one, --context CLUSTER=CONTEXT", v, len(clusters), have)
			}
			cluster, kctx = clusters[0], v
		}
		switch {
		case kctx == "" || cluster == "":
			return nil, fmt.Errorf("--context %q: want NAME or CLUSTER=CONTEXT (scenario clusters: %s)", v, have)
		case !slices.Contains(clusters, cluster):
			return nil, fmt.Errorf("--context %s: the scenario has no cluster %s (scenario clusters: %s)", v, cluster, have)
		case out[cluster] != "":
			return nil, fmt.Errorf("--context %s: cluster %s is given a context twice", v, cluster)
		}
		out[cluster] = kctx
	}
	return out, nil
}

// singleContext reads --context for a command without a scenario: at
// most one context name.
func (k *kubeFlags) singleContext() (string, error) {
	switch len(k.contexts) {
	case 0:
		return "", nil
	case 1:
		if k.contexts[0] == "" {
			return "", fmt.Errorf("--context is empty: want a kubeconfig context name")
		}
		return k.contexts[0], nil
	}
	return "", fmt.Errorf("--context given %d times: this command connects to one cluster", len(k.contexts))
}

// isDNSLabel is a namespace name: an RFC 1123 label.
func isDNSLabel(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, r := range s {
		ok := 'a' <= r && r <= 'z' || '0' <= r && r <= '9' || r == '-' && i > 0 && i < len(s)-1
		if !ok {
			return false
		}
	}
	return true
}

// Help of --context and -n for commands that run a scenario.
const (
	scenarioContextHelp   = "kubeconfig context: NAME for a scenario with one cluster, CLUSTER=CONTEXT per scenario cluster (repeatable); replaces clusters[].context"
	scenarioNamespaceHelp = `namespace wherever the scenario leaves one unset (target.portForward.namespace, observe[].namespace), instead of "default"; a -n that every namespace the scenario names would override is refused, naming the fields`
)

// forScenario is the kube.Options of a run of sc; a bad flag is invalid
// input naming it.
func (k *kubeFlags) forScenario(sc *scenarios.Scenario) (kube.Options, error) {
	o, err := k.options()
	if err != nil {
		return o, &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	if o.Contexts, err = k.scenarioContexts(sc.ClusterNames()); err != nil {
		return o, &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	if err := k.namespaceConflicts(sc); err != nil {
		return o, &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	return o, nil
}

// namespaceConflicts refuses a -n that would apply nowhere: -n fills in
// the namespaces a scenario leaves unset and keeps those it names (a
// target in one namespace, the observed apps in -n's), but a -n that every
// field overrides with another namespace would be silently ignored.
func (k *kubeFlags) namespaceConflicts(sc *scenarios.Scenario) error {
	if k.namespace == "" {
		return nil
	}
	var clash []string
	check := func(defaulted bool, ns, field string) bool {
		if defaulted {
			return true // -n applies here
		}
		if ns != k.namespace {
			clash = append(clash, fmt.Sprintf("%s is %s", field, ns))
		}
		return false
	}
	applies := false
	if f := sc.Target.Forward; f != nil {
		applies = check(f.NamespaceDefaulted(), f.Namespace, "target.portForward.namespace") || applies
	}
	for i := range sc.Observe {
		w := &sc.Observe[i]
		applies = check(w.NamespaceDefaulted(), w.Namespace, fmt.Sprintf("observe[%d].namespace", i)) || applies
	}
	if applies || len(clash) == 0 {
		return nil
	}
	// A built-in has no file (scenarios.Builtin): named as run takes it.
	name := cmp.Or(sc.File, sc.Metadata.Name)
	return fmt.Errorf("--namespace %s would apply nowhere: the scenario %s names every namespace itself (%s); -n only fills in namespaces a scenario leaves unset: remove those fields, or change them with --set (e.g. --set %s=%s)",
		k.namespace, name, strings.Join(clash, "; "), strings.Fields(clash[0])[0], k.namespace)
}
