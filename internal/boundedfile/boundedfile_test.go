//go:build unix

package boundedfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestRead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name string, n int) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, bytes.Repeat([]byte("x"), n), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "zero-link")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	okLink := filepath.Join(dir, "ok-link")
	if err := os.Symlink(write("target", 3), okLink); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		path  string
		limit int64
		want  int    // bytes read, when no error
		err   string // part of the error
	}{
		{"empty", write("empty", 0), 10, 0, ""},
		{"below the limit", write("small", 9), 10, 9, ""},
		{"at the limit", write("exact", 10), 10, 10, ""},
		{"over the limit", write("big", 11), 10, 0, "is larger than 10 bytes, the limit of a test file"},
		{"over a KiB limit", write("bigger", 2<<10+1), 2 << 10, 0, "is larger than 2 KiB"},
		{"a symlink to a regular file", okLink, 10, 3, ""},
		{"a FIFO without a writer", fifo, 10, 0, "is not a regular file (a FIFO): want a test file"},
		{"/dev/zero", "/dev/zero", 10, 0, "is not a regular file (a character device)"},
		{"a symlink to /dev/zero", link, 10, 0, "is not a regular file (a character device)"},
		{"a directory", dir, 10, 0, "is not a regular file (a directory)"},
		{"missing", filepath.Join(dir, "absent"), 10, 0, "no such file or directory"},
		{"a zero limit", write("z", 1), 0, 0, "limit 0: want a positive byte count"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			data, err := Read(tc.path, tc.limit, "a test file")
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("Read took %s", d)
			}
			if tc.err == "" {
				if err != nil || len(data) != tc.want {
					t.Fatalf("Read(%s, %d) = %d bytes, %v; want %d bytes", tc.path, tc.limit, len(data), err, tc.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), tc.path) {
				t.Fatalf("Read(%s, %d) = %d bytes, %v; want an error naming the file and saying %q", tc.path, tc.limit, len(data), err, tc.err)
			}
			var re *Error
			if refused := errors.As(err, &re); refused != errors.Is(err, ErrRefused) {
				t.Errorf("errors.As *Error %v but errors.Is ErrRefused %v", refused, errors.Is(err, ErrRefused))
			}
			if tc.name == "missing" && !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a missing file: %v, want fs.ErrNotExist", err)
			}
		})
	}
}

func TestSize(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{1: "1 byte", 10: "10 bytes", 1 << 10: "1 KiB", 1<<10 + 1: "1025 bytes", 512 << 10: "512 KiB", 64 << 20: "64 MiB", 3<<20 + 1<<10: "3073 KiB"} {
		if got := Size(n); got != want {
			t.Errorf("Size(%d) = %q, want %q", n, got, want)
		}
	}
}
