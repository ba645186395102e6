package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/worker"
)

// newWorkerCmd is one pod of a distributed run's Indexed Job
// (docs/distributed.md, The worker). stdout carries records only.
func newWorkerCmd() *cobra.Command {
	var (
		configMap, namespace string
		kubeContext          string
		connectTo            []string
		kubeconfig           []string
		startTimeout         time.Duration
		indexOffset          int
		sidecar              string
		sidecarTimeout       time.Duration
	)
	cmd := &cobra.Command{
		Use:   "worker --configmap NAME",
		Short: "One worker pod of a distributed run (started by run, in a Job)",
		Long: `worker is what the pods of a distributed run (attack.workers) execute. It
reads its ConfigMap (scenario.yaml, inventory.json, run.json), prints a ready
record, waits for the annotation mesh-verify.io/start-at, attacks its share of
the scenario and prints its statistics as JSON records on stdout
(docs/distributed.md); log lines go to stderr. The worker's index is
JOB_COMPLETION_INDEX, its pod POD_NAME, its namespace --namespace, else
POD_NAMESPACE. SIGTERM or the annotation mesh-verify.io/stop: "true" ends the
attack with a final record and exit 0; an error prints an error record and
exits 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			index, err := envIndex(os.Getenv("JOB_COMPLETION_INDEX"))
			if err != nil {
				return exitcode.InvalidInputf("%v", err)
			}
			if namespace == "" {
				namespace = os.Getenv("POD_NAMESPACE")
			}
			if namespace != "" && !isDNSLabel(namespace) {
				return exitcode.InvalidInputf("--namespace %q: want a namespace name (lowercase letters, digits and '-')", namespace)
			}
			// In the lab, Service names reach the data plane through the
			// connect-to list the daemon sets (lab/README.md); on a real
			// cluster the variable is unset and cluster DNS resolves them.
			proxy, err := worker.ProxyAt(sidecar, os.Getenv(worker.SidecarAdminEnv))
			if err != nil {
				return exitcode.InvalidInputf("%v", err)
			}
			dial, err := connectToDial(connectTo)
			if err != nil {
				return err
			}
			parent := cmd.Context()
			if parent == nil {
				parent = context.Background()
			}
			// SIGTERM is how Kubernetes stops a pod: the attack ends and
			// what it measured is printed.
			ctx, stop := signal.NotifyContext(parent, syscall.SIGTERM, os.Interrupt)
			defer stop()
			err = worker.Run(ctx, worker.Options{
				ConfigMap: configMap, Namespace: namespace, Index: index, IndexOffset: indexOffset, Pod: os.Getenv("POD_NAME"),
				StartTimeout: startTimeout, Proxy: proxy, ProxyReadyTimeout: sidecarTimeout,
				Kube:    kube.Options{Kubeconfig: kubeconfig, UserAgent: "mesh-verify-worker", ExecWrapper: kube.ExecWrapper()},
				Context: kubeContext,
				Dial:    dial,
				Records: cmd.OutOrStdout(), Log: cmd.ErrOrStderr(),
			})
			if err != nil {
				return &exitcode.Error{Code: exitcode.Fail, Err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&configMap, "configmap", "", "the run's ConfigMap (required)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the ConfigMap's namespace (default: $POD_NAMESPACE, else the context's or the pod's)")
	cmd.Flags().StringSliceVar(&kubeconfig, "kubeconfig", nil, "kubeconfig files (default: the in-cluster config in a pod, else $KUBECONFIG; only read)")
	cmd.Flags().StringVar(&kubeContext, "context", "", "kubeconfig context of the worker's cluster (default: the current context; in a pod without a kubeconfig, the pod's own cluster)")
	cmd.Flags().StringArrayVar(&connectTo, "connect-to", nil, "HOST:PORT:CONNECT_HOST:CONNECT_PORT (repeatable; curl's --connect-to), as for run; $"+attack.ConnectToEnv+" adds entries after these")
	cmd.Flags().DurationVar(&startTimeout, "start-timeout", worker.DefaultStartTimeout, "how long to wait for the start signal")
	cmd.Flags().IntVar(&indexOffset, "index-offset", 0, "the run's index of the Job's first worker (several sources): this worker is the run's worker index-offset + JOB_COMPLETION_INDEX")
	cmd.Flags().StringVar(&sidecar, "sidecar", "none", "the injected mesh proxy: istio or kuma (wait until it is ready, ask it to quit at the end so that the Job completes) or none")
	cmd.Flags().DurationVar(&sidecarTimeout, "sidecar-ready-timeout", worker.DefaultProxyReadyTimeout, "how long to wait for the sidecar to be ready")
	_ = cmd.MarkFlagRequired("configmap")
	return cmd
}

// envIndex reads JOB_COMPLETION_INDEX; unset means worker 0 (a lone pod).
func envIndex(v string) (int, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("JOB_COMPLETION_INDEX %q: want a whole number ≥ 0", v)
	}
	return n, nil
}
