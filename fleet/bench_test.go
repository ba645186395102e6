package fleet

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/tally"
)

// syntheticState is a worker's state after requests requests over slices
// one-second slices, spread over buckets clusters and as many pods on 100
// connections: built directly, since driving a tally with 1e9 results per
// worker for 1,000 workers cannot run in a benchmark. Its size depends on
// buckets and slices only.
func syntheticState(rng *rand.Rand, start time.Time, requests int64, buckets, slices int) tally.State {
	const conns = 100
	failed := requests / 20
	ok := requests - failed
	dim := func(prefix string) tally.DimState {
		d := tally.DimState{Units: conns}
		left := ok
		for i := range buckets {
			n := ok / int64(buckets)
			if i == buckets-1 {
				n = left
			}
			left -= n
			d.Buckets = append(d.Buckets, fmt.Sprintf("%s-%02d", prefix, i))
			d.N = append(d.N, n)
			d.SumXX = append(d.SumXX, float64(n)*float64(n)/conns*(1+rng.Float64()))
			d.SumXM = append(d.SumXM, float64(n)*float64(ok)/conns)
		}
		d.SumMM = float64(ok) * float64(ok) / conns
		return d
	}
	st := tally.State{
		Start: start.UTC(), SliceWidth: time.Second, Total: requests,
		Dimensions: map[string]tally.DimState{
			"cluster": dim("cluster"), "pod": dim("pod"), "version": {}, "service": {},
			tally.Outcome: {Buckets: []string{tally.Failure, tally.Success}, N: []int64{failed, ok},
				SumXX: []float64{float64(failed * failed / conns), float64(ok) * float64(ok) / conns},
				SumXM: []float64{float64(failed) * float64(requests) / conns, float64(ok) * float64(requests) / conns},
				SumMM: float64(requests) * float64(requests) / conns, Units: conns},
		},
		Unattributed: map[string]int64{"version": ok, "service": ok},
		Errors:       map[string]int64{"503 Service Unavailable": failed},
		StatusCodes:  map[string]int64{"200": ok, "503": failed},
		Successes:    ok,
		BytesIn:      uint64(requests) * 120, BytesOut: uint64(requests) * 10,
		Earliest: start.UTC(), Latest: start.Add(time.Duration(slices) * time.Second).UTC(),
		End: start.Add(time.Duration(slices)*time.Second + time.Millisecond).UTC(),
	}
	// 200 fine buckets around 1 ms: what a spread of latencies fills.
	const bins = 200
	st.Latency = tally.HistogramState{Count: requests, Total: time.Duration(requests) * time.Millisecond, Min: 900 * time.Microsecond, Max: 30 * time.Millisecond}
	for k := range int64(bins) {
		c := requests / bins
		if k == bins-1 {
			c = requests - c*(bins-1)
		}
		if c > 0 {
			st.Latency.Bins = append(st.Latency.Bins, 64+(20-6)*64+k, c)
		}
	}
	per := requests / int64(slices)
	for i := range slices {
		n := per
		if i == slices-1 {
			n = requests - per*int64(slices-1)
		}
		sl := tally.SliceState{Requests: n, Clusters: map[string]int64{}, Latency: map[string]tally.HistogramState{}}
		for c := range 3 {
			name := fmt.Sprintf("cluster-%02d", c)
			share := n / 3
			if c == 2 {
				share = n - 2*(n/3)
			}
			sl.Clusters[name] = share
			h := tally.HistogramState{Count: share, Max: 20 * time.Millisecond}
			for k := range int64(20) {
				cnt := share / 20
				if k == 19 {
					cnt = share - cnt*19
				}
				if cnt > 0 {
					h.Bins = append(h.Bins, 40+k, cnt)
				}
			}
			if share > 0 {
				sl.Latency[name] = h
			}
		}
		st.Slices = append(st.Slices, sl)
	}
	return st
}

const (
	benchWorkers = 1000
	benchBuckets = 50
	benchSlices  = 60
	benchRounds  = 3
)

