// Package fleet is the coordinator's side of distributed workers
// (docs/architecture.md, Distributed workers: merging): it reads the
// records `mesh-verify worker` pods print on stdout (docs/distributed.md,
// Worker records) from their logs, keeps each worker's latest cumulative
// tally.State and merges them into the one tally.Snapshot the verdict and
// the report are built from, with a row per worker.
package fleet

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/tally"
)

// Version is the record format written; readers accept any record of the
// same major version (v1, v1.2, ...) and ignore fields they do not know.
// v1.1 added a record's `results` (the results since the worker's previous
// record, for results.bin) and `rules` (its attribution rules' statistics);
// v1.2 the final record's `engine` (what sent the worker's requests).
const Version = "v1.2"

const versionMajor = 1

// Tag is the key that marks a line as a worker record; it comes first.
const Tag = "meshVerifyWorker"

// Kind is what a record says.
type Kind string

// Record kinds: ready once the worker can attack and waits for the start;
// interval now and then with the cumulative state so far; final once, at
// the end, with the complete state; error when the worker gives up (with
// the state so far, if any).
const (
	KindReady    Kind = "ready"
	KindInterval Kind = "interval"
	KindFinal    Kind = "final"
	KindError    Kind = "error"
)

// Record is one line a worker prints.
type Record struct {
	Version string `json:"meshVerifyWorker"`
	Kind    Kind   `json:"kind"`
	// Worker is the Job completion index, Pod the pod's name.
	Worker int    `json:"worker"`
	Pod    string `json:"pod,omitempty"`
	// Seq grows with every record a worker prints: a record with a seq
	// already seen is a re-read line.
	Seq   int64        `json:"seq"`
	Time  time.Time    `json:"time"`
	State *tally.State `json:"state,omitempty"`
	Error string       `json:"error,omitempty"`
	// Results are the results recorded since the worker's previous
	// record (v1.1); Rules its attribution rules' cumulative statistics
	// (v1.1). A v1 worker sends neither.
	Results *Results           `json:"results,omitempty"`
	Rules   *attribution.Stats `json:"rules,omitempty"`
	// Engine is the attack engine that sent the worker's requests
	// (attack.Summary.Engine), on its final record (v1.2).
	Engine string `json:"engine,omitempty"`

	// checked says a Decoder validated the record, so that Merger.Add
	// does not walk the state a second time.
	checked bool
}

// Limits on what a record may hold (docs/distributed.md, Worker records).
const (
	// MaxLineBytes bounds one log line: longer lines are skipped, never
	// buffered whole. A State at every tally bound (MaxBuckets buckets in
	// each dimension, 600 slices of 17 latency series) stays below it.
	MaxLineBytes = 16 << 20
	// MaxWorkers bounds the worker index.
	MaxWorkers = 10000
	// MaxErrorBytes bounds a record's error text.
	MaxErrorBytes = 4096
	// MaxPodBytes bounds a pod name (a DNS subdomain).
	MaxPodBytes = 253
	// MaxEngineBytes bounds an engine's name ("fasthttp", "net/http").
	MaxEngineBytes = 32
)

// Validate checks a record's fields and its state.
func (r *Record) Validate() error {
	switch r.Kind {
	case KindReady, KindInterval, KindFinal, KindError:
	default:
		return fmt.Errorf("kind %q: want ready, interval, final or error", r.Kind)
	}
	if r.Worker < 0 || r.Worker >= MaxWorkers {
		return fmt.Errorf("worker %d out of range [0, %d)", r.Worker, MaxWorkers)
	}
	if r.Seq < 0 {
		return fmt.Errorf("seq %d is negative", r.Seq)
	}
	if len(r.Pod) > MaxPodBytes || len(r.Error) > MaxErrorBytes {
		return fmt.Errorf("pod name of %d bytes or error of %d bytes: at most %d and %d", len(r.Pod), len(r.Error), MaxPodBytes, MaxErrorBytes)
	}
	if err := validEngine(r.Engine); err != nil {
		return err
	}
	if (r.Kind == KindInterval || r.Kind == KindFinal) && r.State == nil {
		return fmt.Errorf("%s record without a state", r.Kind)
	}
	if r.Kind == KindError && r.Error == "" {
		return fmt.Errorf("error record without an error")
	}
	if r.State != nil {
		if err := r.State.Validate(); err != nil {
			return err
		}
	}
	if r.Results != nil {
		if err := r.Results.Validate(); err != nil {
			return err
		}
	}
	if r.Rules != nil {
		if err := ValidateRules(r.Rules); err != nil {
			return err
		}
	}
	return nil
}

