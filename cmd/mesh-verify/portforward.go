package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/kube"
	"github.com/mesh-verify/mesh-verify/kube/portforward"
)

type portForwardFlags struct {
	kube    kubeFlags
	address string
}

// newPortForwardCmd exposes mesh-verify's in-process tunnel on a loopback
// port, for debugging what `mesh-verify run` reaches through it.
func newPortForwardCmd() *cobra.Command {
	var f portForwardFlags
	cmd := &cobra.Command{
		Use:   "port-forward TYPE/NAME [LOCAL:]REMOTE",
		Short: "Forward a local port to a pod like kubectl port-forward, through mesh-verify's tunnel",
		Long: `port-forward exposes the same in-process tunnel mesh-verify run attacks through
on a local address, until interrupted. TYPE/NAME is pod/NAME, svc/NAME or
deploy/NAME; REMOTE is a number or a port name (a Service port for svc/,
translated to the container's targetPort like kubectl does). The local port
follows kubectl: PORT alone listens on the same local port (8080 listens on
8080); a port name alone listens on the port number it names (the Service's
port for svc/, the container port for pod/ and deploy/); LOCAL:REMOTE listens
on LOCAL; :REMOTE or 0:REMOTE on a free port. The address is printed on the
"Forwarding from" line.

Unlike kubectl, a connection that fails (backend refused, no forward) is
reported and closed without ending the command, and a lost tunnel is
re-established, re-resolving the pod.`,
		Example: `  mesh-verify port-forward --context kind-c1 -n demo svc/callme-service 8080
  mesh-verify port-forward --kubeconfig lab.yaml --context kind-c2 -n demo deploy/caller 9000:http`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPortForward(cmd, f, args[0], args[1])
		},
	}
	addKubeFlags(cmd.Flags(), &f.kube, "kubeconfig context (default: the current context)", "namespace of the target (default: the context's namespace, else default)")
	cmd.Flags().StringVar(&f.address, "address", "127.0.0.1", "local address to listen on: loopback only (127.0.0.0/8, ::1 or localhost)")
	return cmd
}

// checkLoopback accepts only a loopback listen address: the tunnel reaches
// into the cluster with the kubeconfig's credentials, so it must not be
// offered to other machines ("" and 0.0.0.0 listen on every interface).
func checkLoopback(addr string) error {
	if addr == "localhost" {
		return nil
	}
	if ip := net.ParseIP(addr); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("--address %q: want a loopback address (127.0.0.0/8, ::1 or localhost): the forward carries the kubeconfig's access into the cluster and must not be reachable from other machines", addr)
}

