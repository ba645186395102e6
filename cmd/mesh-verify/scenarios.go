package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/scenarios"
)

// loadScenario loads what run, validate and plan are given: the scenario
// file at arg when there is one, else the built-in scenario named arg
// (scenarios/catalog), with the --set overrides applied before it is
// decoded (scenarios/set.go). source is the YAML as run: the file's bytes
// or the built-in's as shipped, re-encoded with the overrides when there
// are any, for the run directory's scenario.yaml. An arg that is neither
// names both possibilities and the built-ins.
func loadScenario(arg string, set []string) (sc *scenarios.Scenario, source []byte, err error) {
	sets, err := scenarios.ParseSets(set)
	if err != nil {
		return nil, nil, err
	}
	if _, serr := os.Stat(arg); serr == nil || !errors.Is(serr, fs.ErrNotExist) {
		// A file, or a path that exists but cannot be read: Load says why.
		return scenarios.LoadWithSets(arg, sets)
	}
	if !slices.Contains(scenarios.BuiltinNames(), arg) {
		return nil, nil, fmt.Errorf("no file %s and no built-in scenario %s; built-in: %s (mesh-verify scenarios list)",
			arg, arg, strings.Join(scenarios.BuiltinNames(), ", "))
	}
	if source, err = scenarios.BuiltinSource(arg); err != nil {
		return nil, nil, err
	}
	if sc, source, err = scenarios.ParseWithSets("builtin:"+arg, source, sets); err != nil {
		return nil, nil, err
	}
	sc.File = "" // a built-in has no path on disk (scenarios.Builtin)
	return sc, source, nil
}

// builtinArg is the completion of a built-in scenario's name.
func builtinArg(_ *cobra.Command, args []string, _ string) ([]string, cobra.ShellCompDirective) {
	if len(args) > 0 {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return scenarios.BuiltinNames(), cobra.ShellCompDirectiveNoFileComp
}

func newScenariosCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "scenarios",
		Short: "List, show and copy the built-in scenarios (run NAME runs one)",
		Long: `The built-in scenarios check the seed experiments in the local lab (mesh-verify
lab list): scenarios list names them, scenarios show NAME prints one as shipped, and
scenarios init NAME > my.yaml writes a copy to adapt to your clusters, with a header
saying what to change. run, validate and plan take a built-in's name where a file
is expected (a file of that name wins).`,
	}
	cmd.AddCommand(newScenariosListCmd(), newScenariosShowCmd(), newScenariosInitCmd())
	return cmd
}

// builtinEntry is one line of scenarios list -o json|yaml.
type builtinEntry struct {
	Name        string `json:"name"`
	Description string `json:"description"`
}

func newScenariosListCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the built-in scenarios with their descriptions",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cliout.Check(output, []string{outputTable, outputJSON, outputYAML}); err != nil {
				return err
			}
			list := []builtinEntry{}
			for _, n := range scenarios.BuiltinNames() {
				sc, err := scenarios.Builtin(n)
				if err != nil {
					return &exitcode.Error{Code: exitcode.Setup, Err: err}
				}
				list = append(list, builtinEntry{n, sc.Metadata.Description})
			}
			out := cmd.OutOrStdout()
			switch output {
			case outputJSON:
				return cliout.WriteJSON(out, list)
			case outputYAML:
				y, err := yaml.Marshal(list)
				if err != nil {
					return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("print the built-in scenarios as YAML: %w", err)}
				}
				_, err = out.Write(y)
				return err
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintln(tw, "SCENARIO\tDESCRIPTION")
			for _, e := range list {
				fmt.Fprintf(tw, "%s\t%s\n", e.Name, e.Description)
			}
			return tw.Flush()
		},
	}
	cliout.AddFlag(cmd, &output, outputTable, []string{outputTable, outputJSON, outputYAML}, "table, json (an array of name and description) or yaml (the same)")
	return cmd
}

func newScenariosShowCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:               "show NAME",
		Short:             "Print a built-in scenario as shipped",
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: builtinArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cliout.Check(output, []string{outputYAML, outputJSON}); err != nil {
				return err
			}
			src, err := scenarios.BuiltinSource(args[0])
			if err != nil {
				return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
			}
			if output == outputJSON {
				// The same document without its comments; a built-in is
				// valid YAML, so a conversion error is this build's fault.
				j, err := yaml.YAMLToJSON(src)
				if err != nil {
					return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("built-in scenario %s as JSON: %w", args[0], err)}
				}
				var v any
				if err := json.Unmarshal(j, &v); err != nil {
					return &exitcode.Error{Code: exitcode.Setup, Err: fmt.Errorf("built-in scenario %s as JSON: %w", args[0], err)}
				}
				return cliout.WriteJSON(cmd.OutOrStdout(), v)
			}
			if _, err := cmd.OutOrStdout().Write(src); err != nil {
				return &exitcode.Error{Code: exitcode.Setup, Err: err}
			}
			return nil
		},
	}
	cliout.AddFlag(cmd, &output, outputYAML, []string{outputYAML, outputJSON}, "yaml (as shipped, with its comments), or json (the same document, without them)")
	return cmd
}

func newScenariosInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "init NAME",
		Short: "Print a built-in scenario to adapt: mesh-verify scenarios init NAME > my.yaml",
		Long: `init prints the built-in scenario NAME as shipped, under a header that says what to
change for your clusters (contexts, namespaces, target, selectors, expectations) and a
yaml-language-server line pointing at the published scenario schema, for completion
and checks in editors. The file loads as it is: mesh-verify validate my.yaml.`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: builtinArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			out, err := initScenario(args[0])
			if err != nil {
				return &exitcode.Error{Code: exitcode.InvalidInput, Err: err}
			}
			if _, err := cmd.OutOrStdout().Write(out); err != nil {
				return &exitcode.Error{Code: exitcode.Setup, Err: err}
			}
			return nil
		},
	}
}

// modeline is the yaml-language-server line that names a file's schema.
var modeline = regexp.MustCompile(`^#\s*yaml-language-server:`)

// releaseTag is a version the repository has a tag of (the Makefile
// stamps `git describe`, which is the tag exactly on a tagged commit).
var releaseTag = regexp.MustCompile(`^v\d+\.\d+\.\d+(-(alpha|beta|rc)[.0-9]*)?$`)

// scenarioSchemaURL is where the scenario schema is published: the
// repository's scenarios/scenario.schema.json, at this build's release tag,
// else on main.
func scenarioSchemaURL() string {
	ref := "main"
	if v := toolInfo().Version; releaseTag.MatchString(v) {
		ref = v
	}
	return "https://raw.githubusercontent.com/mesh-verify/mesh-verify/" + ref + "/scenarios/scenario.schema.json"
}

// initScenario is the built-in scenario name as shipped, its own modeline
// (relative to the repository) replaced by the published schema's and a
// header saying what to change for another mesh, from what it says.
func initScenario(name string) ([]byte, error) {
	src, err := scenarios.BuiltinSource(name)
	if err != nil {
		return nil, err
	}
	sc, err := scenarios.Builtin(name)
	if err != nil {
		return nil, err
	}
	if first, rest, ok := bytes.Cut(src, []byte("\n")); ok && modeline.Match(first) {
		src = rest
	}
	var b bytes.Buffer
	p := func(format string, a ...any) { fmt.Fprintf(&b, "# "+format+"\n", a...) }
	fmt.Fprintf(&b, "# yaml-language-server: $schema=%s\n", scenarioSchemaURL())
	p("Made by `mesh-verify scenarios init %s` from the built-in scenario %s, which checks a", name, name)
	p("setup on one machine (mostly mesh-verify's lab; its comments below say which). For your mesh, change:")
	var contexts []string
	for _, c := range sc.Clusters {
		if c.Context != "" && !slices.Contains(contexts, c.Context) {
			contexts = append(contexts, c.Context)
		}
	}
	if len(contexts) > 0 {
		p("  - clusters[].context: %s are the lab's kubeconfig contexts; put yours", strings.Join(contexts, ", "))
		p("    (kubectl config get-contexts), one per cluster name the expectations use")
	} else {
		p("  - clusters: the names the expectations use; give each a context (kubectl config")
		p("    get-contexts) to reach its pods through its API server")
	}
	var namespaces, where []string
	addNS := func(ns, field string) {
		if !slices.Contains(namespaces, ns) {
			namespaces = append(namespaces, ns)
		}
		if !slices.Contains(where, field) {
			where = append(where, field)
		}
	}
	if f := sc.Target.Forward; f != nil {
		addNS(f.Namespace, "target.portForward.namespace")
	}
	for _, w := range sc.Observe {
		addNS(w.Namespace, "observe[].namespace")
	}
	if len(namespaces) > 0 {
		p("  - namespaces: %s here (%s);", strings.Join(namespaces, ", "), strings.Join(where, ", "))
		p("    put where your workloads run")
	}
	if f := sc.Target.Forward; f != nil {
		p("  - target.portForward: its entry is %s port %s in cluster %s;", f.Resource, f.Port, f.Cluster)
		p("    forward to your mesh's entry (a gateway, a router, a caller whose sidecar routes), not")
		p("    to the app, which would bypass the mesh (or give target.url instead)")
	} else {
		p("  - target.url: %s is its entry; put your mesh's (a gateway, a", sc.Target.URL)
		p("    router, a caller whose sidecar routes), not the app itself, which would bypass the mesh")
	}
	for _, w := range sc.Observe {
		p("  - observe[%s].selector: %s selects its pods; select yours", w.Name, w.Selector)
	}
	p("  - expect: the split, mirror and success rate your mesh's configuration promises")
	p("The first line gives editors completion and checks (yaml-language-server); for this build's")
	p("own schema: mesh-verify schema scenario > scenario.schema.json, then $schema=scenario.schema.json.")
	p("Then: mesh-verify validate FILE; mesh-verify plan FILE (enough requests?); mesh-verify run FILE")
	b.WriteString("#\n")
	b.Write(src)
	return b.Bytes(), nil
}
