//go:build unix

package reports

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// ReadJSON refuses a report.json over MaxReportSize (a sparse file: its
// size decides, before a byte is read) and one that is not a regular file.
func TestReadJSONBounded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(big, MaxReportSize+1); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "report.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for file, want := range map[string]string{
		big:         big + " is larger than 64 MiB, the limit of a report",
		fifo:        fifo + " is not a regular file (a FIFO): want a report",
		"/dev/zero": "/dev/zero is not a regular file (a character device): want a report",
	} {
		if _, err := ReadJSON(file); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadJSON(%s): %v, want %q", file, err, want)
		}
	}
}
