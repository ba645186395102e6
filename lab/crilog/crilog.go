// Package crilog writes a simulated container's log file in the format
// container runtimes write for the kubelet ("<RFC3339Nano> <stream> F
// <message>"), which kwok's Logs objects serve to `kubectl logs`.
package crilog

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// criTimeLayout is the kubelet's own CRI log timestamp layout (fixed nine
// fractional digits, unlike time.RFC3339Nano which trims zeros), so lines
// sort lexically and look exactly like a container runtime wrote them.
const criTimeLayout = "2006-01-02T15:04:05.000000000Z07:00"

// maxMessage caps a log message: the kubelet splits lines longer than 16 KiB
// into partial ("P") records, which this writer never emits.
const maxMessage = 8 << 10

// Log appends CRI-format lines ("<ts> stdout F <message>") to one
// container's log file. The lab's apps, sidecars and mesh entry pods all
// write with it.
type Log struct {
	// mu makes "take the timestamp, then write" atomic, so the file's line
	// order equals timestamp order; log followers resume by timestamp
	// (sinceTime) and would skip or repeat lines if they were out of order.
	mu sync.Mutex
	f  *os.File
}

// Open opens path for appending, creating it and its directory.
// O_APPEND makes every write land at the end of the file even if another
// process (a log rotator, a second writer) also appends.
func Open(path string) (*Log, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open pod log %s: %w", path, err)
	}
	return &Log{f: f}, nil
}

// Streams a line is written to.
const (
	Stdout = "stdout"
	Stderr = "stderr"
)

// Line writes one complete stdout line; see Write.
func (l *Log) Line(msg string) error { return l.Write(Stdout, msg) }

// Write writes one complete line on stream (Stdout or Stderr) with a
// single write(2) and no user-space buffer: a concurrent reader (the
// kubelet's CRI reader following the file) then sees whole lines only,
// and sees each line as soon as Write returns.
func (l *Log) Write(stream, msg string) error {
	return l.Record(stream, false, []byte(sanitize(msg)))
}

// Record writes one record as it is, "<time> <stream> <P|F> <msg>", with a
// single write(2) (see Write): partial (P) records are joined with the
// next ones up to a full (F) one by `kubectl logs`. msg must not hold a
// newline; Write makes sure of it, Copy splits on them.
func (l *Log) Record(stream string, partial bool, msg []byte) error {
	if stream != Stdout && stream != Stderr {
		return fmt.Errorf("append to pod log %s: unknown stream %q", l.f.Name(), stream)
	}
	tag := " F "
	if partial {
		tag = " P "
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := time.Now().UTC().Format(criTimeLayout)
	b := make([]byte, 0, len(ts)+len(stream)+len(tag)+len(msg)+1)
	b = append(b, ts...)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, tag...)
	b = append(b, msg...)
	b = append(b, '\n')
	if _, err := l.f.Write(b); err != nil {
		return fmt.Errorf("append to pod log %s: %w", l.f.Name(), err)
	}
	return nil
}

// Copy writes what r yields as records of stream until r ends, keeping
// every byte (unlike Write, which cuts a message at 8 KiB): each line as
// soon as it is complete, a line longer than chunk as partial records, a
// last line without its newline at the end. A record that fails to be
// written is lost alone.
func (l *Log) Copy(r io.Reader, stream string, chunk int) {
	br := bufio.NewReaderSize(r, chunk)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			_ = l.Record(stream, false, line[:len(line)-1])
		case errors.Is(err, bufio.ErrBufferFull):
			_ = l.Record(stream, true, line)
		default:
			if len(line) > 0 {
				_ = l.Record(stream, false, line)
			}
			return
		}
	}
}

// Close closes the file; later Line calls fail with os.ErrClosed.
func (l *Log) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close pod log %s: %w", l.f.Name(), err)
	}
	return nil
}

// sanitize keeps a message on one line: a decoded URL path may contain a
// newline, which would otherwise forge a second log record. Tabs stay:
// Istio's echo app separates its log fields with them.
func sanitize(s string) string {
	if len(s) > maxMessage {
		// Cut on a rune boundary so the line stays valid UTF-8.
		n := maxMessage
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		s = s[:n]
	}
	if !strings.ContainsFunc(s, isControl) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if isControl(r) {
			return '?'
		}
		return r
	}, s)
}

func isControl(r rune) bool { return (r < 0x20 && r != '\t') || r == 0x7f }
