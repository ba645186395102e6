package fleet

import (
	"container/heap"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
)

// A distributed run's results.bin and attribution.jsonl (docs/distributed.md,
// Results): every worker records its results as a local run does, but
// into a ResultBuffer, which each record it prints empties into the
// record's `results` batch; the coordinator's ResultWriter puts the
// batches of all workers back into one stream, in timestamp order as far
// as its bounded buffer allows, for the run directory's recorder.

// Limits on a batch of results and on what the coordinator holds.
const (
	// MaxBatchResults bounds the results one record carries: a worker
	// keeps at most that many between two records and counts the rest as
	// cut (Results.Cut). At one record a second it is 20,000 results a
	// second per worker; at 1,000 workers, one record every 10 s, 2,000.
	MaxBatchResults = 20000
	// MaxBatchStrings bounds a batch's string table (methods, URLs,
	// errors, who answered) and MaxBatchStringBytes its bytes: a result
	// that would pass either is cut.
	MaxBatchStrings     = 4096
	MaxBatchStringBytes = 1 << 20
	// MaxResultString bounds one string of the table; a longer error is
	// shortened (on a rune boundary, with "...").
	MaxResultString = 1024
	// MaxPendingResults bounds the results the coordinator holds to put
	// them in timestamp order (about 200 bytes each): past it the oldest
	// are written, and a result that arrives later than one with a later
	// timestamp was written before it is written out of order.
	MaxPendingResults = 100000
)

// Columns of a row of Results.Rows, in order. A string column holds its
// index in Results.Strings plus one, 0 for an empty string.
const (
	colSeq      = iota // vegeta's sequence number of the request at the worker
	colRequest         // the request number of its id (<run>-w<i>-<n>), -1 without one
	colTime            // the timestamp, nanoseconds after Results.Base
	colLatency         // nanoseconds
	colCode            // HTTP status, 0 without a response
	colBytesIn         // response bytes
	colBytesOut        // request bytes
	colConn            // the worker's connection number, 0 for none
	colFlags           // flagOK | flagUnread
	colAttack          // strings: vegeta's attack name,
	colMethod          // the method,
	colURL             // the URL,
	colError           // the error,
	colCluster         // and who answered, as attribution read it
	colPod
	colVersion
	colService
	// ResultColumns is the length of every row.
	ResultColumns
)

const (
	flagOK     = 1 // counted as answered
	flagUnread = 2 // the body was never read (attribution overloaded or aborted)
)

// Results is the batch of results a worker recorded since its previous
// record (field `results` of interval, final and error records, format
// v1.1; a v1 reader ignores it).
type Results struct {
	// First is how many results the worker had recorded before this batch:
	// the index of its first row in the worker's results. A batch whose
	// First is past the results already taken says a record was lost.
	First int64 `json:"first"`
	// Cut counts the results the worker recorded but never sent, over its
	// whole attack: a batch full (MaxBatchResults, MaxBatchStrings,
	// MaxBatchStringBytes) or a record too long to print with them.
	Cut int64 `json:"cut,omitempty"`
	// Base is the time the rows' timestamps count from.
	Base time.Time `json:"base"`
	// Strings are the texts the rows name.
	Strings []string `json:"strings,omitempty"`
	// Rows are the results, ResultColumns numbers each.
	Rows [][]int64 `json:"rows"`
}

