package detach

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the child whose descriptors are looked at:
// DETACH_TEST_CHILD=fds prints them, =close closes what it inherited
// first, then shows that its runtime still works.
func TestMain(m *testing.M) {
	switch os.Getenv("DETACH_TEST_CHILD") {
	case "fds":
		printFDs(os.Stdout)
		os.Exit(0)
	case "close":
		closed, err := CloseInherited()
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(1)
		}
		fmt.Printf("closed %v\n", closed)
		// Go's own descriptors (netpoll, timers, the cgroup files it reads
		// for GOMAXPROCS) are close-on-exec and must have been left open.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fmt.Println("error: listen after closing:", err)
			os.Exit(1)
		}
		go func() {
			if c, err := ln.Accept(); err == nil {
				c.Close()
			}
		}()
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			fmt.Println("error: dial after closing:", err)
			os.Exit(1)
		}
		c.Close()
		ln.Close()
		time.Sleep(10 * time.Millisecond)
		printFDs(os.Stdout)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// printFDs prints "fd target" per open descriptor, then "sid N pid N".
func printFDs(w *os.File) {
	entries, _ := os.ReadDir("/proc/self/fd")
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err == nil {
			fmt.Fprintf(w, "%s %s\n", e.Name(), target)
		}
	}
	fmt.Fprintf(w, "sid %d pid %d\n", sessionOf(os.Getpid()), os.Getpid())
}

// sessionOf reads the session id from /proc/PID/stat (field 6).
func sessionOf(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // state ppid pgrp session ...
	sid, _ := strconv.Atoi(f[3])
	return sid
}

func child(t *testing.T, mode string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "DETACH_TEST_CHILD="+mode)
	return cmd
}

// pipeTarget is how /proc shows a descriptor of the pipe fd belongs to.
func pipeTarget(t *testing.T, fd int) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("pipe:[%d]", st.Ino)
}

// rawPipe is a pipe opened as a shell or flock(1) opens descriptors: not
// close-on-exec, so a child started with os/exec inherits it.
func rawPipe(t *testing.T) [2]int {
	t.Helper()
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(p[0]); syscall.Close(p[1]) })
	return p
}

// A descriptor inherited without close-on-exec reaches every child os/exec
// starts; after CloseOnExec none does, and this process keeps it open.
func TestCloseOnExec(t *testing.T) {
	p := rawPipe(t)
	target := pipeTarget(t, p[1])
	if fds, err := Inherited(); err != nil || !slices.Contains(fds, p[1]) {
		t.Fatalf("Inherited() = %v, %v; want the pipe's write end %d among them", fds, err, p[1])
	}
	out, err := child(t, "fds").Output()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), target) {
		t.Fatalf("before CloseOnExec the child should inherit %s (else this test shows nothing); it has:\n%s", target, out)
	}
	if err := CloseOnExec(); err != nil {
		t.Fatal(err)
	}
	out, err = child(t, "fds").Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), target) {
		t.Errorf("after CloseOnExec the child still has %s:\n%s", target, out)
	}
	if fds, _ := Inherited(); slices.Contains(fds, p[1]) {
		t.Errorf("Inherited() = %v after CloseOnExec", fds)
	}
	if _, err := syscall.Write(p[1], []byte("x")); err != nil {
		t.Errorf("this process lost its own descriptor: %v", err)
	}
}

// A daemon started with a descriptor it did not open (here the write end
// of a pipe, as descriptor 3) closes it, and only it: its runtime's own
// descriptors stay, so it still listens and dials.
func TestCloseInherited(t *testing.T) {
	// What this test process inherited itself (from go test, a CI runner)
	// would reach the child too: only descriptor 3 is to be closed.
	if err := CloseOnExec(); err != nil {
		t.Fatal(err)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	target := pipeTarget(t, int(w.Fd()))
	cmd := child(t, "close")
	cmd.ExtraFiles = []*os.File{w}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\n%s", err, out.String())
	}
	w.Close()
	if !strings.Contains(out.String(), "closed [3]") {
		t.Errorf("the child closed something else than descriptor 3:\n%s", out.String())
	}
	if strings.Contains(out.String(), target) {
		t.Errorf("the child still holds %s:\n%s", target, out.String())
	}
}

// Background gives a child /dev/null for stdin, the log for stdout and
// stderr, a session of its own, and none of the caller's descriptors.
func TestBackground(t *testing.T) {
	p := rawPipe(t)
	target := pipeTarget(t, p[1])
	logPath := filepath.Join(t.TempDir(), "child.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := child(t, "fds")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := Background(cmd, logf); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(logPath)
	out := string(b)
	for _, want := range []string{"0 /dev/null\n", "1 " + logPath + "\n", "2 " + logPath + "\n", fmt.Sprintf("sid %d pid %d\n", cmd.Process.Pid, cmd.Process.Pid)} {
		if !strings.Contains(out, want) {
			t.Errorf("child's descriptors and session lack %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, target) {
		t.Errorf("child inherited %s:\n%s", target, out)
	}
	cmd = child(t, "fds")
	cmd.ExtraFiles = []*os.File{logf}
	if err := Background(cmd, logf); err == nil {
		t.Error("Background accepted ExtraFiles")
	}
}
