package lab

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/internal/detach"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
)

// DaemonCommand builds the command that runs the lab daemon for dir. The
// default is this executable's `serve --dir DIR` (mesh-verify-lab's);
// tests substitute their own binary. The arguments must be those
// kwok.IsDaemon recognises, `mesh-verify-lab serve --dir DIR` or
// `… lab serve --dir DIR`: that is how a pid is recognised as the lab's
// daemon (a pid file may outlive its process, and pids are reused).
type DaemonCommand func(dir string) (*exec.Cmd, error)

// SelfDaemon runs `<this executable> serve --dir DIR`: this executable
// is mesh-verify-lab.
func SelfDaemon(dir string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the mesh-verify-lab executable to run the lab daemon: %w", err)
	}
	return exec.Command(exe, "serve", "--dir", dir), nil
}

// startDaemon starts the daemon detached (detach.Background: its own
// session, so a Ctrl-C in the terminal of `lab up` does not reach it;
// stdin from /dev/null, stdout and stderr to its log file; none of the
// descriptors `lab up` was started with, so `flock LOCK mesh-verify lab up`
// frees LOCK and `lab up | cat` ends when up returns), and records its pid. exited is closed if the daemon ends while this
// process runs: exact, unlike reading /proc, where a process in the middle
// of exec has no command line yet.
func startDaemon(dir string, mk DaemonCommand) (proc *os.Process, exited <-chan struct{}, err error) {
	cmd, err := mk(dir)
	if err != nil {
		return nil, nil, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, daemonLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, nil, fmt.Errorf("open lab daemon log: %w", err)
	}
	defer logf.Close()
	// A status left by a daemon that died (kill -9 leaves it) describes
	// nothing that runs.
	if err := os.Remove(filepath.Join(dir, daemon.StatusFile)); err != nil && !os.IsNotExist(err) {
		return nil, nil, fmt.Errorf("remove the previous lab daemon's status: %w", err)
	}
	if err := detach.Background(cmd, logf); err != nil {
		return nil, nil, fmt.Errorf("start lab daemon: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("start lab daemon %s: %w", cmd.Path, err)
	}
	pid := cmd.Process.Pid
	done := make(chan struct{})
	// Reap it if it exits while we still run (tests, or a failed up);
	// after `lab up` exits, init does.
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	if err := os.WriteFile(filepath.Join(dir, daemon.PIDFile), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return nil, nil, fmt.Errorf("write lab daemon pid file: %w", err)
	}
	return cmd.Process, done, nil
}

// stopChild stops a daemon startDaemon started in this process: SIGTERM,
// then SIGKILL after grace. Through its *os.Process, so never another
// process that got its pid after it was reaped.
func stopChild(p *os.Process, exited <-chan struct{}, grace time.Duration) error {
	_ = p.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		return nil
	case <-time.After(grace):
	}
	_ = p.Kill()
	select {
	case <-exited:
		return nil
	case <-time.After(5 * time.Second):
		return fmt.Errorf("stop lab daemon pid %d: still running after SIGKILL", p.Pid)
	}
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

// labProcess reports whether pid is alive (not a zombie) and is the lab
// daemon of dir (kwok.IsDaemon).
func labProcess(pid int, dir string) bool {
	p, ok := kwok.ReadProc(pid)
	return ok && kwok.IsDaemon(p.Args, dir)
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

// killLeftovers ends what Leftovers found, by pid, after checking again
// that each pid is still a process of the lab in dir (kwok.Owned): a
// process that merely names the directory is never signalled.
func killLeftovers(dir string, left []string) {
	for _, l := range left {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		if pid, err := strconv.Atoi(f[0]); err == nil && pid > 1 && pid != os.Getpid() && kwok.Owned(pid, dir) {
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
