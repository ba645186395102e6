package runlog

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/mesh-verify/mesh-verify/attack"
	"github.com/mesh-verify/mesh-verify/attribution"
)

var epoch = time.Now()

// synth is the i-th result of a made-up attack at 10,000 requests/s.
func synth(i int) *attack.Result {
	code := uint16(200)
	if i%7 == 3 {
		code = 503
	}
	return &attack.Result{
		Result: &vegeta.Result{Seq: uint64(i), Code: code, Timestamp: epoch.Add(time.Duration(i) * 100 * time.Microsecond),
			Latency: time.Duration(1000 + i%5000), BytesIn: 57, Method: "GET", URL: "http://127.0.0.1:1/",
			Body: []byte("I'm callme-service v1 (pod callme-c1-0 in c1)")},
		RequestID: fmt.Sprintf("run-%d", i),
		ConnID:    uint64(1 + i%10),
	}
}

func synthID(i int) attribution.Identity {
	c := []string{"c1", "c2", "c3"}[i%3]
	return attribution.Identity{Cluster: c, Pod: "callme-" + c + "-0", Version: "v1", Service: "callme"}
}

func readAll(t *testing.T, dir string) ([]vegeta.Result, []Attribution, error) {
	t.Helper()
	var rs []vegeta.Result
	var as []Attribution
	err := ReadResults(dir, func(r *vegeta.Result, a Attribution) error {
		rs, as = append(rs, *r), append(as, a)
		return nil
	})
	return rs, as, err
}

