package main

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/internal/yamlfiles"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
)

// registerCompletions completes up --topology with the built-in
// topologies and YAML files (mesh-verify-lab completion bash|zsh|fish|
// powershell, cobra's; `mesh-verify lab` completes through it).
func registerCompletions(root *cobra.Command) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Flags().Lookup("topology") != nil {
			_ = c.RegisterFlagCompletionFunc("topology", topologyFlag)
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

// topologyFlag completes --topology: the built-in topologies and YAML files.
func topologyFlag(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	var out []string
	for _, n := range topologies.Names() {
		if strings.HasPrefix(n, toComplete) {
			out = append(out, n)
		}
	}
	return append(out, yamlfiles.Complete(toComplete)...), cobra.ShellCompDirectiveNoFileComp
}
