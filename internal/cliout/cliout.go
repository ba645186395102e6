// Package cliout is the one output grammar of mesh-verify's commands and
// mesh-verify-lab's (README.md, "Output formats"): -o/--output with the
// formats a command prints, completed by the shell and checked with an
// error naming the flag and its values; the hidden --json alias; one JSON
// document on stdout.
package cliout

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
	Table = "table"
	JSON  = "json"
	MD    = "md"
	YAML  = "yaml"
	Text  = "text"
	HTML  = "html"
)

// AddFlag adds -o/--output with its default and allowed values, and
// their shell completion, to cmd.
func AddFlag(cmd *cobra.Command, o *string, def string, allowed []string, help string) {
	cmd.Flags().StringVarP(o, "output", "o", def, help)
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(allowed, cobra.ShellCompDirectiveNoFileComp))
}

// Check refuses a value of -o/--output that the command cannot
// print, naming the flag and the values it takes.
func Check(o string, allowed []string) error {
	if slices.Contains(allowed, o) {
		return nil
	}
	return exitcode.InvalidInputf("--output %q: want %s", o, OrList(allowed))
}

// OrList is "a, b or c".
func OrList(v []string) string {
	if len(v) < 2 {
		return strings.Join(v, "")
	}
	return strings.Join(v[:len(v)-1], ", ") + " or " + v[len(v)-1]
}

// AddJSONAlias adds the hidden --json a command had before -o json. Hidden,
// not MarkDeprecated: cobra prints a deprecation notice on the command's
// output, stdout here, which would break `--json | jq`.
func AddJSONAlias(cmd *cobra.Command, asJSON *bool) {
	cmd.Flags().BoolVar(asJSON, "json", false, "same as --output json")
	_ = cmd.Flags().MarkHidden("json")
}

// ApplyJSONAlias turns --json into --output json, with the notice on
// stderr only: stdout is the document. --json with another -o is refused.
func ApplyJSONAlias(cmd *cobra.Command, asJSON bool, o *string) error {
	if !asJSON {
		return nil
	}
	if cmd.Flags().Changed("output") && *o != JSON {
		return exitcode.InvalidInputf("--json is --output json: it cannot be given with --output %s", *o)
	}
	fmt.Fprintln(cmd.ErrOrStderr(), "mesh-verify: --json is deprecated, use --output json")
	*o = JSON
	return nil
}

// WriteJSON writes v as one indented JSON document.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("print JSON: %w", err)}
	}
	return nil
}
