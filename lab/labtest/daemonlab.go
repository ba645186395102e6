package labtest

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
)

// BuildMeshVerify builds ./cmd/mesh-verify, and ./lab/cmd/mesh-verify-lab
// beside it, into the test's temporary directory (with the race detector
// when race is set) and returns the path of mesh-verify.
func BuildMeshVerify(t testing.TB, race bool) string {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for _, name := range []string{"mesh-verify", kwok.LabProgram} {
		args := []string{"build", "-o", filepath.Join(dir, name)}
		if race {
			args = append(args, "-race")
		}
		pkg := "./cmd/" + name
		if name == kwok.LabProgram {
			pkg = "./lab/cmd/" + name // the lab's own module (lab/go.mod)
		}
		cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, out)
		}
	}
	return filepath.Join(dir, "mesh-verify")
}

// DaemonLab brings up the one-cluster lab (OneCluster) whose daemon is
// the mesh-verify-lab beside the mesh-verify binary exe (BuildMeshVerify
// builds both), so that the lab runs mesh-verify's Job pods as processes
// of exe (lab/README.md, "mesh-verify's Job pods").
// When the test ends it takes the lab down and checks that no process of
// the lab, Job pods' included, is left; on failure it logs the daemon's log.
func DaemonLab(t testing.TB, exe string) *lab.Lab {
	t.Helper()
	return DaemonLabOf(t, exe, OneCluster)
}

// DaemonLabOf is DaemonLab with the topology given as lab.yaml's text.
func DaemonLabOf(t testing.TB, exe, topology string) *lab.Lab {
	t.Helper()
	bin := Binaries(t)
	dir, err := os.MkdirTemp("", "mvlab-") // short: kwokctl puts unix sockets in it
	if err != nil {
		t.Fatal(err)
	}
	topo := filepath.Join(t.TempDir(), "one.yaml")
	if err := os.WriteFile(topo, []byte(topology), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := lab.Options{Dir: dir, Topology: topo, Bin: string(bin), RepoRoot: RepoRoot(), ReadyTimeout: time.Minute, Out: io.Discard,
		Daemon: func(dir string) (*exec.Cmd, error) {
			return exec.Command(filepath.Join(filepath.Dir(exe), kwok.LabProgram), "serve", "--dir", dir), nil
		}}
	daemonLog := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "daemon.log"))
		return string(b)
	}
	t.Cleanup(func() {
		st, _ := daemon.ReadStatus(dir)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := lab.Down(ctx, opts); err != nil {
			t.Errorf("lab down: %v", err)
		}
		if k, err := kwok.New(bin, dir); err == nil {
			if left := k.Leftovers(); len(left) > 0 {
				t.Errorf("processes left behind by the lab: %v", left)
			}
		}
		if st != nil {
			for _, j := range st.Jobs {
				if j.PID != 0 && kwok.Alive(j.PID) {
					t.Errorf("job pod %s: process %d still runs after lab down", j.Name, j.PID)
				}
			}
		}
		if t.Failed() {
			t.Logf("daemon log:\n%s", daemonLog())
		}
		os.RemoveAll(dir)
	})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	l, err := lab.Up(ctx, opts)
	if err != nil {
		t.Fatalf("lab up: %v\ndaemon log:\n%s", err, daemonLog())
	}
	return l
}
