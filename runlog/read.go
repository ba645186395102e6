package runlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// ErrTruncated means the run directory ends in the middle of a result: a
// run killed before its recorder was closed, or one whose recording
// stopped on a write error. Everything before the cut was read.
var ErrTruncated = errors.New("the run log ends mid-result")

// MaxLine bounds one line of attribution.jsonl.
const MaxLine = 16 << 20

// ReadResults calls fn with every result of the run directory dir, in the
// order they were recorded (of completion), each with its line of
// attribution.jsonl. r is reused between calls: copy what you keep. It
// stops at fn's first error and returns it. When one file ends before the
// other, or mid-result, the complete pairs are passed on and the error
// wraps ErrTruncated; a result and a line that do not belong together
// (not the same Seq) are an error.
func ReadResults(dir string, fn func(r *vegeta.Result, a Attribution) error) error {
	rf, err := os.Open(filepath.Join(dir, ResultsFile))
	if err != nil {
		return fmt.Errorf("runlog: %w", err)
	}
	defer rf.Close()
	af, err := os.Open(filepath.Join(dir, AttributionFile))
	if err != nil {
		return fmt.Errorf("runlog: %w", err)
	}
	defer af.Close()
	dec := vegeta.NewDecoder(bufio.NewReaderSize(rf, 256<<10))
	lines := newLineReader(af)
	var r vegeta.Result
	for n := 1; ; n++ {
		r = vegeta.Result{} // gob leaves fields absent from the stream as they were
		rerr := dec.Decode(&r)
		line, lerr := lines.next()
		if lerr != nil && lerr != io.EOF && !errors.Is(lerr, ErrTruncated) {
			return fmt.Errorf("runlog: %s line %d: %w", AttributionFile, n, lerr)
		}
		switch {
		case rerr == io.EOF && lerr == io.EOF:
			return nil
		case rerr == io.EOF || errors.Is(rerr, io.ErrUnexpectedEOF):
			what := "ends"
			if rerr != io.EOF {
				what = "is cut"
			}
			return fmt.Errorf("runlog: %w: %s %s at result %d", ErrTruncated, ResultsFile, what, n)
		case rerr != nil:
			return fmt.Errorf("runlog: %s result %d: %w", ResultsFile, n, rerr)
		case lerr != nil:
			what := "ends"
			if lerr != io.EOF {
				what = "is cut"
			}
			return fmt.Errorf("runlog: %w: %s %s at line %d", ErrTruncated, AttributionFile, what, n)
		}
		a, err := ParseAttribution(line)
		if err != nil {
			return fmt.Errorf("runlog: %s line %d: %w", AttributionFile, n, err)
		}
		if a.Seq != r.Seq {
			return fmt.Errorf("runlog: %s line %d is seq %d, result %d in %s seq %d: not the same run", AttributionFile, n, a.Seq, n, ResultsFile, r.Seq)
		}
		if err := fn(&r, a); err != nil {
			return err
		}
	}
}

// ReadAttribution calls fn with every line of an attribution.jsonl, for
// what needs no latencies. A last line without its newline wraps
// ErrTruncated.
func ReadAttribution(rd io.Reader, fn func(a Attribution) error) error {
	lines := newLineReader(rd)
	for n := 1; ; n++ {
		line, err := lines.next()
		switch {
		case err == io.EOF:
			return nil
		case errors.Is(err, ErrTruncated):
			return fmt.Errorf("runlog: %w: %s is cut at line %d", ErrTruncated, AttributionFile, n)
		case err != nil:
			return fmt.Errorf("runlog: %s line %d: %w", AttributionFile, n, err)
		}
		a, err := ParseAttribution(line)
		if err != nil {
			return fmt.Errorf("runlog: %s line %d: %w", AttributionFile, n, err)
		}
		if err := fn(a); err != nil {
			return err
		}
	}
}

// lineReader returns whole lines, at most MaxLine long, without their
// newline; a last line without one is ErrTruncated (the recorder ends
// every line), and the line is not returned.
type lineReader struct {
	br  *bufio.Reader
	buf []byte
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

func (l *lineReader) next() ([]byte, error) {
	l.buf = l.buf[:0]
	for {
		chunk, err := l.br.ReadSlice('\n')
		if len(l.buf)+len(chunk) > MaxLine+1 {
			return nil, fmt.Errorf("line longer than %d bytes", MaxLine)
		}
		switch err {
		case nil:
			if len(l.buf) == 0 {
				return bytes.TrimSuffix(chunk, []byte("\n")), nil
			}
			l.buf = append(l.buf, chunk[:len(chunk)-1]...)
			return l.buf, nil
		case bufio.ErrBufferFull:
			l.buf = append(l.buf, chunk...)
		case io.EOF:
			if len(l.buf)+len(chunk) == 0 {
				return nil, io.EOF
			}
			return nil, ErrTruncated
		default:
			return nil, err
		}
	}
}
