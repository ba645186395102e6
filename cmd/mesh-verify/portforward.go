package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/kube"
)

type portForwardFlags struct {
	kubeconfig []string
	context    string
	namespace  string
	address    string
}

// newPortForwardCmd exposes mesh-verify's in-process tunnel on a loopback
// port, for debugging what `mesh-verify run` reaches through it.
func newPortForwardCmd() *cobra.Command {
	var f portForwardFlags
	cmd := &cobra.Command{
		Use:   "port-forward TYPE/NAME [LOCAL:]PORT",
		Short: "Forward a local port to a pod like kubectl port-forward, through mesh-verify's tunnel",
		Long: `port-forward exposes the same in-process tunnel mesh-verify run attacks through
on a local address, until interrupted. TYPE/NAME is pod/NAME, svc/NAME or
deploy/NAME; PORT is a number or a port name (a Service port for svc/,
translated to the container's targetPort like kubectl does). LOCAL defaults to
a free port, printed on the "Forwarding from" line.

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
	cmd.Flags().StringArrayVar(&f.kubeconfig, "kubeconfig", nil, "kubeconfig file(s), merged like KUBECONFIG (default: $KUBECONFIG, else ~/.kube/config)")
	cmd.Flags().StringVar(&f.context, "context", "", "kubeconfig context (default: the current context)")
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", "", "namespace of the target (default: the context's namespace, else default)")
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

// splitLocalPort parses [LOCAL:]PORT; LOCAL "" or 0 means a free port.
func splitLocalPort(s string) (local int, remote string, err error) {
	l, r, ok := strings.Cut(s, ":")
	if !ok {
		return 0, s, nil
	}
	if r == "" {
		return 0, "", fmt.Errorf("port %q: remote port is empty", s)
	}
	if l == "" {
		return 0, r, nil
	}
	n, err := strconv.Atoi(l)
	if err != nil || n < 0 || n > 65535 {
		return 0, "", fmt.Errorf("port %q: local port %q is not a port number", s, l)
	}
	return n, r, nil
}

func runPortForward(cmd *cobra.Command, f portForwardFlags, resource, ports string) error {
	local, remote, err := splitLocalPort(ports)
	if err != nil {
		return &codedError{code: exitInvalidInput, err: err}
	}
	if _, err := kube.ParseTarget(resource, remote); err != nil {
		return &codedError{code: exitInvalidInput, err: err}
	}
	if err := checkLoopback(f.address); err != nil {
		return &codedError{code: exitInvalidInput, err: err}
	}
	parent := cmd.Context()
	if parent == nil {
		parent = context.Background()
	}
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg, err := kube.LoadConfig(kube.Options{Kubeconfig: f.kubeconfig})
	if err != nil {
		return &codedError{code: exitSetup, err: err}
	}
	name := f.context
	if name == "" {
		name = cfg.CurrentContext()
	}
	cluster, err := cfg.Connect(ctx, kube.ClusterRef{Name: name, Context: f.context})
	if err != nil {
		return &codedError{code: exitSetup, err: err}
	}
	t, err := kube.OpenTunnel(ctx, cluster, kube.TunnelSpec{Namespace: f.namespace, Resource: resource, Port: remote})
	if err != nil {
		return &codedError{code: exitSetup, err: err}
	}
	defer t.Close()
	ln, err := net.Listen("tcp", net.JoinHostPort(f.address, strconv.Itoa(local)))
	if err != nil {
		return &codedError{code: exitSetup, err: fmt.Errorf("listen on %s: %w", f.address, err)}
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	for _, w := range t.Warnings() {
		fmt.Fprintln(errOut, "warning:", w)
	}
	pod := t.Pod()
	fmt.Fprintf(out, "Forwarding from %s -> %d\n", ln.Addr(), pod.Port)
	fmt.Fprintf(errOut, "(pod %s/%s, context %s, via %s)\n", pod.Namespace, pod.Name, cluster.Context, t.Stats().Protocol)
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
		return &codedError{code: exitSetup, err: err}
	}
	// Ctrl-C is how this command ends: exit 0, as kubectl port-forward does.
	return nil
}
