package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/lab/nginx"
)

// `flock LOCK mesh-verify lab up` (mesh-verify-lab up, which `mesh-verify
// lab` execs in its own process) returns and LOCK is free while the lab
// runs; `mesh-verify lab up | cat` ends when up returns: no process the
// lab leaves running (its daemon, kwok's etcd, kube-apiserver, controllers
// and kwok, nginx) holds the lock or the pipe, has stdin other than
// /dev/null, or shares the caller's session.
//
// up's stdout is a pipe, as in `lab up | cat`, and the same pipe is also
// open on descriptor 3, as a shell, a CI runner or make leaves descriptors
// open on the commands it starts (`lab up 3>&1 | cat`): os/exec hands such
// inherited descriptors to every child.
func TestLabUpDetachesFromItsCaller(t *testing.T) {
	bin := labtest.Binaries(t)
	flock, err := exec.LookPath("flock")
	if err != nil {
		t.Skip("no flock(1) (util-linux)")
	}
	dir, err := os.MkdirTemp("", "mvlab-") // short: kwokctl puts unix sockets in it
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	lockPath := filepath.Join(tmp, "lock")
	topology := writeFile(t, tmp, "one.yaml", labtest.OneCluster)
	env := append(os.Environ(), "MESH_VERIFY_LAB_BIN="+string(bin))
	labDown := func() (string, error) {
		cmd := exec.Command(binary, "down", "--dir", dir)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		if out, err := labDown(); err != nil {
			t.Errorf("lab down: %v\n%s", err, out)
		}
		if left := labProcesses(dir); len(left) > 0 {
			t.Errorf("processes of the lab left running: %v", left)
		}
		os.RemoveAll(dir)
	})

	args := []string{lockPath, binary, "up", "--dir", dir, "--topology", topology}
	if _, err := nginx.Find(); err == nil {
		args = append(args, "--data-plane", "nginx") // nginx is a background process too
	} else {
		t.Logf("nginx not installed: the lab runs the simulator only (%v)", err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	pipe := pipeTarget(t, w)
	stderr, err := os.Create(filepath.Join(tmp, "up.stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	up := exec.Command(flock, args...)
	up.Env = env
	up.Stdout, up.Stderr = w, stderr
	up.ExtraFiles = []*os.File{w}
	up.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // stopped as a group (flock and mesh-verify-lab) if it hangs
	start := time.Now()
	if err := up.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	read := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(r)
		read <- b
	}()
	exited := make(chan error, 1)
	go func() { exited <- up.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("flock LOCK mesh-verify lab up: %v\n%s", err, readFileString(stderr.Name()))
		}
	case <-time.After(3 * time.Minute):
		_ = syscall.Kill(-up.Process.Pid, syscall.SIGKILL)
		<-exited
		t.Fatalf("flock LOCK mesh-verify lab up did not return within 3 minutes:\n%s", readFileString(stderr.Name()))
	}
	t.Logf("lab up returned after %.1fs", time.Since(start).Seconds())

	// `lab up | cat`: cat sees the end once up has exited.
	select {
	case out := <-read:
		if !strings.Contains(string(out), "lab one in "+dir) {
			t.Errorf("lab up printed no status on stdout:\n%s", out)
		}
	case <-time.After(10 * time.Second):
		t.Errorf("lab up exited but its stdout pipe is still open 10s later, held by: %v", holders(pipe))
	}
	// The lock flock took for lab up is free.
	if out, err := exec.Command(flock, "-n", lockPath, "true").CombinedOutput(); err != nil {
		t.Errorf("flock -n LOCK true: %v (the lock is still held, by: %v)\n%s", err, holders(lockPath), out)
	}

	pids := recordedPIDs(t, dir)
	for _, pid := range labProcesses(dir) {
		if !slices.Contains(pids, pid) {
			pids = append(pids, pid)
		}
	}
	if len(pids) < 6 { // the daemon and kwok's five
		t.Errorf("found only the lab processes %v", pids)
	}
	mySession := sessionOf(t, os.Getpid())
	for _, pid := range pids {
		what := fmt.Sprintf("pid %d (%s)", pid, cmdline(pid))
		fds := openFDs(pid)
		if len(fds) == 0 {
			t.Errorf("%s: no descriptor readable in /proc", what)
			continue
		}
		for fd, target := range fds {
			if target == pipe || target == lockPath {
				t.Errorf("%s holds the caller's %s on descriptor %d", what, target, fd)
			}
		}
		if fds[0] != "/dev/null" {
			t.Errorf("%s: stdin is %q, want /dev/null", what, fds[0])
		}
		if s := sessionOf(t, pid); s == mySession {
			t.Errorf("%s is in the caller's session %d", what, s)
		}
	}
	t.Logf("checked the descriptors and session of lab processes %v", pids)

	if out, err := labDown(); err != nil {
		t.Fatalf("lab down: %v\n%s", err, out)
	}
	if left := labProcesses(dir); len(left) > 0 {
		t.Errorf("lab down left processes running: %v", left)
	}
}

// recordedPIDs are the pids the lab records: its daemon's pid file and
// kwokctl's pid file per component.
func recordedPIDs(t *testing.T, dir string) []int {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(dir, "kwok", "clusters", "*", "pids", "*.pid"))
	files = append(files, filepath.Join(dir, "daemon.pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Errorf("pid file: %v", err)
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			t.Errorf("pid file %s: %v", f, err)
			continue
		}
		if !kwok.Owned(pid, dir) {
			t.Errorf("pid file %s names pid %d, which is not a running process of the lab", f, pid)
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

// labProcesses lists the running processes of the lab in dir (kwok.Owned).
func labProcesses(dir string) []int {
	var out []int
	for _, pid := range allPIDs() {
		if kwok.Owned(pid, dir) {
			out = append(out, pid)
		}
	}
	return out
}

func allPIDs() []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// openFDs maps the open descriptors of pid to what they point at.
func openFDs(pid int) map[int]string {
	base := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, _ := os.ReadDir(base)
	out := map[int]string{}
	for _, e := range entries {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if target, err := os.Readlink(filepath.Join(base, e.Name())); err == nil {
			out[fd] = target
		}
	}
	return out
}

// holders names the other processes with a descriptor on target.
func holders(target string) []string {
	var out []string
	for _, pid := range allPIDs() {
		if pid == os.Getpid() {
			continue // the test holds the pipe's read end
		}
		for _, t := range openFDs(pid) {
			if t == target {
				out = append(out, fmt.Sprintf("%d (%s)", pid, cmdline(pid)))
				break
			}
		}
	}
	return out
}

func cmdline(pid int) string {
	b, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
	s := strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
	if len(s) > 80 {
		s = s[:80] + "…"
	}
	return s
}

// sessionOf reads the session id from /proc/PID/stat (the sixth field;
// the command name before it may hold spaces).
func sessionOf(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		t.Errorf("session of pid %d: %v", pid, err)
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state ppid pgrp session …
	sid, _ := strconv.Atoi(f[3])
	return sid
}

// pipeTarget is how /proc shows a descriptor of f's pipe.
func pipeTarget(t *testing.T, f *os.File) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("pipe:[%d]", st.Ino)
}

func readFileString(path string) string {
	b, _ := os.ReadFile(path)
	return string(bytes.TrimSpace(b))
}
