package daemon

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// entryLog is the log of a mesh entry pod (a router or gateway, which
// lab/apps does not run): what `kubectl logs` of the router shows —
// its policy and every change of its backends — in the CRI format
// kwok's kubelet reads ("<RFC3339Nano> stdout F <message>").
type entryLog struct {
	mu sync.Mutex
	f  *os.File
}

func openEntryLog(path string) (*entryLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open pod log %s: %w", path, err)
	}
	return &entryLog{f: f}, nil
}

// Line appends one line with one write, so a follower never sees half of it.
func (l *entryLog) Line(format string, args ...any) {
	msg := strings.NewReplacer("\n", " ", "\r", " ").Replace(fmt.Sprintf(format, args...))
	l.mu.Lock()
	defer l.mu.Unlock()
	// The kubelet's own layout: nine fractional digits, so lines sort.
	ts := time.Now().UTC().Format("2006-01-02T15:04:05.000000000Z07:00")
	_, _ = l.f.WriteString(ts + " stdout F " + msg + "\n")
}

func (l *entryLog) Close() error { return l.f.Close() }
