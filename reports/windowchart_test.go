package reports

import (
	"fmt"
	"math"
	"testing"
	"time"
)

// The last slice of an attack that ended inside it is a rate over the part
// it covers, not a drop; under a quarter of a slice it is not drawn.
func TestLastPartialSliceIsNoRateDrop(t *testing.T) {
	t.Parallel()
	slices := []Slice{{Requests: 100}, {Requests: 100}, {Requests: 100}, {Requests: 50}}
	tl := Timeline{SliceWidth: time.Second, Slices: slices}
	for _, tc := range []struct {
		elapsed time.Duration
		want    float64 // the last point, NaN: not drawn
	}{
		{3500 * time.Millisecond, 100},
		{3100 * time.Millisecond, math.NaN()},
		{4 * time.Second, 50},
	} {
		charts := timelineCharts(tl, tc.elapsed)
		if len(charts) == 0 || charts[0].ID != "rate" {
			t.Fatalf("no rate chart: %+v", charts)
		}
		pts := charts[0].Series[0].Points
		c := charts[0]
		lastX := float64(c.X1)
		var got float64 = math.NaN()
		// The last point drawn, and where.
		var x, y float64
		n, _ := sscanLast(pts, &x, &y)
		if n == 2 && math.Abs(x-lastX) < 0.1 {
			got = c.top * (float64(c.Y1) - y) / float64(c.Y1-c.Y0)
		}
		if math.IsNaN(tc.want) != math.IsNaN(got) || !math.IsNaN(got) && math.Abs(got-tc.want) > 1 {
			t.Errorf("elapsed %s: last rate %v, want %v (points %s)", tc.elapsed, got, tc.want, pts)
		}
	}
}

// sscanLast reads the last "x,y" of SVG polyline points.
func sscanLast(pts string, x, y *float64) (int, error) {
	i := len(pts) - 1
	for i >= 0 && pts[i] != ' ' {
		i--
	}
	return fmt.Sscanf(pts[i+1:], "%f,%f", x, y)
}
