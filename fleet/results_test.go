package fleet

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/runlog"
	"github.com/mesh-verify/mesh-verify/tally"
)

// workerResults records n results of worker w into a buffer, one every
// 3 ms from start shifted by w ms (the workers interleave in time), and
// returns the records a worker would print: one every `every` results.
func workerResults(t testing.TB, runID string, w, n, every int, start time.Time) []Record {
	t.Helper()
	b := NewResultBuffer(fmt.Sprintf("%s-w%d", runID, w))
	tl := tally.New(start, time.Minute)
	var recs []Record
	for i := range n {
		r := &attack.Result{Result: &vegeta.Result{Attack: "mesh-verify", Seq: uint64(i), Code: 200, Method: "GET", URL: "http://web.demo:8080/",
			Timestamp: start.Add(time.Duration(3*i+w) * time.Millisecond), Latency: time.Duration(1+i%7) * time.Millisecond, BytesIn: 42},
			RequestID: fmt.Sprintf("%s-w%d-%d", runID, w, i), ConnID: uint64(1 + i%4)}
		id := attribution.Identity{Cluster: fmt.Sprintf("c%d", 1+i%2), Pod: fmt.Sprintf("web-%d", i%3), Version: "v1"}
		switch {
		case i%11 == 5:
			r.Code, r.Error = 0, "dial tcp: connection refused"
			b.Record(r, attribution.Identity{}, false)
			tl.Add(r, attribution.Identity{})
		case i%13 == 7:
			b.RecordUnread(r, true)
			tl.AddUnread(r)
		default:
			b.Record(r, id, true)
			tl.Add(r, id)
		}
		if (i+1)%every == 0 || i == n-1 {
			kind := KindInterval
			if i == n-1 {
				kind = KindFinal
			}
			s := tl.State()
			recs = append(recs, Record{Kind: kind, Worker: w, Pod: fmt.Sprintf("mv-%d", w), Seq: int64(len(recs) + 1), Time: r.Timestamp, State: &s, Results: b.Take()})
		}
	}
	return recs
}

