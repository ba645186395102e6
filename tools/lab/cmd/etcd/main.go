// Command etcd is etcd's server, built from the pinned go.etcd.io/etcd/server/v3 module
// (`go install go.etcd.io/etcd/server/v3@...` fails because etcd's go.mod has replace directives).
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
