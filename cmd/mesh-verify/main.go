// Command mesh-verify checks where a multi-cluster service mesh really sends
// traffic and gives a verdict a CI gate can trust. The CLI is a thin shell:
// every decision lives in the packages it wires together.
package main

import (
	"os"
)

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}
