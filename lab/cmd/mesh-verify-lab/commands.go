package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
)

// newLabCmd is mesh-verify-lab (`mesh-verify lab`): the local lab of kwok
// clusters, tutorial apps and a simulated mesh data plane
// (docs/architecture.md, the lab).
func newLabCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "mesh-verify-lab",
		Short: "Run a local multi-cluster lab (kwok API servers, tutorial apps, simulated mesh)",
		Long: `The lab runs real Kubernetes API servers (kwok, no containers) named c1, c2, c3 with
contexts kind-c1…, deploys a topology's apps as Deployments and Services, and backs every
simulated pod with a real HTTP server on 127.0.0.1 — the tutorials' apps, or a mesh
simulator for the mesh's entry — so kubectl get/logs/port-forward/scale work as on a
real cluster. State lives in ${XDG_STATE_HOME:-~/.local/state}/mesh-verify/lab and its
own kubeconfig; ~/.kube is never touched.

mesh-verify-lab is a program of its own, run directly or as mesh-verify lab (mesh-verify
runs the mesh-verify-lab beside it or on PATH; make build builds both into bin/). Pods of
mesh-verify's image (a distributed run's workers) run the mesh-verify beside it or on PATH.`,
	}
	cmd.PersistentFlags().StringVar(&dir, "dir", "", "lab state directory (default ${XDG_STATE_HOME:-~/.local/state}/mesh-verify/lab)")
	cmd.AddCommand(newLabUpCmd(&dir), newLabDownCmd(&dir), newLabStatusCmd(&dir), newLabEnvCmd(&dir),
		newLabListCmd(), newLabServeCmd(&dir))
	return cmd
}

func labSignalContext(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	return signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
}

func newLabUpCmd(dir *string) *cobra.Command {
	var o lab.Options
	var seed uint64
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Create the clusters of a topology and serve its pods; returns when everything answers",
		Long: `Creates the topology's clusters one after the other, applies a kwok node, namespaces,
Deployments and Services, starts the lab daemon (detached, pid file and log in the lab
directory) and waits until every pod is Running and its logs and port-forward answer.
Running it again with the same topology does nothing; with another topology, or after a
crash, the previous lab is removed first. If up fails or is interrupted (Ctrl-C), it
stops the daemon and deletes the clusters it started, unless --keep-on-failure is given.
--data-plane nginx plays every mesh entry with Debian's nginx (weighted upstreams,
split_clients, mirror) instead of the simulator, for the policies nginx can play
(per-pod, weighted, failover, mirror; not Skupper's balanced mode).
The simulator routes at random where the real data plane does (Envoy's weighted
clusters and mirror fractions per request, Cilium's and east-west gateways' picks per
connection); every simulator's random source derives from the lab's seed, printed by
up and lab status: --seed N brings up a lab that replays those choices.
Built-in topologies: see mesh-verify lab list.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A topology that does not load is bad input, and nothing has
			// been touched yet.
			t, _, err := topologies.Resolve(o.Topology)
			if err != nil {
				return exitcode.Wrap(exitcode.InvalidInput, err)
			}
			if o.DataPlane != "" {
				if err := t.UseDataPlane(o.DataPlane); err != nil {
					return exitcode.Wrap(exitcode.InvalidInput, fmt.Errorf("--data-plane: %w", err))
				}
			}
			ctx, stop := labSignalContext(cmd)
			defer stop()
			// After the first Ctrl-C, up removes what it started; a second
			// one ends the process at once.
			go func() {
				<-ctx.Done()
				stop()
			}()
			o.Dir, o.Out = *dir, cmd.ErrOrStderr()
			if cmd.Flags().Changed("seed") {
				o.Seed = &seed
			}
			l, err := lab.Up(ctx, o)
			if err != nil {
				return exitcode.Wrap(exitcode.Setup, err)
			}
			r, err := lab.Status(ctx, lab.Options{Dir: l.Dir})
			if err != nil {
				return exitcode.Wrap(exitcode.Setup, err)
			}
			r.Print(cmd.OutOrStdout())
			return nil
		},
	}
	cmd.Flags().StringVarP(&o.Topology, "topology", "t", "skupper-1", "built-in topology name or topology file")
	cmd.Flags().StringVar(&o.Bin, "bin", "", "directory of the lab binaries (default $MESH_VERIFY_LAB_BIN, else tools/lab/build.sh)")
	cmd.Flags().DurationVar(&o.ReadyTimeout, "timeout", 2*time.Minute, "how long to wait for every pod to serve")
	cmd.Flags().StringVar(&o.DataPlane, "data-plane", "", "play every mesh entry with this data plane: simulator or nginx (default: as the topology says)")
	cmd.Flags().Uint64Var(&seed, "seed", 0, "routing seed of the simulators (default: random, printed; a lab already up keeps its own)")
	cmd.Flags().BoolVar(&o.KeepOnFailure, "keep-on-failure", false, "if up fails or is interrupted, keep what it started for inspection (default: remove it)")
	return cmd
}

func newLabDownCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the lab daemon, delete the clusters and remove the lab's state",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := labSignalContext(cmd)
			defer stop()
			r, err := lab.Down(ctx, lab.Options{Dir: *dir, Out: cmd.ErrOrStderr()})
			if err != nil {
				return exitcode.Wrap(exitcode.Setup, err)
			}
			if r.Nothing {
				fmt.Fprintf(cmd.OutOrStdout(), "no lab in %s\n", r.Dir)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "lab in %s is down: daemon stopped, clusters %v deleted, no process left\n", r.Dir, r.Clusters)
			return nil
		},
	}
}

func newLabStatusCmd(dir *string) *cobra.Command {
	var asJSON bool
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the clusters, pods, daemon and ports of the lab; exit 0 only when everything serves",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliout.ApplyJSONAlias(cmd, asJSON, &output); err != nil {
				return err
			}
			if err := cliout.Check(output, []string{cliout.Table, cliout.JSON}); err != nil {
				return err
			}
			ctx, stop := labSignalContext(cmd)
			defer stop()
			r, err := lab.Status(ctx, lab.Options{Dir: *dir})
			if err != nil {
				return exitcode.Wrap(exitcode.Setup, err)
			}
			if output == cliout.JSON {
				if err := cliout.WriteJSON(cmd.OutOrStdout(), r); err != nil {
					return err
				}
			} else {
				r.Print(cmd.OutOrStdout())
			}
			if !r.Ready {
				return exitcode.Wrap(exitcode.Setup, nil)
			}
			return nil
		},
	}
	cliout.AddFlag(cmd, &output, cliout.Table, []string{cliout.Table, cliout.JSON}, "table, or json (one object: clusters, pods, daemon, ports, ready)")
	cliout.AddJSONAlias(cmd, &asJSON)
	return cmd
}

func newLabEnvCmd(dir *string) *cobra.Command {
	var pathOnly bool
	cmd := &cobra.Command{
		Use:   "env",
		Short: `Print the shell lines that point kubectl at the lab: eval "$(mesh-verify lab env)"`,
		Long: `Prints export lines for KUBECONFIG (the lab's kubeconfig) and KUBECACHEDIR (kubectl's
discovery and HTTP cache, inside the lab directory: kubectl writes ~/.kube/cache otherwise,
even with a kubeconfig). eval "$(mesh-verify lab env)" points kubectl at the lab and keeps
its cache there; --kubeconfig prints only the kubeconfig path.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			e, err := lab.Env(lab.Options{Dir: *dir})
			if err != nil {
				return exitcode.Wrap(exitcode.Setup, err)
			}
			if pathOnly {
				fmt.Fprintln(cmd.OutOrStdout(), e.Kubeconfig)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "export KUBECONFIG=%s\nexport KUBECACHEDIR=%s\n", shellQuote(e.Kubeconfig), shellQuote(e.KubeCacheDir))
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&pathOnly, "kubeconfig", false, "print only the kubeconfig path")
	return cmd
}

