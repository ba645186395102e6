package kube

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/mesh-verify/mesh-verify/kube/kclient"
	"k8s.io/client-go/rest"
)

// InClusterContext is the context name a cluster reached with the
// in-cluster config is reported under.
const InClusterContext = "in-cluster"

// The files a pod's ServiceAccount is mounted as (rest.InClusterConfig
// reads the same fixed paths).
const (
	serviceAccountDir   = "/var/run/secrets/kubernetes.io/serviceaccount"
	serviceAccountToken = serviceAccountDir + "/token"
	serviceAccountNS    = serviceAccountDir + "/namespace"
)

// inClusterPossible is clientcmd's test for running in a pod: the
// service environment variables and a ServiceAccount token file.
func inClusterPossible() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") == "" || os.Getenv("KUBERNETES_SERVICE_PORT") == "" {
		return false
	}
	fi, err := os.Stat(serviceAccountToken)
	return err == nil && !fi.IsDir()
}

// connectInCluster connects a cluster with the pod's ServiceAccount. In a
// pod without a kubeconfig the context names of a scenario mean nothing,
// and the in-cluster config reaches exactly one cluster, the pod's own
// (README.md "Connecting to clusters"): so it serves a cluster without a
// context, or the scenario's only cluster whatever context the scenario
// file names. A context given on the command line (explicit), or one of
// several clusters naming a context, is an error: guessing which cluster
// the pod is in would measure the wrong one.
func (c *Config) connectInCluster(ctx context.Context, ref ClusterRef, kctx string, explicit, only bool) (*Cluster, error) {
	if kctx != "" && (explicit || !only) {
		why := "the scenario uses several clusters: mount a kubeconfig with their contexts and give --kubeconfig (a cluster without a context maps to the pod's own)"
		if explicit {
			why = "drop --context to use it, or mount a kubeconfig and give --kubeconfig"
		}
		return nil, &ClusterError{Cluster: ref.Name, Context: kctx, Call: "select kubeconfig context", Reason: ReasonContextNotFound,
			Err: fmt.Errorf("context %s not found: no kubeconfig (looked for %s) and running in a pod, where only the in-cluster config (the pod's ServiceAccount, its own cluster) is available: %s",
				kctx, strings.Join(c.Files(), ", "), why)}
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, &ClusterError{Cluster: ref.Name, Context: InClusterContext, Call: "build in-cluster client config", Reason: ReasonOther, Err: err}
	}
	if err := rest.LoadTLSFiles(cfg); err != nil {
		return nil, &ClusterError{Cluster: ref.Name, Context: InClusterContext, Call: "read the ServiceAccount's CA", Reason: ReasonOther, Err: err}
	}
	// The flags apply as kubectl applies them in a pod.
	if c.opts.Token != "" {
		cfg.BearerToken, cfg.BearerTokenFile = c.opts.Token, ""
	}
	cfg.Impersonate = rest.ImpersonationConfig{UserName: c.opts.Impersonate, Groups: c.opts.ImpersonateGroups}
	c.tune(cfg)
	client, err := kclient.NewForConfig(cfg)
	if err != nil {
		return nil, &ClusterError{Cluster: ref.Name, Context: InClusterContext, Call: "build client", Reason: ReasonOther, Err: err}
	}
	cl := &Cluster{Name: ref.Name, Context: InClusterContext, Server: cfg.Host, Namespace: podNamespace(), InCluster: true, REST: cfg, Client: client}
	if err := cl.Probe(ctx, c.opts.ProbeTimeout); err != nil {
		return nil, err
	}
	return cl, nil
}

// podNamespace is the pod's namespace as clientcmd finds it: POD_NAMESPACE
// (the downward API), else the ServiceAccount's namespace file.
func podNamespace() string {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile(serviceAccountNS); err == nil {
		return strings.TrimSpace(string(b))
	}
	return ""
}