// splitLocalPort parses [LOCAL:]REMOTE like kubectl: LOCAL "" or 0 means
// a free port; without LOCAL (same) the local port is REMOTE's number, or,
// for a port name, the number it names (localPortOf).
func splitLocalPort(s string) (local int, same bool, remote string, err error) {
	l, r, ok := strings.Cut(s, ":")
	if !ok {
		if s == "" {
			return 0, false, "", fmt.Errorf("port is empty: want [LOCAL:]REMOTE")
		}
		if n, err := strconv.Atoi(s); err == nil {
			return n, true, s, nil
		}
		return 0, true, s, nil
	}
	if r == "" {
		return 0, false, "", fmt.Errorf("port %q: remote port is empty", s)
	}
	if l == "" {
		return 0, false, r, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 0 || n > 65535 {
		return 0, false, "", fmt.Errorf("port %q: local port %q is not a port number", s, l)
	}
	return n, false, r, nil
}

// localPortOf is the local port kubectl listens on for a port name given
// without LOCAL (k8s.io/kubectl pkg/cmd/portforward:
// translateServicePortToTargetPort uses the Service port's number,
// convertPodNamedPortToNumber the container port's).
func localPortOf(ctx context.Context, c *kube.Cluster, t *portforward.Tunnel, target portforward.Target) (int, error) {
	if target.Kind != portforward.KindService {
		return int(t.Pod().Port), nil
	}
	svc, err := c.Client.CoreV1().Services(t.Namespace()).Get(ctx, target.Name, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get service %s/%s for the number of port %s: %w", t.Namespace(), target.Name, target.Port, err)
	}
	for _, p := range svc.Spec.Ports {
		if p.Name == target.Port {
			return int(p.Port), nil
		}
	}
	return 0, fmt.Errorf("service %s/%s has no port %s", t.Namespace(), target.Name, target.Port)
}

// forwarderMaxProcs is the GOMAXPROCS `mesh-verify port-forward` serves
// with. Forwarding is I/O: a request costs tens of microseconds of CPU,
// and with more Ps every goroutine the network wakes starts an idle
// thread to run it (futex wake-ups and context switches that cost more
// than the forwarding itself; BENCHMARKS.md, the tunnel). One core
// forwards far more than an API server connection carries.
const forwarderMaxProcs = 1

// forwarderGCPercent is Go's default, not the run's defaultGCPercent: the
// run's setting trades CPU for the memory of an attack's heap, which a
// forwarder does not hold; at 50 its collector would run twice as often
// for nothing it needs, on the CPU per forwarded request that issue 27
// judges.
const forwarderGCPercent = 100

// limitProcs sets GOMAXPROCS to forwarderMaxProcs unless the environment
// sets GOMAXPROCS (the user's choice wins); it returns the value in force.
func limitProcs(getenv func(string) string) int {
	if getenv("GOMAXPROCS") != "" {
		return runtime.GOMAXPROCS(0)
	}
	runtime.GOMAXPROCS(forwarderMaxProcs)
	return forwarderMaxProcs
}

func runPortForward(cmd *cobra.Command, f portForwardFlags, resource, ports string) error {
	local, same, remote, err := splitLocalPort(ports)
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	target, err := portforward.ParseTarget(resource, remote)
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	ko, err := f.kube.options()
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	kctx, err := f.kube.singleContext()
	if err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	if err := checkLoopback(f.address); err != nil {
		return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	name := kctx
	if kctx != "" {
		// Given on the command line: explicit (an error in a pod without
		// a kubeconfig, never replaced by the in-cluster config).
		ko.Contexts = map[string]string{name: kctx}
	}
	cfg, err := kube.LoadConfig(ko)
	if err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: err}
	}
	switch {
	case name == "" && cfg.InCluster():
		name = kube.InClusterContext
	case name == "":
		name = cfg.CurrentContext()
	}
	cluster, err := cfg.Connect(ctx, kube.ClusterRef{Name: name})
	if err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: err}
	}
	t, err := portforward.OpenTunnel(ctx, cluster, portforward.TunnelSpec{Namespace: ko.Namespace, Resource: resource, Port: remote})
	if err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: err}
	}
	defer t.Close()
	if same && local == 0 {
		if local, err = localPortOf(ctx, cluster, t, target); err != nil {
			return &exitcode.Error{Code: exitcode.Setup, Err: err}
		}
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(f.address, strconv.Itoa(local)))
	if err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("listen on %s: %w", f.address, err)}
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, w := range t.Warnings() {
		fmt.Fprintln(errOut, "warning:", w)
	}
	pod := t.Pod()
	fmt.Fprintf(out, "Forwarding from %s -> %d\n", ln.Addr(), pod.Port)
	fmt.Fprintf(errOut, "(pod %s/%s, context %s, via %s)\n", pod.Namespace, pod.Name, cluster.Context, t.Stats().Protocol)
	limitProcs(os.Getenv)
	gcPercent(os.Getenv, forwarderGCPercent)
	var mu sync.Mutex // Serve reports from one goroutine per connection
	last := pod
	err = t.Serve(ctx, ln, func(err error) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(errOut, "error:", err)
		if p := t.Pod(); p != last {
			last = p
			fmt.Fprintf(errOut, "now forwarding to pod %s/%s\n", p.Namespace, p.Name)
		}
	})
	if err != nil && !errors.Is(err, context.Canceled) {
		return &exitcode.Error{Code: exitcode.Setup, Err: err}
	}
	// Ctrl-C is how this command ends: exit 0, as kubectl port-forward does.
	return nil
}
