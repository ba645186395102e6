package fleet

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
	"github.com/mesh-verify/mesh-verify/tally"
)

// workers runs k real tallies over one stream of results split by
// connection and returns each worker's state at the middle and the end.
func workers(t testing.TB, k, n int, start time.Time) (mid, final []tally.State) {
	rng := rand.New(rand.NewPCG(uint64(k), uint64(n)))
	tls := make([]*tally.Tally, k)
	for i := range tls {
		tls[i] = tally.New(start, time.Minute)
	}
	for i := range n {
		conn := uint64(1 + rng.IntN(40))
		r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start.Add(time.Duration(i) * time.Millisecond),
			Latency: time.Duration(rng.ExpFloat64() * float64(time.Millisecond))}, ConnID: conn}
		id := attribution.Identity{Cluster: fmt.Sprintf("c%d", 1+rng.IntN(3))}
		id.Pod = id.Cluster + "-pod"
		if rng.IntN(20) == 0 {
			r.Code, r.Error = 503, "503 Service Unavailable"
		}
		w := int(conn) % k
		tls[w].Add(r, id)
		if i == n/2 {
			for _, tl := range tls {
				mid = append(mid, tl.State())
			}
		}
	}
	for _, tl := range tls {
		final = append(final, tl.State())
	}
	return mid, final
}

func encode(t testing.TB, recs ...Record) string {
	var b bytes.Buffer
	for _, r := range recs {
		if err := Encode(&b, r); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// A pod's log mixes records with other output: the decoder returns the
// records, counts the rest by reason, and stops at a version it cannot
// read with an error naming the worker and the line.
func TestDecoder(t *testing.T) {
	start := time.Unix(1700000000, 0)
	_, final := workers(t, 1, 200, start)
	rec := Record{Kind: KindFinal, Worker: 3, Pod: "mv-w-3", Seq: 9, Time: start, State: &final[0]}
	good := encode(t, rec)
	tag := `"meshVerifyWorker":"` + Version + `"`
	v2 := strings.Replace(good, tag, `"meshVerifyWorker":"v2"`, 1)
	v11 := strings.Replace(good, tag, `"meshVerifyWorker":"v1.3","future":1`, 1)
	// A v1 worker's record (no results, no rules) is read as before.
	v1 := strings.Replace(good, tag, `"meshVerifyWorker":"v1"`, 1)
	for _, tc := range []struct {
		name    string
		in      string
		records int
		skipped Skipped
		errLine int64 // line of the version error, 0 for none
	}{
		{"records among klog and a panic", "I1201 10:00:00.000000 1 main.go:1] starting\n" + good + "panic: oops\n\ngoroutine 1 [running]:\n" + good,
			2, Skipped{NotRecord: 4}, 0},
		{"no newline at the end", strings.TrimSuffix(good, "\n"), 1, Skipped{}, 0},
		{"CRLF", strings.Replace(good, "\n", "\r\n", 1), 1, Skipped{}, 0},
		{"a line cut short", good[:len(good)/2] + "\n" + good, 1, Skipped{Invalid: 1}, 0},
		{"a line too long", strings.Repeat("x", MaxLineBytes) + "\n" + good, 1, Skipped{TooLong: 1}, 0},
		{"a record too long", `{"meshVerifyWorker":"v1","pad":"` + strings.Repeat("x", MaxLineBytes) + "\"}\n" + good, 1, Skipped{TooLong: 1}, 0},
		{"an invalid state", strings.Replace(good, `"total":200`, `"total":-5`, 1), 0, Skipped{Invalid: 1}, 0},
		{"a newer minor version", v11, 1, Skipped{}, 0},
		{"an older minor version", v1, 1, Skipped{}, 0},
		{"an unknown major version", "hello\n" + v2 + good, 1, Skipped{NotRecord: 1}, 2},
		{"not a version", strings.Replace(good, `"`+Version+`"`, `"one"`, 1), 0, Skipped{}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDecoder(strings.NewReader(tc.in))
			var got []Record
			var verr error
			var verrLine int64
			for range 100 {
				r, err := d.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					if !errors.Is(err, ErrVersion) || verr != nil {
						t.Fatalf("unexpected error %v", err)
					}
					verr, verrLine = err, d.Line()
					continue
				}
				got = append(got, r)
			}
			if len(got) != tc.records {
				t.Errorf("%d records, want %d", len(got), tc.records)
			}
			sk := d.Skipped()
			sk.LastInvalid = ""
			if sk != tc.skipped {
				t.Errorf("skipped %+v, want %+v", d.Skipped(), tc.skipped)
			}
			if tc.skipped.Invalid > 0 && !strings.Contains(d.Skipped().LastInvalid, "line") {
				t.Errorf("invalid line not explained: %q", d.Skipped().LastInvalid)
			}
			if tc.errLine != verrLine {
				t.Errorf("version error at line %d (%v), want line %d", verrLine, verr, tc.errLine)
			}
			if verr != nil && !strings.Contains(verr.Error(), "worker 3") {
				t.Errorf("version error does not name the worker: %v", verr)
			}
			for _, r := range got {
				if r.Worker != 3 || r.Pod != "mv-w-3" || r.Seq != 9 || !reflect.DeepEqual(*r.State, final[0]) {
					t.Errorf("record changed through the log: %+v", r)
				}
			}
		})
	}
}