// benchRecords is benchRounds intervals of every worker's record, each
// interval with more requests than the last; as in a running worker, the
// counts, the histogram and the last time slice change from one interval
// to the next, the earlier slices do not.
func benchRecords(b *testing.B, requests int64) [][]Record {
	start := time.Unix(1700000000, 0)
	rng := rand.New(rand.NewPCG(1, uint64(requests)))
	recs := make([][]Record, benchRounds)
	var whole0 []tally.State // each worker's previous whole state
	for r := range benchRounds {
		for w := range benchWorkers {
			st := syntheticState(rng, start, requests*int64(r+1)/benchRounds, benchBuckets, benchSlices)
			if r > 0 {
				copy(st.Slices, recs[0][w].State.Slices[:benchSlices-1])
				// What a worker sends between its first and its last
				// record: the slices that changed (tally.State.Trim).
				whole := st
				st = st.Trim(&whole0[w])
				whole0[w] = whole
			} else {
				whole0 = append(whole0, st)
			}
			if err := st.Validate(); err != nil {
				b.Fatal(err)
			}
			// Validated as the Decoder does on the follower's side.
			recs[r] = append(recs[r], Record{Version: Version, Kind: KindInterval, Worker: w, Seq: int64(r), Time: start, State: &st, checked: true})
		}
	}
	return recs
}

// BenchmarkMerge is the coordinator's merge with 1,000 workers, each
// record cumulative (50 clusters, 50 pods, 60 slices), for 1e3 and 1e9
// requests per worker. "second" is one second of a run: the records
// RecordInterval and RecordPhase bring in a second (100: every worker
// reports every 10 s, at its own phase) and the merged Snapshot the
// progress line and the judge read. "burst" is every worker's record at
// once (the final records at the end) and the Snapshot; "snapshot" the
// Snapshot alone. Records are decoded and validated before, by each
// pod's log follower (BenchmarkDecodeRecord).
func BenchmarkMerge(b *testing.B) {
	perSecond := int(float64(benchWorkers) / RecordInterval(benchWorkers).Seconds())
	for _, requests := range []int64{1e3, 1e9} {
		recs := benchRecords(b, requests)
		for _, part := range []string{"second", "burst", "snapshot"} {
			b.Run(fmt.Sprintf("%s/requests=%.0e", part, float64(requests)), func(b *testing.B) {
				m := NewMerger(time.Unix(1700000000, 0))
				for _, r := range recs[0] {
					if _, err := m.Add(r); err != nil {
						b.Fatal(err)
					}
				}
				seq := int64(benchRounds)
				next := 0 // the next worker to report, in phase order
				add := func(n int) {
					for range n {
						seq++
						r := recs[1+int(seq)%(benchRounds-1)][next]
						r.Seq = seq
						if _, err := m.Add(r); err != nil {
							b.Fatal(err)
						}
						next = (next + 1) % benchWorkers
					}
				}
				var s tally.Snapshot
				b.ReportAllocs()
				for b.Loop() {
					switch part {
					case "second":
						add(perSecond)
					case "burst":
						add(benchWorkers)
					}
					s = m.Snapshot()
				}
				b.ReportMetric(float64(map[string]int{"second": perSecond, "burst": benchWorkers}[part]), "records/op")
				if s = m.Snapshot(); s.Total == 0 || len(s.Dimensions["cluster"].Buckets) != benchBuckets {
					b.Fatalf("merged %d requests in %d clusters", s.Total, len(s.Dimensions["cluster"].Buckets))
				}
			})
		}
	}
}

// BenchmarkMergeFromScratch is the same interval without the incremental
// path: all 1,000 states merged anew (tally.Merge).
func BenchmarkMergeFromScratch(b *testing.B) {
	for _, requests := range []int64{1e3, 1e9} {
		b.Run(fmt.Sprintf("requests=%.0e", float64(requests)), func(b *testing.B) {
			recs := benchRecords(b, requests)
			states := make([]tally.State, len(recs[0]))
			for i, r := range recs[0] {
				states[i] = *r.State
			}
			for b.Loop() {
				tally.Merge(states...).Snapshot()
			}
		})
	}
}

// BenchmarkDecodeRecord is what reading one worker's record from its log
// costs (done as lines arrive, one follower per pod): a whole record (a
// worker's first and last) and an interval record, which carries only
// the slices that changed.
func BenchmarkDecodeRecord(b *testing.B) {
	recs := benchRecords(b, 1e9)
	for _, tc := range []struct {
		name string
		rec  Record
	}{{"whole", recs[0][0]}, {"interval", recs[1][0]}} {
		b.Run(tc.name, func(b *testing.B) {
			var buf bytes.Buffer
			if err := Encode(&buf, tc.rec); err != nil {
				b.Fatal(err)
			}
			line := buf.String()
			b.SetBytes(int64(len(line)))
			b.ReportMetric(float64(len(line)), "bytes/record")
			for b.Loop() {
				if _, err := NewDecoder(strings.NewReader(line)).Next(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
