// Command mesh-verify-lab runs the local lab of mesh-verify: kwok API
// servers, the tutorials' apps and a simulated mesh data plane on
// 127.0.0.1 (lab/README.md). It is a program of its own so that the
// product binary carries none of the lab; `mesh-verify lab ...` runs it
// the way kubectl runs its plugins (cmd/mesh-verify/lab.go).
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/mesh-verify/mesh-verify/redact"
)

// version is stamped by the Makefile with -ldflags.
var version = "dev"

// The exit codes the lab commands end with: mesh-verify's (README.md,
// exit codes), of which the lab uses these.
const (
	exitPass         = 0
	exitSetup        = 3
	exitInvalidInput = 4
)

// codedError carries an exit code and a message that was not printed yet.
type codedError struct {
	code int
	err  error
}

func (e *codedError) Error() string {
	if e.err == nil {
		return ""
	}
	return e.err.Error()
}

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
		return exitPass
	}
	code := exitInvalidInput // cobra's own errors: unknown flag, wrong args
	var ce *codedError
	if errors.As(err, &ce) {
		code = ce.code
	}
	if msg := err.Error(); msg != "" {
		// Errors may quote input verbatim (a topology file's value):
		// redacted like everything mesh-verify shows; prefixed as when
		// the lab was a command of mesh-verify, which users still run.
		fmt.Fprintln(stderr, "mesh-verify:", redact.Message(msg))
	}
	return code
}
