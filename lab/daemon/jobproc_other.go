//go:build !linux

package daemon

import "syscall"

// jobSysProcAttr: a process group of its own; without Linux's
// Pdeathsig a daemon killed with SIGKILL leaves it running.
func jobSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }

// waitExitedNoReap is not available: the caller reaps without signalling
// the group (see the Linux version).
func waitExitedNoReap(int) bool { return false }