// Validate checks a batch's bounds and that every row's strings exist.
func (r *Results) Validate() error {
	if r.First < 0 || r.Cut < 0 {
		return fmt.Errorf("results: first %d, cut %d: want counts", r.First, r.Cut)
	}
	if len(r.Rows) > MaxBatchResults {
		return fmt.Errorf("results: %d rows, at most %d", len(r.Rows), MaxBatchResults)
	}
	if len(r.Strings) > MaxBatchStrings {
		return fmt.Errorf("results: %d strings, at most %d", len(r.Strings), MaxBatchStrings)
	}
	total := 0
	for i, s := range r.Strings {
		// A string the worker cut to MaxResultString may come back longer
		// when invalid UTF-8 became U+FFFD (3 bytes) in JSON.
		if len(s) > 3*MaxResultString {
			return fmt.Errorf("results: string %d of %d bytes, at most %d", i, len(s), 3*MaxResultString)
		}
		total += len(s)
	}
	if total > 3*MaxBatchStringBytes {
		return fmt.Errorf("results: strings of %d bytes, at most %d", total, 3*MaxBatchStringBytes)
	}
	for i, row := range r.Rows {
		if len(row) != ResultColumns {
			return fmt.Errorf("results: row %d has %d columns, want %d", i, len(row), ResultColumns)
		}
		if row[colSeq] < 0 || row[colRequest] < -1 || row[colLatency] < 0 || row[colCode] < 0 || row[colCode] > 999 ||
			row[colBytesIn] < 0 || row[colBytesOut] < 0 || row[colConn] < 0 || row[colConn] > 1<<32-1 || row[colFlags]&^(flagOK|flagUnread) != 0 {
			return fmt.Errorf("results: row %d: a field out of range: %v", i, row[:colAttack])
		}
		for c := colAttack; c < ResultColumns; c++ {
			if row[c] < 0 || row[c] > int64(len(r.Strings)) {
				return fmt.Errorf("results: row %d column %d names string %d of %d", i, c, row[c], len(r.Strings))
			}
		}
	}
	return nil
}

// ResultBuffer keeps a worker's results between two records
// (measure.Recorder: the sink records into it as into a run directory's
// recorder). At most MaxBatchResults results and the batch's string
// bounds are kept; the rest is counted as cut. Safe for the sink's
// collector and the record printer at once.
type ResultBuffer struct {
	mu sync.Mutex
	// prefix is the worker's run id and "-": a request id is prefix+n.
	prefix  string
	first   int64 // results recorded before the batch
	cut     int64
	base    time.Time
	strs    map[string]int64
	strings []string
	bytes   int
	rows    [][]int64
}

// NewResultBuffer buffers the results of the worker whose request ids are
// runID-<n> (the worker's run id, <run>-w<i>).
func NewResultBuffer(runID string) *ResultBuffer {
	return &ResultBuffer{prefix: runID + "-", strs: map[string]int64{}}
}

// Record keeps one result and who served it (measure.Recorder).
func (b *ResultBuffer) Record(r *attack.Result, id attribution.Identity, ok bool) {
	b.add(r, id, ok, false)
}

// RecordUnread keeps a result whose body was never read.
func (b *ResultBuffer) RecordUnread(r *attack.Result, ok bool) {
	b.add(r, attribution.Identity{}, ok, true)
}

// Close has nothing to release: the last batch goes with the final record.
func (b *ResultBuffer) Close() error { return nil }

func (b *ResultBuffer) add(r *attack.Result, id attribution.Identity, ok, unread bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.rows) >= MaxBatchResults {
		b.cut++
		return
	}
	if len(b.rows) == 0 {
		b.base = r.Timestamp
	}
	row := make([]int64, ResultColumns)
	row[colSeq] = int64(min(r.Seq, 1<<62))
	row[colRequest] = -1
	if n, found := strings.CutPrefix(r.RequestID, b.prefix); found {
		if v, err := strconv.ParseInt(n, 10, 64); err == nil && v >= 0 {
			row[colRequest] = v
		}
	}
	row[colTime] = int64(r.Timestamp.Sub(b.base))
	row[colLatency] = int64(max(r.Latency, 0))
	row[colCode] = int64(min(r.Code, 999))
	row[colBytesIn], row[colBytesOut] = int64(min(r.BytesIn, 1<<62)), int64(min(r.BytesOut, 1<<62))
	if r.ConnID < 1<<32 {
		row[colConn] = int64(r.ConnID)
	}
	if ok {
		row[colFlags] |= flagOK
	}
	if unread {
		row[colFlags] |= flagUnread
	}
	// The strings are added after the checks: a cut result leaves none.
	texts := [...]string{r.Attack, r.Method, r.URL, shorten(r.Error), id.Cluster, id.Pod, id.Version, id.Service}
	fresh, freshBytes := 0, 0
	for i, s := range texts {
		if _, seen := b.strs[s]; s != "" && !seen && !containsBefore(texts[:i], s) {
			fresh++
			freshBytes += len(s)
		}
	}
	if len(b.strings)+fresh > MaxBatchStrings || b.bytes+freshBytes > MaxBatchStringBytes {
		b.cut++
		return
	}
	for i, s := range texts {
		row[colAttack+i] = b.intern(s)
	}
	b.rows = append(b.rows, row)
}

