package reports

import (
	"bytes"
	"io"
	"math"
	"testing"
	"time"
)

// FuzzDecodeAndRender: a report.json read back (`mesh-verify report`)
// may have been edited or corrupted; decoding it and rendering every
// format must fail cleanly or succeed, never panic or hang.
func FuzzDecodeAndRender(f *testing.F) {
	var full bytes.Buffer
	if err := WriteJSON(&full, sample()); err != nil {
		f.Fatal(err)
	}
	f.Add(full.Bytes())
	f.Add([]byte(`{"schema": "` + Schema + `"}`))
	f.Add([]byte(`{"schema": "` + Schema + `", "exitCode": 256, "dimensions": [{"name": "pod", "buckets": [{"name": "<script>", "count": -1}]}], "timeline": {"sliceWidth": -1, "slices": [{"start": 0}]}}`))
	f.Add([]byte(`{"schema": "` + Schema + `", "expectations": [{"split": {"buckets": [{"bucket": "\u001b[2J", "observed": 1e308}]}}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeJSON("fuzz.json", data)
		if err != nil {
			return
		}
		for i, render := range []func(io.Writer, *Report) error{Terminal, Markdown, JUnit, HTML, WriteJSON} {
			start := time.Now()
			_ = render(io.Discard, r)
			if el := time.Since(start); el > 2*time.Second {
				t.Fatalf("renderer %d took %s", i, el)
			}
		}
	})
}

// Found by FuzzDecodeAndRender: an axis far from zero, or infinite, made
// the tick loop spin forever (the step below the float's resolution).
func TestNiceTicksAreBounded(t *testing.T) {
	for _, c := range []struct{ lo, hi float64 }{{1e20, 1e20 + 1e5}, {0, math.Inf(1)}, {-math.MaxFloat64, math.MaxFloat64}, {0, 1}} {
		done := make(chan []float64, 1)
		go func() { done <- niceTicks(c.lo, c.hi, 5) }()
		select {
		case ticks := <-done:
			if len(ticks) > 12 {
				t.Errorf("[%g, %g]: %d ticks", c.lo, c.hi, len(ticks))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("[%g, %g]: niceTicks does not end", c.lo, c.hi)
		}
	}
}