// validEngine accepts an engine name a later worker version may bring
// (the reader ignores what it does not know, within a major version), as
// long as it is short and made of the characters engine names use: it is
// printed in the report.
func validEngine(e string) error {
	if len(e) > MaxEngineBytes {
		return fmt.Errorf("engine of %d bytes: at most %d", len(e), MaxEngineBytes)
	}
	for _, c := range e {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.ContainsRune("/._-", c)) {
			return fmt.Errorf("engine %q: want lower-case letters, digits and / . _ -", e)
		}
	}
	return nil
}

// Bounds of a record's rule statistics.
const (
	// MaxRules bounds the rules (and the empty captures) a record names.
	MaxRules = 256
	// MaxRuleBytes bounds a rule's name.
	MaxRuleBytes = 4096
	// MaxFields bounds the attributed fields counted.
	MaxFields = 16
)

// ValidateRules checks the rule statistics a record carries.
func ValidateRules(s *attribution.Stats) error {
	if s.Responses < 0 || s.Unresolved < 0 {
		return fmt.Errorf("rules: responses %d, unresolved %d: want counts", s.Responses, s.Unresolved)
	}
	if len(s.Rules) > MaxRules || len(s.Empty) > MaxRules || len(s.Fields) > MaxFields {
		return fmt.Errorf("rules: %d rules, %d empty captures, %d fields: at most %d, %d and %d", len(s.Rules), len(s.Empty), len(s.Fields), MaxRules, MaxRules, MaxFields)
	}
	samples := func(what string, ss []string) error {
		if len(ss) > attribution.MaxSamples {
			return fmt.Errorf("rules: %s: %d samples, at most %d", what, len(ss), attribution.MaxSamples)
		}
		for _, x := range ss {
			// Invalid UTF-8 in a sample comes back as U+FFFD, 3 bytes.
			if len(x) > 3*attribution.SampleBytes {
				return fmt.Errorf("rules: %s: a sample of %d bytes, at most %d", what, len(x), 3*attribution.SampleBytes)
			}
		}
		return nil
	}
	for i, r := range s.Rules {
		if len(r.Rule) > MaxRuleBytes || r.Matched < 0 {
			return fmt.Errorf("rules: rule %d: name of %d bytes (at most %d), matched %d", i, len(r.Rule), MaxRuleBytes, r.Matched)
		}
		if err := samples(fmt.Sprintf("rule %d", i), r.Samples); err != nil {
			return err
		}
	}
	for f, n := range s.Fields {
		if len(f) > MaxRuleBytes || n < 0 {
			return fmt.Errorf("rules: field of %d bytes counted %d", len(f), n)
		}
	}
	for i, e := range s.Empty {
		if len(e.Rule) > MaxRuleBytes || len(e.Field) > MaxRuleBytes || e.Count < 0 {
			return fmt.Errorf("rules: empty capture %d: rule of %d bytes, count %d", i, len(e.Rule), e.Count)
		}
		if err := samples(fmt.Sprintf("empty capture %d", i), e.Samples); err != nil {
			return err
		}
	}
	return nil
}

// Encode writes rec as one line, with the current Version.
func Encode(w io.Writer, rec Record) error {
	_, err := EncodeRecord(w, rec)
	return err
}

// EncodeRecord writes rec as one line, with the current Version. A record
// that its results batch would make MaxLineBytes long or longer is
// printed without the batch's rows, which are counted cut (the returned
// count): the state and the counts always get through.
func EncodeRecord(w io.Writer, rec Record) (cut int, err error) {
	rec.Version = Version
	if err := rec.Validate(); err != nil {
		return 0, fmt.Errorf("encode record %d of worker %d: %w", rec.Seq, rec.Worker, err)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return 0, fmt.Errorf("encode record %d of worker %d: %w", rec.Seq, rec.Worker, err)
	}
	if r := rec.Results; len(b) >= MaxLineBytes && r != nil && r.Len() > 0 {
		cut = r.Len()
		rec.Results = &Results{First: r.First + int64(cut), Cut: r.Cut + int64(cut), Base: r.Base, Rows: []int64{}}
		if b, err = json.Marshal(rec); err != nil {
			return 0, fmt.Errorf("encode record %d of worker %d: %w", rec.Seq, rec.Worker, err)
		}
	}
	if len(b) >= MaxLineBytes {
		return cut, fmt.Errorf("encode record %d of worker %d: %d bytes, at most %d", rec.Seq, rec.Worker, len(b), MaxLineBytes-1)
	}
	if _, err := w.Write(append(b, '\n')); err != nil {
		return cut, fmt.Errorf("write record %d of worker %d: %w", rec.Seq, rec.Worker, err)
	}
	return cut, nil
}

