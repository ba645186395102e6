// Command mesh-verify checks where a multi-cluster service mesh really sends
// traffic and gives a verdict a CI gate can trust. The CLI is a thin shell:
// every decision lives in the packages it wires together.
package main

import (
	"os"

	"github.com/mesh-verify/mesh-verify/kube"
)

func main() {
	// client-go runs a kubeconfig's exec plugin through this binary, so
	// that a refresh mid-run is bounded by --exec-timeout (kube/execwrap.go).
	if kube.IsExecWrapperCall(os.Args) {
		os.Exit(kube.RunExecWrapper(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
