//go:build unix

package main

import (
	"os"
	"syscall"
)

// canExec: the lab program can replace this process.
const canExec = true

// execLab replaces this process with the lab program (execve), as kubectl
// runs a plugin; it returns only if that fails.
func execLab(path string, args []string) error {
	return syscall.Exec(path, append([]string{path}, args...), os.Environ())
}