func TestEncodeRejectsInvalidRecords(t *testing.T) {
	for _, r := range []Record{
		{Kind: "done", Worker: 1},
		{Kind: KindFinal, Worker: 1},
		{Kind: KindError, Worker: 1},
		{Kind: KindReady, Worker: -1},
		{Kind: KindReady, Worker: MaxWorkers},
		{Kind: KindReady, Worker: 1, Seq: -1},
		{Kind: KindReady, Worker: 1, Pod: strings.Repeat("p", MaxPodBytes+1)},
		{Kind: KindError, Worker: 1, Error: strings.Repeat("e", MaxErrorBytes+1)},
		{Kind: KindInterval, Worker: 1, State: &tally.State{}},
		{Kind: KindReady, Worker: 1, Engine: strings.Repeat("e", MaxEngineBytes+1)},
		{Kind: KindReady, Worker: 1, Engine: "fast\x1b[2Jhttp"},
		{Kind: KindReady, Worker: 1, Engine: "Fasthttp"},
	} {
		if err := Encode(io.Discard, r); err == nil {
			t.Errorf("encoded %+v", r)
		}
	}
	if err := Encode(io.Discard, Record{Kind: KindReady, Worker: MaxWorkers - 1}); err != nil {
		t.Errorf("a ready record: %v", err)
	}
	if err := Encode(io.Discard, Record{Kind: KindReady, Worker: 1, Engine: "net/http"}); err != nil {
		t.Errorf("a record naming the net/http engine: %v", err)
	}
}

// The report's attack.engine of a distributed run is what the workers'
// final records say: one name when they agree, every name when they do
// not, nothing from workers older than v1.2.
func TestMergerEngine(t *testing.T) {
	t.Parallel()
	start := time.Unix(1700000000, 0)
	_, final := workers(t, 3, 300, start)
	for _, tc := range []struct {
		name    string
		engines []string
		want    string
	}{
		{"agree", []string{"fasthttp", "fasthttp", "fasthttp"}, "fasthttp"},
		{"disagree", []string{"net/http", "fasthttp", "net/http"}, "fasthttp+net/http"},
		{"one older worker", []string{"fasthttp", "", "fasthttp"}, "fasthttp"},
		{"all older", []string{"", "", ""}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var recs []Record
			for i, e := range tc.engines {
				recs = append(recs, Record{Kind: KindFinal, Worker: i, Seq: 1, Time: start, State: &final[i], Engine: e})
			}
			m := NewMerger(start)
			d := NewDecoder(strings.NewReader(encode(t, recs...)))
			for {
				r, err := d.Next()
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if _, err := m.Add(r); err != nil {
					t.Fatal(err)
				}
			}
			if got := m.Engine(); got != tc.want {
				t.Errorf("Engine() = %q, want %q", got, tc.want)
			}
		})
	}
}

