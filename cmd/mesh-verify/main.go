// Command mesh-verify checks where a multi-cluster service mesh really sends
// traffic and gives a verdict a CI gate can trust. The CLI is a thin shell:
// every decision lives in the packages it wires together.
package main

import (
	"os"
	"runtime/debug"

	"github.com/mesh-verify/mesh-verify/kube"
)

func main() {
	// client-go runs a kubeconfig's exec plugin through this binary, so
	// that a refresh mid-run is bounded by --exec-timeout (kube/execwrap.go).
	if kube.IsExecWrapperCall(os.Args) {
		os.Exit(kube.RunExecWrapper(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	gcPercent(os.Getenv, defaultGCPercent)
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// defaultGCPercent is the collector's target unless GOGC says otherwise.
// A run's live heap is small and does not grow with the run (about 2 MB:
// the recorder's batches and buffers, the attribution queue, each
// connection's buffers), so Go's default of 100 lets the heap double it
// between collections and that slack is most of the process's private
// memory. At 50 the heap stays within 1.5× of what is live: about 1.5 MB
// less private memory for a run and for a worker pod, for about 1% of
// the client's CPU (BENCHMARKS.md; issue 27).
const defaultGCPercent = 50

// gcPercent sets the collector's target unless the user set GOGC (which
// the runtime has already applied, "off" included).
func gcPercent(getenv func(string) string, percent int) {
	if getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
}
