//go:build unix

package reports

import (
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/mesh-verify/mesh-verify/runlog"
)

// TestRunFilesHonourUmask: report files and the recorder's files get the
// same mode under one umask (issue 23: reports were 0600 while
// results.bin was 0644). Not parallel: the umask is the process's, and
// parallel tests run only after this one has put it back.
func TestRunFilesHonourUmask(t *testing.T) {
	for _, tc := range []struct {
		umask int
		want  os.FileMode
	}{{0o022, 0o644}, {0o002, 0o664}, {0o077, 0o600}} {
		old := syscall.Umask(tc.umask)
		dir := filepath.Join(t.TempDir(), "run")
		p, err := WriteFile(dir, "report.json", func(w io.Writer) error { _, err := io.WriteString(w, "{}"); return err })
		if err == nil {
			var rec *runlog.Recorder
			if rec, err = runlog.Create(dir); err == nil {
				err = rec.Close()
			}
		}
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{filepath.Base(p), "results.bin", "attribution.jsonl"} {
			fi, err := os.Stat(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.want {
				t.Errorf("umask %04o: %s is %04o, want %04o", tc.umask, name, fi.Mode().Perm(), tc.want)
			}
		}
	}
}
