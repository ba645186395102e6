package daemon

import (
	"errors"
	"syscall"
	"unsafe"
)

// jobSysProcAttr starts a Job pod's process in its own process group (so
// the whole container is signalled at once) and has the kernel kill it if
// the daemon dies, as a crashed daemon takes its apps with it.
func jobSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// waitExitedNoReap blocks until process pid has exited but leaves it a
// zombie (waitid with WNOWAIT), so its pid — and the process group id of
// the same number — cannot be reused until exec.Cmd.Wait reaps it: the
// rest of its group can be killed by that id without hitting a stranger.
// It returns false when it could not wait (the caller then reaps without
// signalling the group).
func waitExitedNoReap(pid int) bool {
	const (
		pPID    = 1
		wExited = 0x4
		wNoWait = 0x1000000
	)
	var info [128]byte // siginfo_t
	for {
		_, _, errno := syscall.Syscall6(syscall.SYS_WAITID, pPID, uintptr(pid), uintptr(unsafe.Pointer(&info[0])), wExited|wNoWait, 0, 0)
		if errno == 0 {
			return true
		}
		if !errors.Is(errno, syscall.EINTR) {
			return false
		}
	}
}