// The workers' batches go through the record format and the decoder into
// one run directory: results.bin holds every result once (a record read
// twice counts once), vegeta's own decoder reads it, the timestamps are
// in order, results.bin and attribution.jsonl join by Seq, and each line
// names the worker's request id and who answered. A real runlog recorder
// writes the files.
func TestResultsReachResultsBin(t *testing.T) {
	t.Parallel()
	const runID = "r1"
	start := time.Unix(1700000000, 0)
	var lines bytes.Buffer
	per := [][]Record{workerResults(t, runID, 0, 500, 70, start), workerResults(t, runID, 1, 400, 90, start), workerResults(t, runID, 2, 300, 1000, start)}
	// Arrival: the workers' records interleaved, worker 1's second
	// record read twice (a log re-read after a reconnect).
	for i := 0; ; i++ {
		more := false
		for w, recs := range per {
			if i < len(recs) {
				more = true
				lines.WriteString(encode(t, recs[i]))
				if w == 1 && i == 1 {
					lines.WriteString(encode(t, recs[i]))
				}
			}
		}
		if !more {
			break
		}
	}
	dir := t.TempDir()
	rec, err := runlog.Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	m, rw := NewMerger(start), NewResultWriter(rec, runID, 0)
	dec := NewDecoder(&lines)
	for {
		r, err := dec.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := m.Add(r); err != nil {
			t.Fatal(err)
		} else if ok {
			if err := rw.Add(r.Worker, r.Results); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := rw.Flush()
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	if st != (ResultStats{Written: 1200}) || st.Warning() != "" {
		t.Fatalf("stats %+v (%q), want 1200 written, nothing cut, missing or out of order", st, st.Warning())
	}
	if m.Snapshot().Total != 1200 {
		t.Fatalf("merged %d requests", m.Snapshot().Total)
	}

	// vegeta's decoder, as `vegeta report` reads the file.
	f, err := os.Open(filepath.Join(dir, runlog.ResultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vd := vegeta.NewDecoder(bufio.NewReader(f))
	var prev time.Time
	n := 0
	for {
		var r vegeta.Result
		if err := vd.Decode(&r); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("vegeta decodes result %d: %v", n, err)
		}
		if r.Timestamp.Before(prev) || r.Seq != uint64(n) || r.Method != "GET" || r.Attack != "mesh-verify" {
			t.Fatalf("result %d: %+v after %s", n, r, prev)
		}
		prev = r.Timestamp
		n++
	}
	if n != 1200 {
		t.Fatalf("results.bin holds %d results, want 1200", n)
	}

	byWorker := map[string]int{}
	ids := map[string]bool{}
	err = runlog.ReadResults(dir, func(r *vegeta.Result, a runlog.Attribution) error {
		w, _, _ := strings.Cut(strings.TrimPrefix(a.RequestID, runID+"-"), "-")
		byWorker[w]++
		if ids[a.RequestID] {
			return fmt.Errorf("request id %s twice", a.RequestID)
		}
		ids[a.RequestID] = true
		switch {
		case r.Error != "" && (a.OK || a.Cluster != ""):
			return fmt.Errorf("a failed request attributed: %+v", a)
		case a.Unread && a.Pod != "":
			return fmt.Errorf("an unread body attributed: %+v", a)
		case r.Error == "" && !a.Unread && (a.Cluster == "" || !strings.HasPrefix(a.Pod, "web-") || a.ConnID>>32 == 0):
			return fmt.Errorf("line %+v: want a cluster, a pod and a connection numbered per worker", a)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if byWorker["w0"] != 500 || byWorker["w1"] != 400 || byWorker["w2"] != 300 {
		t.Errorf("request ids per worker %v", byWorker)
	}
}

// What the writer cannot write is counted, never silently lost: results
// past a batch's bound are cut at the worker, a record that never
// arrived leaves a gap, and a bounded writer says how many it wrote out
// of timestamp order.
func TestResultsCutMissingAndOutOfOrder(t *testing.T) {
	t.Parallel()
	start := time.Unix(1700000000, 0)
	b := NewResultBuffer("r-w0")
	for i := range MaxBatchResults + 25 {
		b.Record(&attack.Result{Result: &vegeta.Result{Timestamp: start.Add(time.Duration(i))}}, attribution.Identity{}, true)
	}
	first := b.Take()
	if first.Len() != MaxBatchResults || first.Cut != 25 || first.First != 0 {
		t.Fatalf("first batch: %d rows, cut %d, first %d", first.Len(), first.Cut, first.First)
	}
	for i := range 10 {
		b.Record(&attack.Result{Result: &vegeta.Result{Timestamp: start.Add(time.Duration(i))}}, attribution.Identity{}, true)
	}
	lost := b.Take() // never arrives
	for i := range 5 {
		b.Record(&attack.Result{Result: &vegeta.Result{Timestamp: start.Add(time.Duration(i))}}, attribution.Identity{}, true)
	}
	b.Uncut(2) // two of a batch printed without its rows
	last := b.Take()
	if lost.First != MaxBatchResults || last.First != MaxBatchResults+10 || last.Cut != 27 {
		t.Fatalf("batches: lost first %d, last first %d cut %d", lost.First, last.First, last.Cut)
	}
	// Distinct texts past the table's bound are cut too.
	for i := range MaxBatchStrings + 3 {
		b.Record(&attack.Result{Result: &vegeta.Result{Timestamp: start, Error: fmt.Sprintf("error %d", i)}}, attribution.Identity{}, false)
	}
	if full := b.Take(); len(full.Strings) != MaxBatchStrings || full.Cut != 27+3 {
		t.Fatalf("a full string table: %d strings, cut %d", len(full.Strings), full.Cut)
	}

	w := NewResultWriter(nil, "r", 1000)
	for _, r := range []*Results{first, last} {
		if err := w.Add(0, r); err != nil {
			t.Fatal(err)
		}
	}
	st := w.Flush()
	if st.Written != MaxBatchResults+5 || st.Cut != 27 || st.Missing != 10 || st.OutOfOrder == 0 {
		t.Fatalf("stats %+v: want %d written, 27 cut, 10 missing, some out of order (the last batch's timestamps are earlier)", st, MaxBatchResults+5)
	}
	if w := st.Warning(); !strings.Contains(w, "lack 37 of the workers' results: 27 cut") || !strings.Contains(w, "10 in records") {
		t.Errorf("warning %q", w)
	}
}

func TestResultsValidate(t *testing.T) {
	t.Parallel()
	row := func(edit func([]int64)) []int64 {
		r := make([]int64, ResultColumns)
		edit(r)
		return r
	}
	for _, c := range []struct {
		name string
		r    Results
		want string
	}{
		{"negative first", Results{First: -1}, "first -1"},
		{"short row", Results{Rows: []int64{1, 2}}, "2 numbers in rows, not rows of 17"},
		{"unknown string", Results{Strings: []string{"a"}, Rows: row(func(r []int64) { r[colError] = 2 })}, "names string 2 of 1"},
		{"negative latency", Results{Rows: row(func(r []int64) { r[colLatency] = -1 })}, "out of range"},
		{"code", Results{Rows: row(func(r []int64) { r[colCode] = 1000 })}, "out of range"},
		{"flags", Results{Rows: row(func(r []int64) { r[colFlags] = 4 })}, "out of range"},
		{"rows", Results{Rows: make([]int64, (MaxBatchResults+1)*ResultColumns)}, "at most 20000"},
		{"long string", Results{Strings: []string{strings.Repeat("x", 3*MaxResultString+1)}}, "string 0 of 3073 bytes"},
	} {
		if err := c.r.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	if err := (&Results{Strings: []string{"a"}, Rows: row(func(r []int64) { r[colError], r[colRequest] = 1, -1 })}).Validate(); err != nil {
		t.Errorf("a valid batch: %v", err)
	}
}

// Any batch a record may carry is written without a panic, and the
// writer accounts for every row it took.
func FuzzResults(f *testing.F) {
	start := time.Unix(1700000000, 0)
	recs := workerResults(f, "r", 0, 30, 10, start)
	for _, r := range recs {
		b, _ := json.Marshal(r.Results)
		f.Add(b, int64(0))
	}
	f.Add([]byte(`{"first":3,"cut":2,"base":"2026-01-01T00:00:00Z","strings":["x"],"rows":[0,-1,-5,0,0,0,0,0,0,1,0,0,0,0,0,0,0]}`), int64(1))
	f.Fuzz(func(t *testing.T, data []byte, gap int64) {
		var r Results
		if json.Unmarshal(data, &r) != nil {
			return
		}
		w := NewResultWriter(nil, "r", 3)
		if err := w.Add(0, &r); err != nil {
			return
		}
		if err := w.Add(0, &r); err != nil { // the same batch again: nothing new
			t.Fatal(err)
		}
		st := w.Flush()
		if st.Written > int64(r.Len()) || st.Written+st.Missing != max(r.First+int64(r.Len()), 0) {
			t.Fatalf("batch of %d rows from %d: %+v", r.Len(), r.First, st)
		}
	})
}

// The merger keeps each worker's latest rule statistics and adds them
// up; a v1 worker's records carry none.
func TestMergerRules(t *testing.T) {
	t.Parallel()
	start := time.Unix(1700000000, 0)
	s := tally.New(start, time.Minute).State()
	m := NewMerger(start)
	if m.Rules() != nil {
		t.Fatal("rules without any record")
	}
	add := func(w int, seq int64, matched int64, samples ...string) {
		t.Helper()
		rules := &attribution.Stats{Responses: matched + int64(len(samples)), Rules: []attribution.RuleStats{{Rule: "pod", Matched: matched, Samples: samples}},
			Fields: map[attribution.Field]int64{attribution.Pod: matched}}
		if _, err := m.Add(Record{Kind: KindInterval, Worker: w, Seq: seq, State: &s, Rules: rules}); err != nil {
			t.Fatal(err)
		}
	}
	add(0, 1, 10, "a")
	add(1, 1, 5, "b", "c")
	add(0, 2, 20, "a", "d") // cumulative: replaces worker 0's first
	got := m.Rules()
	if got.Responses != 29 || got.Rules[0].Matched != 25 || got.Fields[attribution.Pod] != 25 || strings.Join(got.Rules[0].Samples, ",") != "a,d,b" {
		t.Fatalf("merged %+v", got)
	}
	bad := &attribution.Stats{Rules: make([]attribution.RuleStats, MaxRules+1)}
	if _, err := m.Add(Record{Kind: KindInterval, Worker: 2, Seq: 1, State: &s, Rules: bad}); err == nil || !strings.Contains(err.Error(), "257 rules") {
		t.Errorf("too many rules: %v", err)
	}
}

// A look is taken when the merged count reaches it; a record that
// passes several takes the latest of them, never the final look (the
// run's end judges that one).
func TestLooksDue(t *testing.T) {
	t.Parallel()
	l := looks{at: []int64{100, 200, 300, 400}}
	for _, c := range []struct {
		next  int
		total int64
		want  int
	}{
		{0, 99, -1}, {0, 100, 0}, {0, 250, 1}, {1, 250, 1}, {2, 250, -1}, {0, 1000, 2}, {3, 1000, -1},
	} {
		if got := l.due(c.next, c.total); got != c.want {
			t.Errorf("due(%d, %d) = %d, want %d", c.next, c.total, got, c.want)
		}
	}
}

// BenchmarkResultsRecord is the coordinator's cost of one worker's record
// carrying a batch of 1,000 results (a second at 1,000 requests/s):
// decoding the batch and ordering it (a nil sink: the disk's own
// cost is runlog's, BenchmarkThroughput there).
func BenchmarkResultsRecord(b *testing.B) {
	start := time.Unix(1700000000, 0)
	recs := workerResults(b, "r", 0, 1000, 1000, start)
	line, err := json.Marshal(recs[0].Results)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := range b.N {
		var r Results
		if err := json.Unmarshal(line, &r); err != nil {
			b.Fatal(err)
		}
		w := NewResultWriter(nil, "r", 0)
		if err := w.Add(i%MaxWorkers, &r); err != nil {
			b.Fatal(err)
		}
		w.Flush()
	}
	b.ReportMetric(float64(len(line))/1000, "bytes/result")
}

// Shorten keeps a text within its bound, cut on a rune boundary.
func TestShorten(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in    string
		limit int
		want  string
	}{
		{"short", 5, "short"},
		{"abcdefgh", 6, "abc..."},
		// "é" is two bytes: cutting at byte 4 would split it.
		{"abcé" + "xyz", 7, "abc..."},
		{"abcéxyzw", 8, "abcé..."},
	} {
		got := Shorten(tc.in, tc.limit)
		if got != tc.want || len(got) > tc.limit {
			t.Errorf("Shorten(%q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

// A result's request number is kept only for a request id of the
// worker's own run (podlogs.ParseRequestID); any other id keeps none.
func TestResultBufferRequestNumber(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		id   string
		want int64
	}{
		{"r1-w0-5", 5},
		{"r1-w0-+5", -1},
		{"r1-w0-", -1},
		{"r1-w1-5", -1},
		{"r1-w0-281474976710656", -1}, // 2^48: beyond a worker's numbers
		{"other", -1},
	} {
		b := NewResultBuffer("r1-w0")
		b.Record(&attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: time.Unix(1700000000, 0)}, RequestID: tc.id}, attribution.Identity{}, true)
		rs := b.Take()
		if len(rs.Rows) != ResultColumns || rs.Rows[colRequest] != tc.want {
			t.Errorf("request id %q: rows %v, want request number %d", tc.id, rs.Rows, tc.want)
		}
	}
}
