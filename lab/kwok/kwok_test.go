package kwok_test

import (
	"context"
	"fmt"
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
)

// Two real clusters side by side: contexts renamed like kind's, a node and
// a pod in each, and nothing left running afterwards (checked by labtest).
func TestTwoClustersSideBySide(t *testing.T) {
	l := labtest.Clusters(t, "c1", "c2")
	for _, c := range []string{"c1", "c2"} {
		l.Apply(t, c, labtest.Node("node-"+c))
		l.Apply(t, c, `apiVersion: v1
kind: Pod
metadata: {name: p-`+c+`, namespace: default}
spec:
  nodeName: node-`+c+`
  containers: [{name: app, image: fake}]
`)
	}
	for _, c := range []string{"c1", "c2"} {
		out := l.Kubectl(t, c, "get", "pods", "-o", "name")
		if strings.TrimSpace(out) != "pod/p-"+c {
			t.Errorf("cluster %s pods: %q", c, out)
		}
	}
	ctxs := l.Kubectl(t, "c1", "config", "get-contexts", "-o", "name")
	if !strings.Contains(ctxs, "kind-c1") || !strings.Contains(ctxs, "kind-c2") || strings.Contains(ctxs, "kwok-") {
		t.Errorf("contexts: %q", ctxs)
	}
}

// start runs a process and waits until its command line is the new one
// (not the forked test binary's); it is stopped by pid when the test ends.
func start(t *testing.T, path string, args ...string) int {
	t.Helper()
	cmd := exec.Command(path, args...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if p, ok := kwok.ReadProc(pid); ok && p.Args[0] == path {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d (%s) did not start", pid, path)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Only the lab's own processes count as leftovers: those started from
// inside the lab directory (as kwokctl starts its components) and the lab
// daemon. A process that merely names the directory, or runs from another
// lab whose directory shares a prefix, is at most reported by pid.
func TestLeftoversOnlyTheLabsOwn(t *testing.T) {
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep")
	}
	tail, err := exec.LookPath("tail")
	if err != nil {
		t.Skip("no tail")
	}
	root := t.TempDir()
	dir := filepath.Join(root, "mvlab-123")
	other := filepath.Join(root, "mvlab-1234") // shares dir's prefix as text
	for _, d := range []string{dir, other} {
		if err := os.MkdirAll(filepath.Join(d, "bin"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(sleep, filepath.Join(d, "bin", "sleep")); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "daemon.log"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	own := start(t, filepath.Join(dir, "bin", "sleep"), "30")
	stranger := start(t, tail, "-f", filepath.Join(dir, "daemon.log"))
	otherLab := start(t, filepath.Join(other, "bin", "sleep"), "31")

	l := &kwok.Lab{Dir: dir}
	left := l.Leftovers()
	if len(left) != 1 || left[0] != fmt.Sprintf("%d %s", own, filepath.Join(dir, "bin", "sleep")) {
		t.Errorf("leftovers of %s: %q, want only pid %d", dir, left, own)
	}
	strangers := l.Strangers()
	if !slices.Contains(strangers, stranger) || slices.Contains(strangers, own) {
		t.Errorf("strangers of %s: %v, want %d (tail -f) and not %d", dir, strangers, stranger, own)
	}
	if !kwok.Owned(own, dir) || kwok.Owned(stranger, dir) || kwok.Owned(otherLab, dir) || !kwok.Owned(otherLab, other) {
		t.Errorf("Owned: own %v, tail %v, other lab's %v in %s, in its own %v",
			kwok.Owned(own, dir), kwok.Owned(stranger, dir), kwok.Owned(otherLab, dir), dir, kwok.Owned(otherLab, other))
	}
	for _, s := range left {
		if strings.Contains(s, "daemon.log") {
			t.Errorf("a leftover shows a stranger's command line: %q", s)
		}
	}
}

func TestIsDaemon(t *testing.T) {
	dir := "/tmp/mvlab-123"
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"/usr/bin/mesh-verify", "lab", "serve", "--dir", dir}, true},
		{[]string{"mesh-verify", "lab", "serve", "--dir=" + dir}, true},
		{[]string{"mesh-verify", "lab", "serve", "--dir", dir + "/"}, false}, // not exactly dir
		{[]string{"mesh-verify", "lab", "serve", "--dir", dir + "4"}, false},
		{[]string{"mesh-verify", "lab", "down", "--dir", dir}, false},
		{[]string{"tail", "-f", dir + "/daemon.log"}, false},
		{[]string{"sh", "-c", "mesh-verify lab serve --dir " + dir}, false},
	} {
		if got := kwok.IsDaemon(c.args, dir); got != c.want {
			t.Errorf("IsDaemon(%q) = %v, want %v", c.args, got, c.want)
		}
	}
}

// A cancelled FindBinaries stops the whole build.sh process group, not
// only bash: here a child the script left running in the background.
func TestFindBinariesCancelStopsTheBuild(t *testing.T) {
	t.Setenv("MESH_VERIFY_LAB_BIN", "")
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "tools", "lab"), 0o755); err != nil {
		t.Fatal(err)
	}
	pidFile := filepath.Join(root, "child.pid")
	script := "sleep 60 & echo $! >" + pidFile + "\nwait\n"
	if err := os.WriteFile(filepath.Join(root, "tools", "lab", "build.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := kwok.FindBinaries(ctx, root)
		done <- err
	}()
	var child int
	deadline := time.Now().Add(10 * time.Second)
	for child == 0 {
		if b, err := os.ReadFile(pidFile); err == nil {
			child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("the fake build.sh did not start its child")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err == nil {
			t.Error("a cancelled FindBinaries returned no error")
		}
	case <-time.After(15 * time.Second):
		t.Fatal("FindBinaries did not return after cancel")
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, alive := kwok.ReadProc(child); !alive {
			break
		}
		if time.Now().After(deadline) {
			_ = syscall.Kill(child, syscall.SIGKILL)
			t.Fatalf("build.sh's child %d outlived the cancel", child)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
