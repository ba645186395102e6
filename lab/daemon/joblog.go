package daemon

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Streams of a container log record.
const (
	streamStdout = "stdout"
	streamStderr = "stderr"
)

// criTime is the CRI log timestamp layout (nine fractional digits), as
// lab/crilog writes it.
const criTime = "2006-01-02T15:04:05.000000000Z07:00"

// jobLog is a Job pod's container log, written as a container runtime
// writes it for the kubelet: "<time> <stream> <P|F> <bytes>", a line longer
// than jobLogChunk split into partial (P) records ending with a full (F)
// one, which `kubectl logs` joins again. Unlike lab/crilog (the lab apps'
// writer, which cuts a message at 8 KiB) it keeps every byte a process
// writes: mesh-verify workers print long JSON lines.
type jobLog struct {
	mu sync.Mutex // one record per write(2), in timestamp order
	f  *os.File
}

func openJobLog(path string) (*jobLog, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("create log directory for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open job pod log %s: %w", path, err)
	}
	return &jobLog{f: f}, nil
}

// record writes one record; a failed write loses that record only.
func (l *jobLog) record(stream string, partial bool, msg []byte) {
	tag := " F "
	if partial {
		tag = " P "
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	ts := time.Now().UTC().Format(criTime)
	b := make([]byte, 0, len(ts)+len(stream)+len(tag)+len(msg)+2)
	b = append(b, ts...)
	b = append(b, ' ')
	b = append(b, stream...)
	b = append(b, tag...)
	b = append(b, msg...)
	b = append(b, '\n')
	_, _ = l.f.Write(b)
}

// copy writes what r yields as records of stream until r ends: each line
// as soon as it is complete, a last line without its newline at the end.
func (l *jobLog) copy(r io.Reader, stream string) {
	br := bufio.NewReaderSize(r, jobLogChunk)
	for {
		line, err := br.ReadSlice('\n')
		switch {
		case err == nil:
			l.record(stream, false, line[:len(line)-1])
		case errors.Is(err, bufio.ErrBufferFull):
			l.record(stream, true, line)
		default:
			if len(line) > 0 {
				l.record(stream, false, line)
			}
			return
		}
	}
}

func (l *jobLog) Close() error {
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("close job pod log %s: %w", l.f.Name(), err)
	}
	return nil
}
