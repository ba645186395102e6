//go:build !unix

package main

// canExec: no execve here, so runLab runs the lab program as a child.
const canExec = false

func execLab(string, []string) error { return nil }