func TestRecordReadBack(t *testing.T) {
	dir := t.TempDir()
	rec, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	for i := range n {
		rec.Record(synth(i), synthID(i), i%7 != 3)
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	rs, as, err := readAll(t, dir)
	if err != nil || len(rs) != n {
		t.Fatalf("%d results read, %v", len(rs), err)
	}
	for i := range n {
		want := *synth(i)
		want.Body = nil
		if !rs[i].Equal(*want.Result) {
			t.Fatalf("result %d: %+v, want %+v", i, rs[i], *want.Result)
		}
		wa := Attribution{Seq: uint64(i), RequestID: want.RequestID, ConnID: want.ConnID, Identity: synthID(i),
			Source: SourceBody, Code: want.Code, OK: i%7 != 3}
		if as[i] != wa {
			t.Fatalf("line %d: %+v, want %+v", i, as[i], wa)
		}
	}
	if _, err := Create(dir); err == nil {
		t.Error("a second recorder overwrote the run's files")
	}
}

// Test 4: whatever a response said survives the files: valid strings
// exactly, invalid UTF-8 as encoding/json (and the report) renders it.
func TestHostileIdentitiesSurvive(t *testing.T) {
	dir := t.TempDir()
	rec, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range hostile {
		rec.Record(synth(i), attribution.Identity{Cluster: s, Pod: "pod " + s, Version: s, Service: s}, true)
	}
	rec.Record(synth(len(hostile)), attribution.Identity{}, false) // nothing attributed
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	_, as, err := readAll(t, dir)
	if err != nil || len(as) != len(hostile)+1 {
		t.Fatalf("%d lines, %v", len(as), err)
	}
	for i, s := range hostile {
		w := jsonRoundTrip(s)
		if a := as[i]; a.Cluster != w || a.Pod != jsonRoundTrip("pod "+s) || a.Version != w || a.Service != w || a.Source != SourceBody {
			t.Errorf("%q came back as %+v", s, a)
		}
	}
	if a := as[len(hostile)]; a.Source != "" || a.Cluster != "" || a.OK {
		t.Errorf("unattributed: %+v", a)
	}
	data, _ := os.ReadFile(filepath.Join(dir, AttributionFile))
	if n := strings.Count(string(data), "\n"); n != len(hostile)+1 {
		t.Errorf("%d lines for %d results", n, len(hostile)+1)
	}
}

// Test 3 (recorder side): a write error stops recording, once, without
// ever holding Record up, and Close says so every time it is asked.
func TestWriteErrorStopsRecording(t *testing.T) {
	cases := map[string]func(t *testing.T) (res, attr io.WriteCloser, dir string){
		"disk full (/dev/full)": func(t *testing.T) (io.WriteCloser, io.WriteCloser, string) {
			full, err := os.OpenFile("/dev/full", os.O_WRONLY, 0)
			if err != nil {
				t.Skip("no /dev/full:", err)
			}
			a, _ := os.Create(filepath.Join(t.TempDir(), AttributionFile))
			return full, a, ""
		},
		"file closed under the recorder": func(t *testing.T) (io.WriteCloser, io.WriteCloser, string) {
			dir := t.TempDir()
			r, _ := os.Create(filepath.Join(dir, ResultsFile))
			a, _ := os.Create(filepath.Join(dir, AttributionFile))
			a.Close()
			return r, a, dir
		},
	}
	for name, open := range cases {
		t.Run(name, func(t *testing.T) {
			res, attr, dir := open(t)
			rec := NewOn(res, attr, StallTimeout(time.Minute))
			const n = 40 * batchSize
			done := make(chan struct{})
			go func() {
				for i := range n {
					rec.Record(synth(i), synthID(i), true)
				}
				close(done)
			}()
			select {
			case <-done:
			case <-time.After(30 * time.Second):
				t.Fatal("Record blocked on a broken disk")
			}
			err := rec.Close()
			if err == nil || !strings.HasPrefix(err.Error(), "run log: ") || !strings.Contains(err.Error(), "recording stopped after") {
				t.Fatalf("Close: %v", err)
			}
			if again := rec.Close(); again != err {
				t.Errorf("second Close: %v", again)
			}
			if !rec.stopped.Load() || rec.written.Load() >= n {
				t.Errorf("stopped %v after %d of %d", rec.stopped.Load(), rec.written.Load(), n)
			}
			t.Log(err)
			if dir != "" {
				// What is there reads as a cut log.
				if _, _, err := readAll(t, dir); !errors.Is(err, ErrTruncated) {
					t.Errorf("reading what was written: %v", err)
				}
			}
		})
	}
}

// gate is a disk that takes nothing until opened.
type gate struct {
	open chan struct{}
	once sync.Once
}

func (g *gate) Write(p []byte) (int, error) { <-g.open; return len(p), nil }
func (g *gate) Close() error                { return nil }
func (g *gate) release()                    { g.once.Do(func() { close(g.open) }) }

// A disk that takes nothing holds the attack back for the stall timeout,
// then recording stops; memory stays within maxBatches all along.
func TestStalledDiskStopsRecording(t *testing.T) {
	g := &gate{open: make(chan struct{})}
	defer g.release()
	rec := NewOn(g, g, StallTimeout(200*time.Millisecond))
	done := make(chan struct{})
	go func() {
		for i := range 20 * batchSize {
			rec.Record(synth(i), synthID(i), true)
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Record blocked forever on a stalled disk")
	}
	if rec.batches > maxBatches {
		t.Errorf("%d batches in memory, at most %d", rec.batches, maxBatches)
	}
	err := rec.Close()
	if err == nil || !strings.Contains(err.Error(), "took no result for 200ms") {
		t.Fatalf("Close: %v", err)
	}
	g.release()
	<-rec.done
}

// slow is a disk slower than the attack: Record waits, nothing is lost.
type slow struct{ f *os.File }

func (s slow) Write(p []byte) (int, error) { time.Sleep(20 * time.Millisecond); return s.f.Write(p) }
func (s slow) Close() error                { return s.f.Close() }

func TestSlowDiskLosesNothing(t *testing.T) {
	dir := t.TempDir()
	r, _ := os.Create(filepath.Join(dir, ResultsFile))
	a, _ := os.Create(filepath.Join(dir, AttributionFile))
	rec := NewOn(slow{r}, slow{a})
	const n = 30 * batchSize
	for i := range n {
		rec.Record(synth(i), synthID(i), true)
		if rec.batches > maxBatches {
			t.Fatalf("%d batches", rec.batches)
		}
	}
	if rec.heldBack == 0 {
		t.Error("the attack was never held back: the test did not test backpressure")
	}
	if err := rec.Close(); err != nil && !strings.Contains(err.Error(), "held the attack back") {
		t.Fatal(err)
	}
	rs, _, err := readAll(t, dir)
	if err != nil || len(rs) != n {
		t.Fatalf("%d of %d results, %v", len(rs), n, err)
	}
}

// A slow run's results reach the disk while it goes, not only at Close.
func TestSlowRunIsWrittenAsItGoes(t *testing.T) {
	dir := t.TempDir()
	rec, err := Create(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Close()
	for i := range 12 {
		r := synth(i)
		r.Timestamp = epoch.Add(time.Duration(i) * 200 * time.Millisecond) // 5 requests/s
		rec.Record(r, synthID(i), true)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		st, err := os.Stat(filepath.Join(dir, AttributionFile))
		if err == nil && st.Size() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nothing written after 2.4 s of results")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestNilRecorder(t *testing.T) {
	var rec *Recorder
	rec.Record(synth(0), synthID(0), true)
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
}
