// Package detach keeps the processes the lab leaves running in the
// background (its daemon, the kwok clusters' etcd, kube-apiserver and
// controllers, nginx) from holding on to what their caller had open.
//
// Go opens every descriptor close-on-exec, so os/exec hands a child only
// its stdin, stdout, stderr and ExtraFiles, except for the descriptors
// this process inherited without close-on-exec: those every child gets,
// and its children after it. `flock LOCK mesh-verify lab up` starts
// mesh-verify with LOCK open on descriptor 3; a shell, CI runner or make
// may leave a pipe open on another. A background process that inherits
// them keeps the lock held and the pipe open (its reader never sees the
// end) for as long as the lab runs.
package detach

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// Inherited lists this process's open descriptors 3 and above that are
// not close-on-exec: what it was started with beyond stdio. Go opens none
// of its own that way.
func Inherited() ([]int, error) {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return nil, fmt.Errorf("list open descriptors: %w", err)
	}
	var out []int
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd < 3 {
			continue
		}
		flags, _, errno := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_GETFD, 0)
		if errno != 0 {
			continue // the directory's own descriptor, closed since
		}
		if flags&syscall.FD_CLOEXEC == 0 {
			out = append(out, fd)
		}
	}
	return out, nil
}

// CloseOnExec marks every inherited descriptor close-on-exec: this
// process keeps them (a lock its caller took stays held while it runs),
// but no process it starts from now on gets them.
func CloseOnExec() error {
	fds, err := Inherited()
	if err != nil {
		return err
	}
	for _, fd := range fds {
		syscall.CloseOnExec(fd)
	}
	return nil
}

// CloseInherited closes every inherited descriptor and returns them: for
// a daemon, which has no use for what it was started with beyond stdio,
// whoever started it. Call it before starting goroutines that open files.
func CloseInherited() ([]int, error) {
	fds, err := Inherited()
	if err != nil {
		return nil, err
	}
	for _, fd := range fds {
		_ = syscall.Close(fd)
	}
	return fds, nil
}

// Background prepares cmd to run in the background, outliving its
// caller: stdin from /dev/null, stdout and stderr to log, a session of its
// own (no signal of the caller's terminal reaches it, and its process
// group id is its pid), and no descriptor of the caller's (CloseOnExec).
// cmd must have no ExtraFiles.
func Background(cmd *exec.Cmd, log *os.File) error {
	if len(cmd.ExtraFiles) > 0 {
		return fmt.Errorf("background process %s: no descriptor beyond stdio may be passed", cmd.Path)
	}
	if err := CloseOnExec(); err != nil {
		return fmt.Errorf("background process %s: %w", cmd.Path, err)
	}
	cmd.Stdin = nil // os/exec opens /dev/null
	cmd.Stdout, cmd.Stderr = log, log
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setsid = true
	cmd.SysProcAttr.Setpgid = false // Setsid makes it a group leader; both would fail (EPERM)
	return nil
}
