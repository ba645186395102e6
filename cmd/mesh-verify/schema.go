package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/reports"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// schemas are the JSON Schemas `mesh-verify schema` prints, by name
// (docs/report-format.md).
func schemas() map[string]func() []byte {
	return map[string]func() []byte{"report": reports.JSONSchema, "scenario": scenarios.JSONSchema}
}

func newSchemaCmd() *cobra.Command {
	names := slices.Sorted(maps.Keys(schemas()))
	var output string
	cmd := &cobra.Command{
		Use:   "schema report|scenario",
		Short: "Print the JSON Schema of report.json or of a scenario file",
		Long: `schema prints the JSON Schema (draft 2020-12) of report.json (report) or of a
scenario file (scenario), for validators and editors; see docs/report-format.md.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: names,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cliout.Check(output, []string{outputJSON}); err != nil {
				return err
			}
			schema, ok := schemas()[args[0]]
			if !ok {
				return exitcode.InvalidInputf("no schema %q: want %s", args[0], strings.Join(names, " or "))
			}
			if _, err := cmd.OutOrStdout().Write(schema()); err != nil {
				return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("print the %s schema: %w", args[0], err)}
			}
			return nil
		},
	}
	// A JSON Schema is JSON: -o json is accepted for the one grammar.
	cliout.AddFlag(cmd, &output, outputJSON, []string{outputJSON}, "json (the only format of a JSON Schema)")
	return cmd
}
