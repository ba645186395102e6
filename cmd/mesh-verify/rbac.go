package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/kube/access"
	"github.com/mesh-verify/mesh-verify/runner"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

type rbacFlags struct {
	namespace      string
	serviceAccount string
	clusterWide    bool
	cluster        string
	set            []string
	// workers is --workers: attack.workers, as run --workers sets it.
	workers int
	output  string
}

// newRBACCmd is `mesh-verify rbac`: the RBAC manifest generated from the
// permissions package kube declares for every API call (README.md, RBAC).
func newRBACCmd() *cobra.Command {
	var f rbacFlags
	cmd := &cobra.Command{
		Use:   "rbac [SCENARIO]",
		Short: "Print the RBAC manifest (ServiceAccount, Roles, bindings) a run needs",
		Long: `rbac prints, as YAML for kubectl apply, a ServiceAccount and the Roles and bindings
that grant what mesh-verify calls. With a scenario (a file or a built-in name): one
Role per namespace the scenario touches, with only what its features use (the
port-forward's target kind, logs, metrics via proxy or portForward); a ClusterRole
only for cluster-scoped resources (get nodes, metrics via the pod proxy). Without
one: everything mesh-verify can call, in --namespace. --cluster-wide grants the same
through one ClusterRole and ClusterRoleBinding. Apply it in every cluster the
scenario uses (--cluster NAME: only what that scenario cluster needs); --workers N:
what a distributed run of N worker pods needs, as run --workers N. -o json
prints the same objects as one v1 List, which kubectl apply -f takes too.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cliout.Check(f.output, []string{outputYAML, outputJSON}); err != nil {
				return err
			}
			if cmd.Flags().Changed("workers") {
				if f.workers < 0 || f.workers > scenarios.MaxAttackWorkers {
					return exitcode.InvalidInputf("--workers %d: want 0 (attack from this process) to %d worker pods", f.workers, scenarios.MaxAttackWorkers)
				}
				if len(args) == 0 {
					return exitcode.InvalidInputf("--workers needs a scenario (without one the manifest grants every feature, the workers' included)")
				}
				f.set = append(slices.Clone(f.set), "attack.workers="+strconv.Itoa(f.workers))
			}
			return printRBAC(cmd, args, f)
		},
	}
	cmd.Flags().StringVarP(&f.namespace, "namespace", "n", access.DefaultRBACNamespace, "namespace of the ServiceAccount; with a scenario also every namespace it leaves unset, as run -n does (without one: the namespace the Role grants in)")
	cmd.Flags().StringArrayVar(&f.set, "set", nil, "override a scenario field before it is validated, PATH=VALUE, as run --set does (repeatable)")
	cmd.Flags().StringVar(&f.serviceAccount, "service-account", access.DefaultServiceAccount, "name of the ServiceAccount, and of its Roles and bindings")
	cmd.Flags().BoolVar(&f.clusterWide, "cluster-wide", false, "one ClusterRole and ClusterRoleBinding instead of a Role per namespace")
	cmd.Flags().StringVar(&f.cluster, "cluster", "", "only what this scenario cluster needs (default: every cluster's, merged)")
	cliout.AddFlag(cmd, &f.output, outputYAML, []string{outputYAML, outputJSON}, "yaml (documents for kubectl apply, after a comment saying what they grant), or json (one v1 List of the same objects)")
	cmd.Flags().IntVar(&f.workers, "workers", 0, "what a distributed run of N worker pods needs (the Job, its ConfigMap and Secret, the workers' ServiceAccount and Role), as run --workers N: sets attack.workers")
	return cmd
}

func printRBAC(cmd *cobra.Command, args []string, f rbacFlags) error {
	if errs := validation.IsDNS1123Label(f.namespace); len(errs) > 0 {
		return exitcode.InvalidInputf("--namespace %q: %s", f.namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(f.serviceAccount); len(errs) > 0 {
		return exitcode.InvalidInputf("--service-account %q: %s", f.serviceAccount, strings.Join(errs, "; "))
	}
	o := access.ManifestOptions{ServiceAccount: f.serviceAccount, Namespace: f.namespace, ClusterWide: f.clusterWide}
	header := []string{"mesh-verify rbac: what mesh-verify calls (README.md, RBAC); apply it with kubectl apply -f in every cluster a run uses."}
	if len(args) == 1 {
		sc, _, err := loadScenario(args[0], f.set)
		if err != nil {
			return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
		}
		var clusters []string
		for _, c := range sc.Clusters {
			clusters = append(clusters, c.Name)
		}
		if f.cluster != "" && !slices.Contains(clusters, f.cluster) {
			return exitcode.InvalidInputf("--cluster %s: scenario %s declares no such cluster (clusters: %s)", f.cluster, args[0], strings.Join(clusters, ", "))
		}
		// The workers run as the scenario's attack.serviceAccount (its
		// default when left out): the manifest creates and binds that one.
		o.WorkerServiceAccount = sc.Attack.ServiceAccount
		for _, n := range runner.NeedsIn(sc, f.namespace) {
			if f.cluster == "" || n.Cluster == f.cluster {
				o.Needs = append(o.Needs, n)
			}
		}
		if len(o.Needs) == 0 {
			where := "it"
			if f.cluster != "" {
				where = "cluster " + f.cluster
			}
			return exitcode.InvalidInputf("scenario %s makes no Kubernetes API call in %s (a plain target.url and nothing observed there): it needs no RBAC", args[0], where)
		}
		header = append(header, fmt.Sprintf("Scenario %s: %s.", sc.Metadata.Name, describeNeeds(o.Needs, f.cluster)))
	} else if f.cluster != "" {
		return exitcode.InvalidInputf("--cluster %s needs a scenario", f.cluster)
	} else if len(f.set) > 0 {
		return exitcode.InvalidInputf("--set needs a scenario")
	} else {
		header = append(header, "Every feature (inventory, port-forward to pod/svc/deploy, logs, metrics via proxy or portForward, worker Jobs and their ServiceAccount).")
	}
	write := func() error {
		return access.WriteManifest(cmd.OutOrStdout(), strings.Join(header, "\n"), access.Manifest(o))
	}
	if f.output == outputJSON {
		write = func() error { return access.WriteManifestJSON(cmd.OutOrStdout(), access.Manifest(o)) }
	}
	if err := write(); err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("print the RBAC manifest: %w", err)}
	}
	return nil
}

// describeNeeds says which features a manifest grants, and where.
func describeNeeds(needs []access.Need, cluster string) string {
	byFeature := map[access.Feature][]string{}
	for _, n := range needs {
		if n.Feature == access.FeatureConnect {
			continue
		}
		where := n.Namespace
		if cluster == "" {
			where = n.Cluster + "/" + n.Namespace
		}
		if n.TargetKind != "" {
			where += " (" + n.TargetKind + ")"
		}
		if !slices.Contains(byFeature[n.Feature], where) {
			byFeature[n.Feature] = append(byFeature[n.Feature], where)
		}
	}
	var parts []string
	for _, f := range access.AllFeatures() {
		if w := byFeature[f]; len(w) > 0 {
			parts = append(parts, string(f)+" in "+strings.Join(w, ", "))
		}
	}
	return strings.Join(parts, "; ")
}
