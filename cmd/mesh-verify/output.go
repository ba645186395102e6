package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/exitcode"
)

// Stdout formats: every command that prints results takes -o/--output
// with the ones it can print (README.md, "Output formats").
const (
	outputTable = "table"
	outputJSON  = "json"
	outputMD    = "md"
	outputYAML  = "yaml"
	outputText  = "text"
	outputHTML  = "html"
)

// addOutputFlag adds -o/--output with its default and allowed values, and
// their shell completion, to cmd.
func addOutputFlag(cmd *cobra.Command, o *string, def string, allowed []string, help string) {
	cmd.Flags().StringVarP(o, "output", "o", def, help)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

// validateOutput refuses a value of -o/--output that the command cannot
// print, naming the flag and the values it takes.
func validateOutput(o string, allowed []string) error {
	if slices.Contains(allowed, o) {
		return nil
	}
	return exitcode.InvalidInputf("--output %q: want %s", o, orList(allowed))
}

// orList is "a, b or c".
func orList(v []string) string {
	if len(v) < 2 {
		return strings.Join(v, "")
	}
	return strings.Join(v[:len(v)-1], ", ") + " or " + v[len(v)-1]
}

// addJSONAlias adds the hidden --json a command had before -o json. Hidden,
// not MarkDeprecated: cobra prints a deprecation notice on the command's
// output, stdout here, which would break `--json | jq`.
func addJSONAlias(cmd *cobra.Command, asJSON *bool) {
	cmd.Flags().BoolVar(asJSON, "json", false, "same as --output json")
	_ = cmd.Flags().MarkHidden("json")
}

// applyJSONAlias turns --json into --output json, with the notice on
// stderr only: stdout is the document.
func applyJSONAlias(cmd *cobra.Command, asJSON bool, o *string) {
	if asJSON {
		fmt.Fprintln(cmd.ErrOrStderr(), "mesh-verify: --json is deprecated, use --output json")
		*o = outputJSON
	}
}

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

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("print JSON: %w", err)}
	}
	return nil
}
