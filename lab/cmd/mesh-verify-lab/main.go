// Command mesh-verify-lab runs the local lab of mesh-verify: kwok API
// servers, the tutorials' apps and a simulated mesh data plane on
// 127.0.0.1 (lab/README.md). It is a program of its own so that the
// product binary carries none of the lab; `mesh-verify lab ...` runs it
// the way kubectl runs its plugins (cmd/mesh-verify/lab.go).
package main

import (
	"fmt"
	"io"
	"os"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/redact"
)

// version is stamped by the Makefile with -ldflags.
var version = "dev"

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

func execute(args []string, stdout, stderr io.Writer) int {
	root := newLabCmd()
	root.Version = version
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	registerCompletions(root)

	err := root.Execute()
	if err == nil {
		return exitcode.Pass
	}
	code := exitcode.Of(err, exitcode.InvalidInput) // the default: cobra's own errors (unknown flag, wrong args)
	if msg := err.Error(); msg != "" {
		// Errors may quote input verbatim (a topology file's value):
		// redacted like everything mesh-verify shows; prefixed as when
		// the lab was a command of mesh-verify, which users still run.
		fmt.Fprintln(stderr, "mesh-verify:", redact.Message(msg))
	}
	return code
}
