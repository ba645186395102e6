//go:build unix

package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/judge"
)

// Every file a command reads is a regular file within its kind's limit
// (internal/boundedfile): a FIFO without a writer, /dev/zero and a file
// one byte over the limit are refused at once, with an error naming the
// file and the kind. Before, a FIFO blocked the command and /dev/zero was
// read up to the limit.
func TestInputFilesBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "input.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	over := func(name string, limit int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte(" "), limit+1), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := filepath.Join(dir, "good.json")
	if err := os.WriteFile(good, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args func(file string) []string
		kind string
		big  string // a file over the kind's limit
	}{
		{"validate", func(f string) []string { return []string{"validate", f} }, "a scenario file", over("big.yaml", 1<<20)},
		{"check --file", func(f string) []string { return []string{"check", "--file", f, "--expect", "equal"} }, "a counts file", over("big.csv", judge.MaxCountsFile)},
		{"report", func(f string) []string { return []string{"report", f} }, "a report", ""},
		{"report diff", func(f string) []string { return []string{"report", "diff", f, good} }, "a report", ""},
	} {
		for _, in := range []struct{ file, want string }{
			{fifo, "is not a regular file (a FIFO): want " + tc.kind},
			{"/dev/zero", "is not a regular file (a character device): want " + tc.kind},
			{tc.big, "is larger than 1 MiB, the limit of " + tc.kind},
		} {
			if in.file == "" {
				continue // report.json's 64 MiB limit: reports' own test
			}
			t.Run(tc.name+" "+filepath.Base(in.file), func(t *testing.T) {
				t.Parallel()
				var out, errb bytes.Buffer
				start := time.Now()
				code := execute(tc.args(in.file), &out, &errb)
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("took %s", d)
				}
				if code == exitcode.Pass || !strings.Contains(errb.String(), in.file+" "+in.want) {
					t.Errorf("exit %d, stderr %q; want an error saying %q", code, errb.String(), in.file+" "+in.want)
				}
			})
		}
	}
}
