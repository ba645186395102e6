package judge

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
)

// The counts `mesh-verify check` judges, read from a file or a flag: user
// input, so every error is an invalid input (exit 4) naming the file and,
// where there is one, the line.

// Bounds of check's input: a trillion requests a bucket keeps every sum
// of counts far from int64's overflow (which printed n =
// -9223372036854775808), and the weights are the scenario's
// (scenarios.MaxWeight).
const (
	MaxCount   = 1_000_000_000_000
	MaxBuckets = 10_000
	// MaxCountsFile bounds `check --file`: 10,000 buckets of CSV are far
	// below it. A larger file, or one that is not a regular file, is
	// refused before it is read.
	MaxCountsFile = 1 << 20
)

// ParseCount reads one bucket's count, a whole number from 0 to MaxCount.
func ParseCount(s string) (int64, error) {
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > MaxCount {
		return 0, fmt.Errorf("count %q: want a whole number from 0 to %d", s, int64(MaxCount))
	}
	return v, nil
}

// ReadCounts reads (`mesh-verify check --file`) a JSON object or CSV of counts; every error names
// the file and, where there is one, the line.
func ReadCounts(path string) (assert.Counts, error) {
	data, err := boundedfile.Read(path, MaxCountsFile, "a counts file")
	if err != nil {
		return assert.Counts{}, exitcode.InvalidInputf("%v", err)
	}
	var c assert.Counts
	switch ext := strings.ToLower(filepath.Ext(path)); {
	case ext == ".json", ext != ".csv" && strings.HasPrefix(strings.TrimSpace(string(data)), "{"):
		c, err = parseCountsJSON(path, data)
	default:
		c, err = parseCountsCSV(path, data)
	}
	if err != nil {
		return c, err
	}
	if len(c.Buckets) == 0 {
		return c, exitcode.InvalidInputf("%s: no counts", path)
	}
	return c, nil
}

// parseCountsJSON reads {"bucket": count, ...} token by token to keep the
// file's order and to know the line of a bad item.
func parseCountsJSON(path string, data []byte) (assert.Counts, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	line := func() int { return 1 + bytes.Count(data[:dec.InputOffset()], []byte("\n")) }
	bad := func(format string, a ...any) error {
		return exitcode.InvalidInputf("%s:%d: %s", path, line(), fmt.Sprintf(format, a...))
	}
	var c assert.Counts
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return c, bad(`want a JSON object like {"c2": 480, "c3": 520}`)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return c, bad("%v", err)
		}
		name := tok.(string) // object keys are always strings
		tok, err = dec.Token()
		if err != nil {
			return c, bad("%v", err)
		}
		num, ok := tok.(json.Number)
		if !ok {
			return c, bad("bucket %q: count %v is not a number", name, tok)
		}
		v, err := ParseCount(num.String())
		if err != nil {
			return c, bad("bucket %q: %v", name, err)
		}
		if slices.Contains(c.Buckets, name) {
			return c, bad("bucket %q given twice", name)
		}
		if len(c.Buckets) == MaxBuckets {
			return c, bad("more than %d buckets", MaxBuckets)
		}
		c.Buckets, c.N = append(c.Buckets, name), append(c.N, v)
	}
	if _, err := dec.Token(); err != nil {
		return c, bad("%v", err)
	}
	return c, nil
}

// parseCountsCSV reads "bucket,count" lines; a first line whose count is
// not a number is a header. '#' starts a comment line.
func parseCountsCSV(path string, data []byte) (assert.Counts, error) {
	r := csv.NewReader(bytes.NewReader(data))
	r.FieldsPerRecord = -1
	r.Comment = '#'
	r.TrimLeadingSpace = true
	var c assert.Counts
	for first := true; ; first = false {
		rec, err := r.Read()
		if err == io.EOF {
			return c, nil
		}
		if err != nil {
			var pe *csv.ParseError
			if errors.As(err, &pe) {
				return c, exitcode.InvalidInputf("%s:%d: %v", path, pe.Line, pe.Err)
			}
			return c, exitcode.InvalidInputf("%s: %v", path, err)
		}
		line, _ := r.FieldPos(0)
		if len(rec) != 2 {
			return c, exitcode.InvalidInputf("%s:%d: want bucket,count, got %d fields", path, line, len(rec))
		}
		name, val := strings.TrimSpace(rec[0]), strings.TrimSpace(rec[1])
		v, err := ParseCount(val)
		if err != nil {
			if first {
				if _, numErr := strconv.ParseFloat(val, 64); numErr != nil {
					continue // header
				}
			}
			return c, exitcode.InvalidInputf("%s:%d: bucket %q: %v", path, line, name, err)
		}
		if name == "" {
			return c, exitcode.InvalidInputf("%s:%d: empty bucket name", path, line)
		}
		if slices.Contains(c.Buckets, name) {
			return c, exitcode.InvalidInputf("%s:%d: bucket %q given twice", path, line, name)
		}
		if len(c.Buckets) == MaxBuckets {
			return c, exitcode.InvalidInputf("%s:%d: more than %d buckets", path, line, MaxBuckets)
		}
		c.Buckets, c.N = append(c.Buckets, name), append(c.N, v)
	}
}
