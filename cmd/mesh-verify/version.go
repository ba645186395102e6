package main

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/mesh-verify/mesh-verify/reports"
)

// toolInfo is this build: the version the Makefile stamps, else the
// module version Go records (a tag or pseudo-version for `go install
// …@v1.2.3`, the VCS revision for a build from a checkout), and the
// vegeta module it was built with.
func toolInfo() reports.Tool {
	t := reports.Tool{Name: "mesh-verify", Version: version, Go: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return t
	}
	if t.Version == "dev" {
		if v := bi.Main.Version; v != "" && v != "(devel)" {
			t.Version = v
		} else {
			var rev, modified string
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					rev = s.Value
				case "vcs.modified":
					modified = s.Value
				}
			}
			if rev != "" {
				t.Version = "dev-" + rev[:min(12, len(rev))]
				if modified == "true" {
					t.Version += "-dirty"
				}
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
