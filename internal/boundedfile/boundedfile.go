// Package boundedfile reads the files mesh-verify is given (scenarios,
// CA bundles, counts files, reports, topologies) with an explicit size
// limit, and only when they are regular files: a FIFO, a device such as
// /dev/zero, a socket or a directory is refused before a byte is read, so
// a path given by mistake (or by an attacker) can neither block the
// process nor fill its memory.
package boundedfile

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// Error is a refused file: not a regular file, or larger than its limit.
// Open and read failures are returned as the *fs.PathError of package os.
type Error struct {
	Path string
	// What the file should have been ("a scenario file"), for the message.
	What string
	// Mode is the file's type when it is not a regular file.
	Mode fs.FileMode
	// Limit is the limit a larger file exceeded (0 for a non-regular file).
	Limit int64
}

func (e *Error) Error() string {
	if e.Limit > 0 {
		return fmt.Sprintf("%s is larger than %s, the limit of %s", e.Path, Size(e.Limit), e.What)
	}
	return fmt.Sprintf("%s is not a regular file (%s): want %s", e.Path, kind(e.Mode), e.What)
}

// ErrRefused matches every *Error with errors.Is.
var ErrRefused = errors.New("file refused")

// Is makes errors.Is(err, ErrRefused) true for every *Error.
func (e *Error) Is(target error) bool { return target == ErrRefused }

// Read returns the contents of the regular file at path (symbolic links
// followed) if it holds at most limit bytes. limit must be positive; what
// says what the file should be ("a scenario file") in a refusal.
func Read(path string, limit int64, what string) ([]byte, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("read %s: limit %d: want a positive byte count", path, limit)
	}
	// Stat first: opening a FIFO without a writer blocks, opening a
	// device may have effects. openNoBlock covers a file replaced between
	// the two calls, and the Stat of the open file decides.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Path: path, What: what, Mode: fi.Mode()}
	}
	f, err := openNoBlock(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &Error{Path: path, What: what, Mode: fi.Mode()}
	}
	if fi.Size() > limit {
		return nil, &Error{Path: path, What: what, Limit: limit}
	}
	// The size may change while the file is read (a log being written):
	// the limit holds whatever it grows to.
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if int64(len(data)) > limit {
		return nil, &Error{Path: path, What: what, Limit: limit}
	}
	return data, nil
}

// Size prints a limit in the largest binary unit that divides it.
func Size(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	case n == 1:
		return "1 byte"
	}
	return fmt.Sprintf("%d bytes", n)
}

func kind(m fs.FileMode) string {
	switch t := m.Type(); {
	case t&fs.ModeDir != 0:
		return "a directory"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeCharDevice != 0:
		return "a character device"
	case t&fs.ModeDevice != 0:
		return "a device"
	case t&fs.ModeIrregular != 0:
		return "an irregular file"
	}
	return "mode " + m.String()
}
