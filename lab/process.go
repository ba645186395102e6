package lab

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// DaemonCommand builds the command that runs the lab daemon for dir. The
// default is this executable's `lab serve --dir DIR`; tests substitute
// their own binary. The command line must contain dir: that is how a pid
// is recognised as the lab's (a pid file may outlive its process, and
// pids are reused).
type DaemonCommand func(dir string) (*exec.Cmd, error)

// SelfDaemon runs `<this executable> lab serve --dir DIR`.
func SelfDaemon(dir string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the mesh-verify executable to run the lab daemon: %w", err)
	}
	return exec.Command(exe, "lab", "serve", "--dir", dir), nil
}

// startDaemon starts the daemon detached (its own session, so a Ctrl-C
// in the terminal of `lab up` does not reach it), with its own log file,
// and records its pid. exited is closed if the daemon ends while this
// process runs: exact, unlike reading /proc, where a process in the middle
// of exec has no command line yet.
func startDaemon(dir string, mk DaemonCommand) (pid int, exited <-chan struct{}, err error) {
	cmd, err := mk(dir)
	if err != nil {
		return 0, nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, daemonLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return 0, nil, fmt.Errorf("open lab daemon log: %w", err)
	}
	defer logf.Close()
	cmd.Stdin = nil
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, nil, fmt.Errorf("start lab daemon %s: %w", cmd.Path, err)
	}
	pid = cmd.Process.Pid
	done := make(chan struct{})
	// Reap it if it exits while we still run (tests, or a failed up);
	// after `lab up` exits, init does.
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	if err := os.WriteFile(filepath.Join(dir, daemon.PIDFile), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		return 0, nil, fmt.Errorf("write lab daemon pid file: %w", err)
	}
	return pid, done, nil
}

// daemonPID returns the pid in dir's pid file if that process is alive
// and is this lab's daemon, else 0.
func daemonPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, daemon.PIDFile))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if !labProcess(pid, dir) {
		return 0
	}
	return pid
}

// labProcess reports whether pid is alive (not a zombie) and its command
// line names dir.
func labProcess(pid int, dir string) bool {
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(dir)) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name, which may hold spaces.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z' && s[i+2] != 'X'
	}
	return false
}

// stopDaemon stops dir's daemon: SIGTERM, then SIGKILL after grace. It
// returns the pid it stopped (0 when none was running).
func stopDaemon(dir string, grace time.Duration) (int, error) {
	pid := daemonPID(dir)
	if pid == 0 {
		return 0, nil
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	if waitGone(pid, dir, grace) {
		return pid, nil
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
	if waitGone(pid, dir, 5*time.Second) {
		return pid, nil
	}
	return pid, fmt.Errorf("lab daemon pid %d did not stop", pid)
}

func waitGone(pid int, dir string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for labProcess(pid, dir) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
	return true
}

// killLeftovers ends what Leftovers found (processes whose command line
// points into our lab directory, so they are ours) by pid.
func killLeftovers(left []string) {
	for _, l := range left {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err == nil && pid > 1 && pid != os.Getpid() {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