// topologyEntry is one line of lab list -o json.
type topologyEntry struct {
	Name     string `json:"name"`
	Clusters int    `json:"clusters"`
	Seed     string `json:"seed"`
}

func newLabListCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the built-in topologies",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliout.Check(output, []string{cliout.Table, cliout.JSON}); err != nil {
				return err
			}
			list := []topologyEntry{}
			for _, n := range topologies.Names() {
				t, err := topologies.Builtin(n)
				if err != nil {
					return exitcode.Wrap(exitcode.Setup, err)
				}
				list = append(list, topologyEntry{n, len(t.Clusters), t.Metadata.Seed})
			}
			if output == cliout.JSON {
				return cliout.WriteJSON(cmd.OutOrStdout(), list)
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "TOPOLOGY\tCLUSTERS\tSEED EXPERIMENT")
			for _, e := range list {
				fmt.Fprintf(tw, "%s\t%d\t%s\n", e.Name, e.Clusters, e.Seed)
			}
			return tw.Flush()
		},
	}
	cliout.AddFlag(cmd, &output, cliout.Table, []string{cliout.Table, cliout.JSON}, "table, or json (an array of name, clusters and seed experiment)")
	return cmd
}

func newLabServeCmd(dir *string) *cobra.Command {
	return &cobra.Command{
		Use:    "serve",
		Short:  "Run the lab daemon in the foreground (lab up starts it detached)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if *dir == "" {
				return exitcode.Wrap(exitcode.InvalidInput, errors.New("lab serve needs --dir"))
			}
			ctx, stop := labSignalContext(cmd)
			defer stop()
			if err := lab.Serve(ctx, *dir); err != nil {
				return exitcode.Wrap(exitcode.Setup, err)
			}
			return nil
		},
	}
}

// shellQuote quotes a path for POSIX shells when it needs it.
func shellQuote(s string) string {
	for _, r := range s {
		if !(r == '/' || r == '.' || r == '-' || r == '_' || r == '+' || r == ':' || r == ',' ||
			r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