func containsBefore(texts []string, s string) bool {
	for _, t := range texts {
		if t == s {
			return true
		}
	}
	return false
}

func (b *ResultBuffer) intern(s string) int64 {
	if s == "" {
		return 0
	}
	if i, ok := b.strs[s]; ok {
		return i
	}
	b.strings = append(b.strings, s)
	b.bytes += len(s)
	i := int64(len(b.strings))
	b.strs[s] = i
	return i
}

// shorten cuts an error text to MaxResultString bytes on a rune boundary.
func shorten(s string) string {
	if len(s) <= MaxResultString {
		return s
	}
	n := MaxResultString - 3
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// Take empties the buffer into a batch for the next record.
func (b *ResultBuffer) Take() *Results {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := &Results{First: b.first, Cut: b.cut, Base: b.base, Strings: b.strings, Rows: b.rows}
	if r.Rows == nil {
		r.Rows = [][]int64{}
	}
	b.first += int64(len(b.rows))
	b.rows, b.strings, b.bytes, b.strs = nil, nil, 0, map[string]int64{}
	return r
}

// Uncut counts n results of a batch that was printed without them (its
// record too long with them, EncodeRecord) as cut.
func (b *ResultBuffer) Uncut(n int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.cut += int64(n)
}

// ResultSink takes a distributed run's merged results: the run
// directory's recorder (measure.Recorder) or nothing.
type ResultSink interface {
	Record(r *attack.Result, id attribution.Identity, ok bool)
	RecordUnread(r *attack.Result, ok bool)
}

// ResultWriter puts the workers' batches into one stream of results for
// a ResultSink, renumbered in the order written (results.bin and
// attribution.jsonl join by that Seq) and in timestamp order as far as
// MaxPendingResults lets it hold them. Not safe for concurrent use: the
// coordinator feeds it from one goroutine.
type ResultWriter struct {
	out   ResultSink
	runID string
	// next is, per worker, how many of its results were taken.
	next    map[int]int64
	cut     map[int]int64
	pending pendingHeap
	max     int
	written uint64
	last    time.Time
	stats   ResultStats
}

// ResultStats says what a ResultWriter wrote and what it could not.
type ResultStats struct {
	// Written results; OutOfOrder of them were written after a result
	// with a later timestamp.
	Written, OutOfOrder int64
	// Cut results the workers recorded and did not send (their batches
	// full); Missing results were in records the coordinator never read
	// (lost lines) or could not take.
	Cut, Missing int64
}

type pendingResult struct {
	t      time.Time
	worker int
	row    []int64
	strs   []string
}

type pendingHeap []pendingResult

func (h pendingHeap) Len() int { return len(h) }
func (h pendingHeap) Less(i, j int) bool {
	if !h[i].t.Equal(h[j].t) {
		return h[i].t.Before(h[j].t)
	}
	return h[i].worker < h[j].worker
}
func (h pendingHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pendingHeap) Push(x any)   { *h = append(*h, x.(pendingResult)) }
func (h *pendingHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	old[len(old)-1] = pendingResult{}
	*h = old[:len(old)-1]
	return x
}

// NewResultWriter writes to out the results of run runID's workers,
// holding at most maxPending (MaxPendingResults when 0 or less) to order
// them. A nil out counts and drops them.
func NewResultWriter(out ResultSink, runID string, maxPending int) *ResultWriter {
	if maxPending <= 0 {
		maxPending = MaxPendingResults
	}
	return &ResultWriter{out: out, runID: runID, next: map[int]int64{}, cut: map[int]int64{}, max: maxPending}
}

// Add takes worker's batch (from a record the merger accepted, so each
// batch comes once). Rows the writer already has (a batch that overlaps
// an earlier one) are skipped; a gap before the batch is counted missing.
func (w *ResultWriter) Add(worker int, r *Results) error {
	if r == nil {
		return nil
	}
	if err := r.Validate(); err != nil {
		return fmt.Errorf("worker %d: %w", worker, err)
	}
	if r.Cut > w.cut[worker] {
		w.stats.Cut += r.Cut - w.cut[worker]
		w.cut[worker] = r.Cut
	}
	next := w.next[worker]
	if r.First > next {
		w.stats.Missing += r.First - next
		next = r.First
	}
	skip := next - r.First
	for i := skip; i < int64(len(r.Rows)); i++ {
		row := r.Rows[i]
		heap.Push(&w.pending, pendingResult{t: r.Base.Add(time.Duration(row[colTime])), worker: worker, row: row, strs: r.Strings})
		next++
	}
	w.next[worker] = max(next, w.next[worker])
	for len(w.pending) > w.max {
		w.writeOldest()
	}
	return nil
}

// Flush writes every result held and returns what was written in all.
func (w *ResultWriter) Flush() ResultStats {
	for len(w.pending) > 0 {
		w.writeOldest()
	}
	return w.stats
}

func (w *ResultWriter) writeOldest() {
	p := heap.Pop(&w.pending).(pendingResult)
	if p.t.Before(w.last) {
		w.stats.OutOfOrder++
	} else {
		w.last = p.t
	}
	str := func(c int) string {
		if i := p.row[c]; i > 0 {
			return p.strs[i-1]
		}
		return ""
	}
	res := attack.Result{Result: &vegeta.Result{
		Attack: str(colAttack), Seq: w.written, Code: uint16(p.row[colCode]), Timestamp: p.t,
		Latency: time.Duration(p.row[colLatency]), BytesOut: uint64(p.row[colBytesOut]), BytesIn: uint64(p.row[colBytesIn]),
		Error: str(colError), Method: str(colMethod), URL: str(colURL),
	}}
	if n := p.row[colRequest]; n >= 0 {
		res.RequestID = w.runID + "-w" + strconv.Itoa(p.worker) + "-" + strconv.FormatInt(n, 10)
	}
	// Connections are numbered per worker: the run's number puts the
	// worker above the worker's own 32 bits.
	if c := p.row[colConn]; c > 0 {
		res.ConnID = uint64(p.worker+1)<<32 | uint64(c)
	}
	w.written++
	w.stats.Written++
	if w.out == nil {
		return
	}
	ok := p.row[colFlags]&flagOK != 0
	if p.row[colFlags]&flagUnread != 0 {
		w.out.RecordUnread(&res, ok)
		return
	}
	w.out.Record(&res, attribution.Identity{Cluster: str(colCluster), Pod: str(colPod), Version: str(colVersion), Service: str(colService)}, ok)
}

// Warning says what results.bin lacks, "" when nothing.
func (s ResultStats) Warning() string {
	if s.Cut+s.Missing == 0 {
		return ""
	}
	return fmt.Sprintf("results.bin and attribution.jsonl lack %d of the workers' results: %d cut by the workers (more than %d, or more than %d distinct texts, between two of a worker's records) and %d in records the coordinator could not read; the counts and the verdict include them",
		s.Cut+s.Missing, s.Cut, MaxBatchResults, MaxBatchStrings, s.Missing)
}
