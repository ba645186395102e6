package lab_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab"
)

// A directory that merely holds files with the lab's names is not the
// lab's: `down` removes nothing from it and says why, and `up` refuses to
// use it (it would clean a previous lab first), before starting anything.
func TestOnlyAMarkedDirectoryIsTheLabs(t *testing.T) {
	userFiles := []string{"kwok/clusters/prod/notes.txt", "logs/app.log", "nginx/nginx.conf", "kubeconfig", "mine.txt"}
	seed := func(t *testing.T) string {
		dir := t.TempDir()
		for _, f := range userFiles {
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("the user's\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return dir
	}
	untouched := func(t *testing.T, dir string) {
		t.Helper()
		for _, f := range userFiles {
			if b, err := os.ReadFile(filepath.Join(dir, f)); err != nil || string(b) != "the user's\n" {
				t.Errorf("%s: %q, %v", f, b, err)
			}
		}
	}

	t.Run("down", func(t *testing.T) {
		dir := seed(t)
		_, err := lab.Down(context.Background(), lab.Options{Dir: dir})
		var nl *lab.NotALabError
		if !errors.As(err, &nl) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "kwok") {
			t.Errorf("down: %v", err)
		}
		untouched(t, dir)
	})
	t.Run("up", func(t *testing.T) {
		dir := seed(t)
		_, err := lab.Up(context.Background(), lab.Options{Dir: dir, Topology: "skupper-1", Bin: t.TempDir()})
		if err == nil || !strings.Contains(err.Error(), "is not empty") || !strings.Contains(err.Error(), "mine.txt") {
			t.Errorf("up: %v", err)
		}
		untouched(t, dir)
		// The refusal leaves the directory as it was: no lock file.
		if _, err := os.Lstat(filepath.Join(dir, ".lock")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a refused up left %s/.lock (%v)", dir, err)
		}
	})
	t.Run("down of an empty or missing directory does nothing", func(t *testing.T) {
		for _, dir := range []string{t.TempDir(), filepath.Join(t.TempDir(), "none")} {
			r, err := lab.Down(context.Background(), lab.Options{Dir: dir})
			if err != nil || !r.Nothing {
				t.Errorf("down %s: %+v, %v", dir, r, err)
			}
		}
	})
}

// `down` removes what a run with worker pods leaves (the daemon's jobs/
// directories) and the lock file, so that the next `up` in the directory
// is not refused as "not empty"; a user's own file stays, with the
// directory.
func TestDownRemovesJobsAndLock(t *testing.T) {
	t.Parallel()
	for _, mine := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "lab")
		files := []string{".mesh-verify-lab", ".lock", "lab.json", "jobs/c1/load_mv-run-0_0f3a/stdout"}
		if mine {
			files = append(files, "mine.txt")
		}
		for _, f := range files {
			p := filepath.Join(dir, f)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := lab.Down(context.Background(), lab.Options{Dir: dir}); err != nil {
			t.Fatalf("down: %v", err)
		}
		entries, err := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		switch {
		case mine && (err != nil || len(names) != 1 || names[0] != "mine.txt"):
			t.Errorf("down with a user's file: left %v (%v), want only mine.txt", names, err)
		case !mine && !errors.Is(err, os.ErrNotExist):
			t.Errorf("down: left %s holding %v (%v), want it removed", dir, names, err)
		}
	}
}