// Records delivered twice, late or out of order count once: the merged
// snapshot is that of the workers' final states, and the rows say who
// sent what.
func TestMergerIsIdempotent(t *testing.T) {
	start := time.Unix(1700000000, 0)
	mid, final := workers(t, 3, 6000, start)
	var recs []Record
	for i := range final {
		recs = append(recs,
			Record{Kind: KindReady, Worker: i, Pod: fmt.Sprintf("mv-%d", i), Seq: 0, Time: start},
			Record{Kind: KindInterval, Worker: i, Seq: 1, Time: start.Add(time.Second), State: &mid[i]},
			Record{Kind: KindFinal, Worker: i, Seq: 2, Time: start.Add(2 * time.Second), State: &final[i]})
	}
	recs[len(recs)-1] = Record{Kind: KindError, Worker: 2, Seq: 2, Time: start.Add(2 * time.Second), State: &final[2], Error: "attack: context canceled"}
	// Through a log: every line once, then the whole log again after a
	// reconnect, then the mid-run records once more.
	log := encode(t, recs...)
	log += log + encode(t, recs[1], recs[4], recs[7])
	m := NewMerger(start)
	d := NewDecoder(strings.NewReader(log))
	var accepted int
	for range 100 {
		r, err := d.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		ok, err := m.Add(r)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			accepted++
		}
	}
	if accepted != len(recs) {
		t.Errorf("accepted %d records, want %d", accepted, len(recs))
	}
	got, want := m.Snapshot(), tally.Merge(final...).Snapshot()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged snapshot differs from the final states' merge:\n%+v\n%+v", got.Dimensions, want.Dimensions)
	}
	// Total counts each worker's latest state once, not every one taken.
	if m.Total() != want.Total || want.Total == 0 {
		t.Errorf("Total %d, want %d", m.Total(), want.Total)
	}
	rows := m.Workers()
	var share float64
	for i, r := range rows {
		share += r.Share
		oc := final[i].Dimensions[tally.Outcome]
		var failed int64
		for k, b := range oc.Buckets {
			if b == tally.Failure {
				failed = oc.N[k]
			}
		}
		wantRate := float64(final[i].Total) / final[i].Latest.Sub(final[i].Earliest).Seconds()
		if r.Index != i || r.Pod != fmt.Sprintf("mv-%d", i) || r.Requests != final[i].Total || r.Errors != failed || failed == 0 ||
			math.Abs(r.Rate-wantRate) > 1e-9 || !r.LastSeen.Equal(start.Add(2*time.Second)) {
			t.Errorf("row %+v: want requests %d, errors %d, rate %v", r, final[i].Total, failed, wantRate)
		}
		if (i < 2) != r.Final || (i == 2) != (r.Error != "") {
			t.Errorf("row %d: final %v error %q", i, r.Final, r.Error)
		}
	}
	if math.Abs(share-1) > 1e-12 || len(rows) != 3 {
		t.Errorf("%d rows, shares add up to %v", len(rows), share)
	}
}

