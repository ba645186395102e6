package runlog

import (
	"bytes"
	"encoding/gob"
	"math"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// gobStream is what vegeta's own encoder writes for rs, bodies and
// headers dropped as the recorder drops them.
func gobStream(t testing.TB, rs []vegeta.Result) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := vegeta.NewEncoder(&buf)
	for _, r := range rs {
		r.Body, r.Headers = nil, nil
		if err := enc.Encode(&r); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func handStream(t testing.TB, rs []vegeta.Result, fallback bool) []byte {
	t.Helper()
	var buf bytes.Buffer
	e := newResultEncoder(&buf)
	if fallback {
		e = &resultEncoder{gob: gob.NewEncoder(&buf)}
	}
	for i := range rs {
		if err := e.encode(&buf, &rs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func edgeResults() []vegeta.Result {
	loc := time.FixedZone("odd", -(3*3600 + 30*60))
	return []vegeta.Result{
		{}, // every field zero
		{Seq: 0, Code: 200, Timestamp: time.Now(), Latency: time.Millisecond, BytesIn: 100, Method: "GET", URL: "http://127.0.0.1:1/x"},
		{Attack: "a", Seq: 127, Code: 127, Latency: 127, BytesOut: 127, BytesIn: 128},
		{Seq: 128, Code: 255, Latency: 128, BytesOut: 255, BytesIn: 256},
		{Seq: math.MaxUint64, Code: math.MaxUint16, Latency: math.MaxInt64, BytesOut: math.MaxUint64, BytesIn: 1 << 32},
		{Seq: 1 << 40, Latency: -1, Error: "dial tcp: connection refused"},
		{Latency: math.MinInt64, Timestamp: time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC)},
		{Timestamp: time.Date(2026, 3, 1, 12, 0, 0, 999999999, loc), Error: "\x00\xff<script>\"\n", Method: strings.Repeat("M", 300), URL: strings.Repeat("u", 70000)},
		{Body: []byte("dropped"), Headers: http.Header{"X": {"dropped"}}, Code: 503},
	}
}

func randomResults(n int, rnd *rand.Rand) []vegeta.Result {
	start := time.Now()
	rs := make([]vegeta.Result, n)
	for i := range rs {
		r := &rs[i]
		r.Seq = uint64(i) * uint64(rnd.IntN(3))
		if rnd.IntN(4) > 0 {
			r.Code = uint16(rnd.IntN(600))
		}
		r.Timestamp = start.Add(time.Duration(rnd.Int64N(int64(time.Hour))))
		r.Latency = time.Duration(rnd.Int64N(1<<uint(rnd.IntN(62)+1))) * time.Duration(1-2*rnd.IntN(2))
		r.BytesIn = rnd.Uint64() >> uint(rnd.IntN(64))
		r.BytesOut = rnd.Uint64() >> uint(rnd.IntN(64))
		if rnd.IntN(5) == 0 {
			r.Error = strings.Repeat("e", rnd.IntN(200))
		}
		r.Method = []string{"", "GET", "POST"}[rnd.IntN(3)]
		r.URL = strings.Repeat("/p", rnd.IntN(100))
	}
	return rs
}

// The hand encoder writes, byte for byte, what vegeta's gob encoder writes.
func TestResultEncodingIsVegetas(t *testing.T) {
	if header() == nil {
		t.Fatal("vegeta.Result's layout changed: the hand encoder is off and every result goes through gob")
	}
	for name, rs := range map[string][]vegeta.Result{
		"edges":  edgeResults(),
		"random": randomResults(2000, rand.New(rand.NewPCG(1, 2))),
	} {
		for _, fallback := range []bool{false, true} {
			want, got := gobStream(t, rs), handStream(t, rs, fallback)
			if !bytes.Equal(got, want) {
				i := 0
				for i < len(got) && i < len(want) && got[i] == want[i] {
					i++
				}
				t.Errorf("%s (fallback %v): %d bytes, gob writes %d; first difference at byte %d", name, fallback, len(got), len(want), i)
			}
		}
		// And vegeta's decoder reads them back.
		dec := vegeta.NewDecoder(bytes.NewReader(handStream(t, rs, false)))
		for i, want := range rs {
			want.Body, want.Headers = nil, nil
			var got vegeta.Result
			if err := dec.Decode(&got); err != nil || !got.Equal(want) {
				t.Fatalf("%s result %d: %v\n got %+v\nwant %+v", name, i, err, got, want)
			}
		}
	}
}

func TestResultEncoderAllocatesNothing(t *testing.T) {
	rs := randomResults(64, rand.New(rand.NewPCG(3, 4)))
	var buf bytes.Buffer
	e := newResultEncoder(&buf)
	buf.Grow(1 << 20)
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		if buf.Len() > 1<<19 {
			buf.Reset()
		}
		if err := e.encode(&buf, &rs[i%len(rs)]); err != nil {
			t.Fatal(err)
		}
		i++
	})
	if allocs != 0 {
		t.Errorf("%v allocations per result", allocs)
	}
}

func FuzzResultEncoding(f *testing.F) {
	f.Add("", uint64(0), uint16(0), int64(0), int64(0), uint64(0), uint64(0), "", "", "")
	f.Add("atk", uint64(128), uint16(200), int64(1767225600123456789), int64(-5), uint64(1<<40), uint64(255), "err\xff", "GET", "http://127.0.0.1/")
	f.Fuzz(func(t *testing.T, attack string, seq uint64, code uint16, unixNano, latency int64, out, in uint64, errS, method, url string) {
		r := vegeta.Result{Attack: attack, Seq: seq, Code: code, Latency: time.Duration(latency),
			BytesOut: out, BytesIn: in, Error: errS, Method: method, URL: url}
		if unixNano != 0 {
			r.Timestamp = time.Unix(0, unixNano)
		}
		rs := []vegeta.Result{r, r}
		if want, got := gobStream(t, rs), handStream(t, rs, false); !bytes.Equal(got, want) {
			t.Fatalf("%+v: encoded differently from gob", r)
		}
	})
}
