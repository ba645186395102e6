package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/mesh-verify/mesh-verify/internal/cliout"
	"github.com/mesh-verify/mesh-verify/reports"
)

// A build the Makefile did not stamp takes its version from the build
// info (toolInfo), so that --version says what `version` and report.json
// say.
func init() { version = toolInfo().Version }

// toolInfo is this build: the version the Makefile stamps, else the
// module version Go records (a tag or pseudo-version for `go install
// …@v1.2.3`, and since Go 1.24 for a build from a git checkout, or the
// VCS revision), and the vegeta module it was built with.
func toolInfo() reports.Tool {
	t := reports.Tool{Name: "mesh-verify", Version: version, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return t
	}
	if t.Version == "dev" {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			t.Version = v
		} else if vcs := vcsOf(bi); vcs.Revision != "" {
			t.Version = "dev-" + vcs.Revision[:min(12, len(vcs.Revision))]
			if vcs.Modified {
				t.Version += "-dirty"
			}
		}
	}
	for _, d := range bi.Deps {
		if strings.HasPrefix(d.Path, "github.com/tsenart/vegeta/") {
			t.Vegeta = d.Version
		}
	}
	return t
}

// vcs is what Go records of the checkout a binary was built from: nothing
// for a build with -buildvcs=false, outside a repository, or in a git
// worktree (Go looks for a .git directory, and a worktree has a file).
type vcs struct {
	System   string `json:"vcs,omitempty"`
	Revision string `json:"revision,omitempty"`
	Time     string `json:"time,omitempty"`
	Modified bool   `json:"modified,omitempty"`
}

func vcsOf(bi *debug.BuildInfo) vcs {
	var v vcs
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs":
			v.System = s.Value
		case "vcs.revision":
			v.Revision = s.Value
		case "vcs.time":
			v.Time = s.Value
		case "vcs.modified":
			v.Modified = s.Value == "true"
		}
	}
	return v
}

// versionInfo is what `mesh-verify version` prints: report.json's tool
// and the build's platform and checkout.
type versionInfo struct {
	reports.Tool
	Platform string `json:"platform"`
	vcs
}

func buildVersion() versionInfo {
	v := versionInfo{Tool: toolInfo(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		v.vcs = vcsOf(bi)
	}
	return v
}

// versionOutputs are what version's --output takes: table is text, as
// every other command's default is called.
var versionOutputs = []string{outputText, outputTable, outputJSON}

func newVersionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the version, the Go and vegeta versions and the VCS revision of this build",
		Long: `version prints what this build is: its version (stamped by make build, else the one
Go records from the module or the git checkout), the Go toolchain and the vegeta
module it was built with, and the revision it was built from. report.json records
the same as "tool". --output json prints it as one JSON object.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := buildVersion()
			out := cmd.OutOrStdout()
			if err := cliout.Check(output, versionOutputs); err != nil {
				return err
			}
			if output == outputJSON {
				return cliout.WriteJSON(out, v)
			}
			revision := "unknown: the build recorded no checkout (go build -buildvcs=false, or not in a git clone)"
			if v.Revision != "" {
				revision = v.Revision
				if v.Time != "" {
					revision += " (" + v.Time + ")"
				}
				if v.Modified {
					revision += ", with uncommitted changes"
				}
			}
			vegeta := v.Vegeta
			if vegeta == "" {
				vegeta = "unknown"
			}
			tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
			fmt.Fprintf(tw, "%s\t%s\n", v.Name, v.Version)
			fmt.Fprintf(tw, "go\t%s %s\n", v.Go, v.Platform)
			fmt.Fprintf(tw, "vegeta\t%s\n", vegeta)
			fmt.Fprintf(tw, "revision\t%s\n", revision)
			return tw.Flush()
		},
	}
	cliout.AddFlag(cmd, &output, outputText, versionOutputs, "text (table is the same), or json (one object)")
	return cmd
}
