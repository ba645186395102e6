package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
)

// The formats of -o/--output (internal/cliout), by shorter names here.
const (
	outputTable = cliout.Table
	outputJSON  = cliout.JSON
	outputMD    = cliout.MD
	outputYAML  = cliout.YAML
	outputText  = cliout.Text
	outputHTML  = cliout.HTML
)

// addFormatAlias keeps the hidden -f/--format a command had before
// -o/--output, bound to the same value.
func addFormatAlias(cmd *cobra.Command, o *string, def string) {
	cmd.Flags().StringVarP(o, "format", "f", def, "same as --output")
	_ = cmd.Flags().MarkHidden("format")
}

// applyFormatAlias refuses -f with -o, and notes on stderr that -f is
// the old name.
func applyFormatAlias(cmd *cobra.Command) error {
	fl := cmd.Flags()
	if !fl.Changed("format") {
		return nil
	}
	if fl.Changed("output") {
		return exitcode.InvalidInputf("give --output or its old name --format, not both")
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "mesh-verify: --format is deprecated, use --output")
	return nil
}

// outputName is the name of the output flag the user gave: --format for
// the old name, else --output; errors quote it.
func outputName(cmd *cobra.Command) string {
	if cmd.Flags().Lookup("format") != nil && cmd.Flags().Changed("format") {
		return "--format"
	}
	return "--output"
}
