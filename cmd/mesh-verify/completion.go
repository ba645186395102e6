package main

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mesh-verify/mesh-verify/internal/yamlfiles"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// registerCompletions adds shell completion (mesh-verify completion bash|
// zsh|fish|powershell, cobra's) where the values come from elsewhere than
// the flag's own definition: scenario arguments (the built-in names and
// the YAML files and directories at hand), --context (the kubeconfig's
// contexts; CLUSTER=CONTEXT after the scenario's cluster names); -o is
// completed where it is added (addOutputFlag); `lab` asks mesh-verify-lab (lab.go). It walks the finished
// command tree, so each command keeps its own file.
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch c.Name() {
		case "run", "validate", "plan", "rbac":
			if c.Parent() == root {
				c.ValidArgsFunction = scenarioArg
			}
		}
		if c.Flags().Lookup("context") != nil {
			_ = c.RegisterFlagCompletionFunc("context", contextFlag)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// scenarioArg completes a scenario: the built-in names, and the YAML files
// and directories matching what is typed. validate and run take several,
// plan and rbac one.
func scenarioArg(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 && (cmd.Name() == "plan" || cmd.Name() == "rbac") {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, n := range scenarios.BuiltinNames() {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	d := cobra.ShellCompDirectiveNoFileComp
	for _, f := range yamlfiles.Complete(toComplete) {
		out = append(out, f)
		if strings.HasSuffix(f, "/") {
			// A directory must not end the word: the user goes on
			// typing inside it.
			d |= cobra.ShellCompDirectiveNoSpace
		}
	}
	return out, d
}

// contextFlag completes --context from the kubeconfig the command would
// load (--kubeconfig, else KUBECONFIG, else ~/.kube/config; only read).
// For a scenario command, CLUSTER= is offered first, then that cluster's
// contexts after it.
func contextFlag(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if f := cmd.Flags().Lookup("kubeconfig"); f != nil && f.Changed {
		if paths, err := cmd.Flags().GetStringSlice("kubeconfig"); err == nil && len(paths) > 0 {
			rules.Precedence = paths
		} else if p := f.Value.String(); p != "" {
			rules.Precedence = strings.Split(strings.Trim(p, "[]"), ",")
		}
	}
	var contexts []string
	if cfg, err := rules.Load(); err == nil {
		for name := range cfg.Contexts {
			contexts = append(contexts, name)
		}
	}
	slices.Sort(contexts)
	var clusters []string
	if len(args) > 0 && cmd.ValidArgsFunction != nil {
		if sc, _, err := loadScenario(args[0], nil); err == nil {
			clusters = sc.ClusterNames()
		}
	}
	prefix := ""
	if cluster, rest, ok := strings.Cut(toComplete, "="); ok {
		prefix, toComplete = cluster+"=", rest
	} else if len(clusters) > 1 {
		var out []string
		for _, c := range clusters {
			if strings.HasPrefix(c, toComplete) {
				out = append(out, c+"=")
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveNoSpace
	}
	var out []string
	for _, c := range contexts {
		if strings.HasPrefix(c, toComplete) {
			out = append(out, prefix+c)
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
