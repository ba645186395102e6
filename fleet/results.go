package fleet

import (
	"fmt"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/podlogs"
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
	// them in timestamp order (about 200 bytes each, and the texts of the
	// batches they came from): past it the oldest
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
	// Rows are the results, ResultColumns numbers each, one after the
	// other in one flat list (one allocation to decode, not one a row).
	Rows []int64 `json:"rows"`
}

// Len is the number of results in the batch.
func (r *Results) Len() int { return len(r.Rows) / ResultColumns }

// row is result i's numbers.
func (r *Results) row(i int) []int64 { return r.Rows[i*ResultColumns : (i+1)*ResultColumns] }

// Validate checks a batch's bounds and that every row's strings exist.
func (r *Results) Validate() error {
	if r.First < 0 || r.Cut < 0 {
		return fmt.Errorf("results: first %d, cut %d: want counts", r.First, r.Cut)
	}
	if len(r.Rows)%ResultColumns != 0 {
		return fmt.Errorf("results: %d numbers in rows, not rows of %d", len(r.Rows), ResultColumns)
	}
	if r.Len() > MaxBatchResults {
		return fmt.Errorf("results: %d rows, at most %d", r.Len(), MaxBatchResults)
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
	for i := range r.Len() {
		row := r.row(i)
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
	// runID is the worker's run id: a request id is runID-<n>.
	runID   string
	first   int64 // results recorded before the batch
	cut     int64
	base    time.Time
	strs    map[string]int64
	strings []string
	bytes   int
	rows    []int64
}

// NewResultBuffer buffers the results of the worker whose request ids are
// runID-<n> (the worker's run id, <run>-w<i>).
func NewResultBuffer(runID string) *ResultBuffer {
	return &ResultBuffer{runID: runID, strs: map[string]int64{}}
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
	if len(b.rows) >= MaxBatchResults*ResultColumns {
		b.cut++
		return
	}
	if len(b.rows) == 0 {
		b.base = r.Timestamp
	}
	var row [ResultColumns]int64
	row[colSeq] = int64(min(r.Seq, 1<<62))
	row[colRequest] = -1
	if v, ok := podlogs.ParseRequestID(b.runID, r.RequestID); ok {
		row[colRequest] = int64(v) // below 2^48
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
	texts := [...]string{r.Attack, r.Method, r.URL, Shorten(r.Error, MaxResultString), id.Cluster, id.Pod, id.Version, id.Service}
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
	b.rows = append(b.rows, row[:]...)
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

// Shorten cuts s to at most limit bytes on a rune boundary, ending it with
// "..." when cut: a cut UTF-8 sequence would become U+FFFD, three bytes,
// in JSON, and a record would outgrow the bound the coordinator's decoder
// checks. limit is at least 3.
func Shorten(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	n := limit - 3
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
		r.Rows = []int64{}
	}
	b.first += int64(r.Len())
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
// directory's recorder (measure.Recorder) or nothing. It must not keep
// the result it is given (runlog's recorder copies it): the writer
// reuses it.
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
	// res and popped are reused for every result written.
	res    attack.Result
	popped pendingResult
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

// pendingResult is a result held for ordering: its row copied, so that
// the batch's rows are not kept alive by it, and the batch's texts.
type pendingResult struct {
	t      time.Time
	worker int
	row    [ResultColumns]int64
	strs   []string
}

// pendingHeap is a min-heap by timestamp (then worker), written out here
// rather than through container/heap, whose Push and Pop box every
// 200-byte result in an interface: an allocation per result.
type pendingHeap []pendingResult

func (h pendingHeap) less(i, j int) bool {
	if !h[i].t.Equal(h[j].t) {
		return h[i].t.Before(h[j].t)
	}
	return h[i].worker < h[j].worker
}

func (h *pendingHeap) push(p *pendingResult) {
	*h = append(*h, *p)
	x := *h
	for i := len(x) - 1; i > 0; {
		parent := (i - 1) / 2
		if !x.less(i, parent) {
			break
		}
		x[i], x[parent] = x[parent], x[i]
		i = parent
	}
}

// pop moves the oldest result into p.
func (h *pendingHeap) pop(p *pendingResult) {
	x := *h
	*p = x[0]
	n := len(x) - 1
	x[0] = x[n]
	x[n] = pendingResult{}
	x = x[:n]
	for i := 0; ; {
		l, small := 2*i+1, i
		if l < n && x.less(l, small) {
			small = l
		}
		if r := l + 1; r < n && x.less(r, small) {
			small = r
		}
		if small == i {
			break
		}
		x[i], x[small] = x[small], x[i]
		i = small
	}
	*h = x
}

// NewResultWriter writes to out the results of run runID's workers,
// holding at most maxPending (MaxPendingResults when 0 or less) to order
// them. A nil out counts and drops them.
func NewResultWriter(out ResultSink, runID string, maxPending int) *ResultWriter {
	if maxPending <= 0 {
		maxPending = MaxPendingResults
	}
	return &ResultWriter{out: out, runID: runID, next: map[int]int64{}, cut: map[int]int64{}, max: maxPending,
		res: attack.Result{Result: &vegeta.Result{}}}
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
	for i := int(next - r.First); i < r.Len(); i++ {
		p := pendingResult{t: r.Base.Add(time.Duration(r.row(i)[colTime])), worker: worker, strs: r.Strings}
		copy(p.row[:], r.row(i))
		w.pending.push(&p)
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
	p := &w.popped
	w.pending.pop(p)
	if p.t.Before(w.last) {
		w.stats.OutOfOrder++
	} else {
		w.last = p.t
	}
	row := &p.row
	str := func(c int) string {
		if i := row[c]; i > 0 {
			return p.strs[i-1]
		}
		return ""
	}
	// One result reused for every write: the sink copies what it keeps.
	res := &w.res
	*res.Result = vegeta.Result{
		Attack: str(colAttack), Seq: w.written, Code: uint16(row[colCode]), Timestamp: p.t,
		Latency: time.Duration(row[colLatency]), BytesOut: uint64(row[colBytesOut]), BytesIn: uint64(row[colBytesIn]),
		Error: str(colError), Method: str(colMethod), URL: str(colURL),
	}
	res.RequestID, res.ConnID = "", 0
	if n := row[colRequest]; n >= 0 {
		res.RequestID = w.runID + "-w" + strconv.Itoa(p.worker) + "-" + strconv.FormatInt(n, 10)
	}
	// Connections are numbered per worker: the run's number puts the
	// worker above the worker's own 32 bits.
	if c := row[colConn]; c > 0 {
		res.ConnID = uint64(p.worker+1)<<32 | uint64(c)
	}
	w.written++
	w.stats.Written++
	if w.out == nil {
		return
	}
	ok := row[colFlags]&flagOK != 0
	if row[colFlags]&flagUnread != 0 {
		w.out.RecordUnread(res, ok)
		return
	}
	w.out.Record(res, attribution.Identity{Cluster: str(colCluster), Pod: str(colPod), Version: str(colVersion), Service: str(colService)}, ok)
}

// Warning says what results.bin lacks, "" when nothing.
func (s ResultStats) Warning() string {
	if s.Cut+s.Missing == 0 {
		return ""
	}
	return fmt.Sprintf("results.bin and attribution.jsonl lack %d of the workers' results: %d cut by the workers (more than %d, or more than %d distinct texts, between two of a worker's records) and %d in records the coordinator could not read; the counts and the verdict include them",
		s.Cut+s.Missing, s.Cut, MaxBatchResults, MaxBatchStrings, s.Missing)
}