// Skipped counts the lines a Decoder passed over, by reason.
type Skipped struct {
	// NotRecord: other output of the pod (klog lines, panics, ...).
	NotRecord int64
	// TooLong: lines of MaxLineBytes or more.
	TooLong int64
	// Invalid: lines tagged as records that do not parse or validate (a
	// line cut short by log rotation, say); LastInvalid says why.
	Invalid     int64
	LastInvalid string
}

// Decoder reads records from a worker pod's log stream.
type Decoder struct {
	r       *bufio.Reader
	line    int64
	skipped Skipped
	buf     []byte
	// err is a read error that came with the last line, returned next.
	err error
}

// ErrVersion is wrapped by the error of a record of an unknown major
// version: the coordinator cannot read what this worker sends.
var ErrVersion = errors.New("unsupported record version")

// NewDecoder reads from r.
func NewDecoder(r io.Reader) *Decoder {
	return &Decoder{r: bufio.NewReaderSize(r, 64<<10)}
}

// Line is the number of the last line read (from 1).
func (d *Decoder) Line() int64 { return d.line }

// Skipped says how many lines were not records, and why.
func (d *Decoder) Skipped() Skipped { return d.skipped }

var tagPrefix = []byte(`{"` + Tag + `"`)

// Next returns the next record, io.EOF at the end of the stream, or an
// error wrapping ErrVersion for a record of another major version (the
// line after it can still be read). A last line without a newline is read
// like the others.
func (d *Decoder) Next() (Record, error) {
	for {
		if d.err != nil {
			return Record{}, d.err
		}
		line, long, err := d.readLine()
		if err != nil && len(line) == 0 && !long {
			d.err = err
			return Record{}, err
		}
		d.err = err
		d.line++
		if long {
			d.skipped.TooLong++
			continue
		}
		line = bytes.TrimSpace(line)
		if !bytes.HasPrefix(line, tagPrefix) {
			d.skipped.NotRecord++
			continue
		}
		// One parse for the common case; the version is read on its own
		// only when the record does not parse, to tell a record of a newer
		// major version from a broken line.
		var rec Record
		if jerr := json.Unmarshal(line, &rec); jerr != nil {
			var head struct {
				Version string `json:"meshVerifyWorker"`
				Worker  int    `json:"worker"`
			}
			if json.Unmarshal(line, &head) == nil {
				if err := versionError(head.Version, head.Worker, d.line); err != nil {
					return Record{}, err
				}
				d.invalid(fmt.Sprintf("worker %d, line %d: %v", head.Worker, d.line, jerr))
			} else {
				d.invalid(fmt.Sprintf("line %d: %v", d.line, jerr))
			}
			continue
		}
		if err := versionError(rec.Version, rec.Worker, d.line); err != nil {
			return Record{}, err
		}
		if verr := rec.Validate(); verr != nil {
			d.invalid(fmt.Sprintf("worker %d, line %d: %v", rec.Worker, d.line, verr))
			continue
		}
		rec.checked = true
		return rec, nil
	}
}

// versionError is ErrVersion, naming worker and line, for a record of
// another major version than this coordinator reads; nil otherwise.
func versionError(version string, worker int, line int64) error {
	if major, ok := parseMajor(version); !ok || major != versionMajor {
		return fmt.Errorf("worker %d, line %d: record version %q: %w (this coordinator reads %s)", worker, line, version, ErrVersion, Version)
	}
	return nil
}

func (d *Decoder) invalid(why string) {
	d.skipped.Invalid++
	d.skipped.LastInvalid = why
}

// readLine reads one line without its newline; a line of MaxLineBytes or
// more is read to its end but not kept (long is true).
func (d *Decoder) readLine() (line []byte, long bool, err error) {
	d.buf = d.buf[:0]
	for {
		chunk, err := d.r.ReadSlice('\n')
		if !long {
			if len(d.buf)+len(chunk) > MaxLineBytes {
				long = true
				d.buf = d.buf[:0]
			} else {
				d.buf = append(d.buf, chunk...)
			}
		}
		switch {
		case err == nil:
			return bytes.TrimSuffix(d.buf, []byte("\n")), long, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		default:
			return d.buf, long, err
		}
	}
}

// parseMajor reads "v1" or "v1.2" as 1.
func parseMajor(v string) (int, bool) {
	s, ok := strings.CutPrefix(v, "v")
	if !ok {
		return 0, false
	}
	s, _, _ = strings.Cut(s, ".")
	n, err := strconv.Atoi(s)
	return n, err == nil && n >= 0
}