func FuzzDecode(f *testing.F) {
	start := time.Unix(1700000000, 0)
	_, final := workers(f, 1, 50, start)
	good := encode(f, Record{Kind: KindFinal, Worker: 1, Seq: 1, Time: start, State: &final[0]})
	f.Add([]byte(good))
	f.Add([]byte("klog line\n" + good[:len(good)/3]))
	f.Add([]byte(`{"meshVerifyWorker":"v1","kind":"interval","worker":1,"seq":2,"state":{"sliceWidth":1000000000,"latency":{"count":1,"max":5,"bins":[5,1]}}}` + "\n"))
	f.Add([]byte(`{"meshVerifyWorker":"v9","worker":4}` + "\n"))
	// v1.1: a batch of results and the rules' statistics.
	for _, r := range workerResults(f, "r", 1, 20, 10, start) {
		r.Rules = &attribution.Stats{Responses: 3, Rules: []attribution.RuleStats{{Rule: "pod", Matched: 2, Samples: []string{"body"}}}}
		f.Add([]byte(encode(f, r)))
	}
	// slicesFrom near MaxInt64: its sum with the slices' count overflowed
	// the bound, and completing the state made a slice that long.
	f.Add([]byte(`{"meshVerifyWorker":"v1","kind":"interval","worker":1,"seq":2,"state":{"sliceWidth":1000000000,"slicesFrom":9223372036854775807,"slices":[{"requests":0}]}}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := NewDecoder(bytes.NewReader(data))
		m := NewMerger(start)
		rw := NewResultWriter(nil, "r", 10)
		var records int64
		for range 10000 {
			r, err := d.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				if !errors.Is(err, ErrVersion) {
					t.Fatalf("error %v is neither EOF nor a version error", err)
				}
				continue
			}
			records++
			if err := r.Validate(); err != nil {
				t.Fatalf("decoded an invalid record: %v", err)
			}
			ok, err := m.Add(r)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				if err := rw.Add(r.Worker, r.Results); err != nil {
					t.Fatalf("a decoded record's results: %v", err)
				}
			}
		}
		_ = rw.Flush()
		_ = m.Rules()
		s := d.Skipped()
		if records+s.NotRecord+s.TooLong+s.Invalid > d.Line() {
			t.Fatalf("%d records and %+v skipped from %d lines", records, s, d.Line())
		}
		_ = m.Snapshot()
		_ = m.Workers()
	})
}

// The JSON a worker prints for a state does not grow with its requests,
// beyond the digits of its numbers (1e6 requests fill every bin already).
func TestRecordSizeDoesNotGrowWithRequests(t *testing.T) {
	// Real tallies, fed 2,000 and 200,000 results over the same 10 s on
	// 40 connections: a record holds buckets, slices and histogram bins,
	// nothing per request.
	start := time.Unix(1700000000, 0)
	var sizes []int
	for _, n := range []int{2_000, 200_000} {
		rng := rand.New(rand.NewPCG(3, 3))
		tl := tally.New(start, time.Minute)
		for i := range n {
			r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start.Add(time.Duration(i) * 10 * time.Second / time.Duration(n)),
				Latency: time.Duration((1 + rng.ExpFloat64()) * float64(time.Millisecond))}, ConnID: uint64(1 + rng.IntN(40))}
			if rng.IntN(20) == 0 {
				r.Code, r.Error = 503, "503 Service Unavailable"
			}
			c := 1 + rng.IntN(3)
			tl.Add(r, attribution.Identity{Cluster: fmt.Sprintf("c%d", c), Pod: fmt.Sprintf("c%d-pod-%d", c, rng.IntN(5))})
		}
		st := tl.State()
		if err := st.Validate(); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(encode(t, Record{Kind: KindFinal, Worker: 0, Seq: 1, Time: start, State: &st})))
	}
	if float64(sizes[1]) > 1.5*float64(sizes[0]) {
		t.Errorf("a record of 200,000 requests takes %d bytes, of 2,000 %d", sizes[1], sizes[0])
	}
	t.Logf("record sizes: %d and %d bytes", sizes[0], sizes[1])
}

// statesEvery is each of k workers' cumulative state after every step
// requests of n (1 ms apart, so 1 s slices fill one after the other).
func statesEvery(k, n, step int, start time.Time) [][]tally.State {
	rng := rand.New(rand.NewPCG(7, uint64(n)))
	tls := make([]*tally.Tally, k)
	for i := range tls {
		tls[i] = tally.New(start, time.Minute)
	}
	var out [][]tally.State
	for i := range n {
		conn := uint64(1 + rng.IntN(40))
		r := &attack.Result{Result: &vegeta.Result{Code: 200, Timestamp: start.Add(time.Duration(i) * time.Millisecond),
			Latency: time.Duration(rng.ExpFloat64() * float64(time.Millisecond))}, ConnID: conn}
		id := attribution.Identity{Cluster: fmt.Sprintf("c%d", 1+rng.IntN(3))}
		tls[int(conn)%k].Add(r, id)
		if (i+1)%step == 0 {
			var row []tally.State
			for _, tl := range tls {
				row = append(row, tl.State())
			}
			out = append(out, row)
		}
	}
	return out
}

// Interval records carry only the slices that changed (tally.State.Trim);
// the merger composes them with what each worker sent before, so the
// merged view after every interval, timeline included, equals the merge
// of the whole states. A lost interval record leaves the counts whole and
// the final record restores the timeline.
func TestTrimmedRecordsMergeAsWholeOnes(t *testing.T) {
	start := time.Unix(1700000000, 0)
	const k = 3
	steps := statesEvery(k, 8000, 500, start) // 16 intervals over 8 one-second slices
	whole, trimmed, lossy := NewMerger(start), NewMerger(start), NewMerger(start)
	prev := make([]*tally.State, k)
	var sentBytes, wholeBytes int
	for si, row := range steps {
		last := si == len(steps)-1
		for w := range row {
			kind := KindInterval
			st := row[w]
			tr := st
			if last {
				kind = KindFinal // the last record is whole
			} else {
				tr = st.Trim(prev[w])
			}
			prev[w] = &row[w]
			if si > 2 && !last && tr.SlicesFrom == 0 {
				t.Fatalf("interval %d worker %d: nothing trimmed", si, w)
			}
			wr := Record{Kind: kind, Worker: w, Seq: int64(si), Time: start, State: &st}
			tw := Record{Kind: kind, Worker: w, Seq: int64(si), Time: start, State: &tr}
			wholeBytes += len(encode(t, wr))
			line := encode(t, tw)
			sentBytes += len(line)
			rec, err := NewDecoder(strings.NewReader(line)).Next()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := whole.Add(wr); err != nil {
				t.Fatal(err)
			}
			if _, err := trimmed.Add(rec); err != nil {
				t.Fatal(err)
			}
			if si != 5 || w != 1 { // worker 1's sixth record is lost on the way to lossy
				if _, err := lossy.Add(rec); err != nil {
					t.Fatal(err)
				}
			}
		}
		got, want := trimmed.Snapshot(), whole.Snapshot()
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("after interval %d the trimmed records merge to\n%+v\nthe whole ones to\n%+v", si, got.Slices, want.Slices)
		}
		if l := lossy.Snapshot(); si != 5 && (!reflect.DeepEqual(l.Dimensions, want.Dimensions) || l.Total != want.Total) {
			t.Errorf("after interval %d, with a record lost, the counts differ: %d vs %d requests", si, l.Total, want.Total)
		}
	}
	if got, want := lossy.Snapshot(), whole.Snapshot(); !reflect.DeepEqual(got, want) {
		t.Errorf("after the final records, the merge with a lost interval record differs:\n%+v\n%+v", got.Slices, want.Slices)
	}
	if sentBytes >= wholeBytes {
		t.Errorf("trimmed records took %d bytes, whole ones %d", sentBytes, wholeBytes)
	}
}

// However many workers, no second of the run brings the coordinator more
// than MaxRecordsPerSecond interval records, and every worker still
// reports at least every RecordInterval: counted by walking the records'
// times over a minute, not from the formula.
func TestRecordScheduleBoundsTheCoordinator(t *testing.T) {
	for _, c := range []struct {
		workers  int
		interval time.Duration
	}{{1, time.Second}, {4, time.Second}, {100, time.Second}, {101, 1010 * time.Millisecond}, {250, 2500 * time.Millisecond}, {1000, 10 * time.Second}} {
		iv := RecordInterval(c.workers)
		if iv != c.interval {
			t.Errorf("%d workers: interval %v, want %v", c.workers, iv, c.interval)
		}
		perSecond := map[int64]int{}
		for i := range c.workers {
			ph := RecordPhase(iv, i, c.workers)
			if ph < 0 || ph >= iv {
				t.Fatalf("%d workers: worker %d's phase %v outside [0, %v)", c.workers, i, ph, iv)
			}
			for at := ph + iv; at < time.Minute; at += iv {
				perSecond[int64(at/time.Second)]++
			}
		}
		busiest := 0
		for _, n := range perSecond {
			busiest = max(busiest, n)
		}
		if busiest > MaxRecordsPerSecond {
			t.Errorf("%d workers: %d records in one second, want at most %d", c.workers, busiest, MaxRecordsPerSecond)
		}
	}
}
