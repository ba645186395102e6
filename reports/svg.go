package reports

import (
	"fmt"
	"html/template"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
)

// The charts of report.html are inline SVG computed here: the page needs
// no script and fetches nothing, prints as it shows, and every chart tells
// its series apart by shape, dash pattern and a direct label as well as by
// colour. Geometry is computed in Go; text is escaped by html/template.

// shareChart is the picture of the PASS/FAIL/INCONCLUSIVE rule of one
// expectation: per bucket the allowed band, the FAIL interval (whisker),
// the PASS interval (bar), the observed share (diamond) and the expected
// share (dashed tick), on a shared axis zoomed to what matters.
type shareChart struct {
	ID            string
	Width, Height int
	Rows          []shareRow
	Ticks         []tick
	AxisY         int
	PlotX0        int
	PlotX1        int
}

type shareRow struct {
	Label, Verdict, Mark string
	Y                    int
	Band                 *span // allowed band
	Fail, Pass           *span
	Observed, Expected   *point
	Title                string
}

type span struct{ X0, X1 float64 }

// W is the span's width, at least a pixel so a zero-width interval shows.
func (s span) W() float64 { return math.Max(s.X1-s.X0, 1) }

type point struct{ X float64 }

type tick struct {
	X     float64
	Label string
}

const (
	shareLabelW = 190
	shareRowH   = 34
	shareRightW = 120
	shareWidth  = 720
)

// newShareChart lays out the buckets of a split or mirror expectation.
func newShareChart(id string, s *assert.SplitResult) *shareChart {
	if s == nil || len(s.Buckets) == 0 {
		return nil
	}
	lo, hi := 1.0, 0.0
	see := func(v float64) { lo, hi = math.Min(lo, v), math.Max(hi, v) }
	for _, b := range s.Buckets {
		see(b.Observed)
		see(b.Expected)
		see(b.Allowed.Lo)
		see(b.Allowed.Hi)
		see(b.FailInterval.Lo)
		see(b.FailInterval.Hi)
	}
	lo, hi = axisRange(lo, hi)
	c := &shareChart{ID: id, Width: shareWidth, PlotX0: shareLabelW, PlotX1: shareWidth - shareRightW}
	x := func(v float64) float64 {
		return float64(c.PlotX0) + (v-lo)/(hi-lo)*float64(c.PlotX1-c.PlotX0)
	}
	for i, b := range s.Buckets {
		r := shareRow{Label: b.Bucket, Verdict: b.Verdict.String(), Mark: verdictMark(b.Verdict), Y: 10 + i*shareRowH}
		r.Band = &span{x(b.Allowed.Lo), x(b.Allowed.Hi)}
		r.Fail = &span{x(b.FailInterval.Lo), x(b.FailInterval.Hi)}
		r.Pass = &span{x(b.PassInterval.Lo), x(b.PassInterval.Hi)}
		r.Observed, r.Expected = &point{x(b.Observed)}, &point{x(b.Expected)}
		r.Title = fmt.Sprintf("%s: observed %s (%d requests), expected %s, allowed %s–%s, pass interval %s–%s, fail interval %s–%s: %s",
			b.Bucket, pct(b.Observed), b.Count, pct(b.Expected), pct(b.Allowed.Lo), pct(b.Allowed.Hi),
			pct(b.PassInterval.Lo), pct(b.PassInterval.Hi), pct(b.FailInterval.Lo), pct(b.FailInterval.Hi), b.Verdict)
		c.Rows = append(c.Rows, r)
	}
	c.AxisY = 10 + len(s.Buckets)*shareRowH
	c.Height = c.AxisY + 28
	for _, v := range niceTicks(lo, hi, 6) {
		c.Ticks = append(c.Ticks, tick{X: x(v), Label: tickPct(v)})
	}
	return c
}

// resultChart draws a single-share expectation (only, never, reached,
// successRate): the observed share and its exact interval, and the
// minimum share reached judges against.
func newResultChart(id, label string, r *assert.Result) *shareChart {
	if r == nil || r.Interval == nil {
		return nil
	}
	lo, hi := math.Min(r.Observed, r.Interval.Lo), math.Max(r.Observed, r.Interval.Hi)
	if r.MinShare > 0 {
		lo, hi = math.Min(lo, r.MinShare), math.Max(hi, r.MinShare)
	}
	lo, hi = axisRange(lo, hi)
	c := &shareChart{ID: id, Width: shareWidth, PlotX0: shareLabelW, PlotX1: shareWidth - shareRightW}
	x := func(v float64) float64 {
		return float64(c.PlotX0) + (v-lo)/(hi-lo)*float64(c.PlotX1-c.PlotX0)
	}
	row := shareRow{Label: label, Verdict: r.Verdict.String(), Mark: verdictMark(r.Verdict), Y: 10,
		Pass: &span{x(r.Interval.Lo), x(r.Interval.Hi)}, Observed: &point{x(r.Observed)}}
	row.Title = fmt.Sprintf("observed %s, exact interval %s–%s", pct(r.Observed), pct(r.Interval.Lo), pct(r.Interval.Hi))
	if r.MinShare > 0 {
		row.Expected = &point{x(r.MinShare)}
		row.Title += ", minimum share " + pct(r.MinShare)
	}
	c.Rows = []shareRow{row}
	c.AxisY = 10 + shareRowH
	c.Height = c.AxisY + 28
	for _, v := range niceTicks(lo, hi, 6) {
		c.Ticks = append(c.Ticks, tick{X: x(v), Label: tickPct(v)})
	}
	return c
}

// tickPct labels a round share without float noise (55%, not 55.000000000000001%).
func tickPct(v float64) string {
	return strconv.FormatFloat(math.Round(v*1e8)/1e6, 'f', -1, 64) + "%"
}

// axisRange pads [lo, hi] by a tenth of its width (at least a point) and
// clamps it to [0, 1], so small differences around 50% stay visible.
func axisRange(lo, hi float64) (float64, float64) {
	pad := math.Max((hi-lo)*0.1, 0.01)
	lo, hi = math.Max(0, lo-pad), math.Min(1, hi+pad)
	if hi-lo < 0.02 {
		lo, hi = math.Max(0, lo-0.01), math.Min(1, hi+0.01)
	}
	return lo, hi
}

// niceTicks returns about n round values within [lo, hi].
func niceTicks(lo, hi float64, n int) []float64 {
	if !(hi > lo) || n < 1 || math.IsInf(hi-lo, 0) {
		return nil
	}
	raw := (hi - lo) / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	step := mag
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			step = m * mag
			break
		}
	}
	// Bounded: far from zero a step below the float's resolution would
	// not move v (a report.json read back may hold any value).
	var out []float64
	for v := math.Ceil(lo/step) * step; v <= hi+step*1e-9 && len(out) <= 2*n+2; v += step {
		out = append(out, math.Round(v/step)*step)
	}
	return out
}

func verdictMark(v assert.Verdict) string {
	switch v {
	case assert.Pass:
		return "✔"
	case assert.Fail:
		return "✘"
	}
	return "?"
}

// lineChart is a time series chart: one polyline per series, each with its
// own dash pattern and marker shape, labelled at its end.
type lineChart struct {
	ID            string
	Title, YLabel string
	Width, Height int
	X0, X1        int
	Y0, Y1        int // top and bottom of the plot area
	Series        []lineSeries
	XTicks        []tick
	YTicks        []ytick
	// Bands, Expected and VLines mark a split judged in windows
	// (windowchart.go).
	Bands    []wband
	Expected []wexpected
	VLines   []vline
	// width, n and top are the scales, for what is drawn over the series.
	width time.Duration
	n     int
	top   float64
}

type lineSeries struct {
	Name    string
	Class   string // colour class s0…s7
	Dash    string
	Points  string // SVG polyline points
	Markers []marker
	LabelX  float64
	LabelY  float64
}

type marker struct {
	X, Y  float64
	Shape string // circle, square, triangle, diamond, cross
	Title string
}

type ytick struct {
	Y     float64
	Label string
}

var (
	dashes = []string{"", "6 3", "2 3", "8 3 2 3", "1 2", "10 4", "4 4", "12 2 2 2"}
	shapes = []string{"circle", "square", "triangle", "diamond", "cross"}
)

// seriesData is one named series over the timeline's slices; NaN leaves a
// gap.
type seriesData struct {
	Name   string
	Values []float64
}

// newLineChart lays out series over n slices of width w.
func newLineChart(id, title, ylabel string, width time.Duration, n int, data []seriesData, format func(float64) string) *lineChart {
	if n == 0 || len(data) == 0 {
		return nil
	}
	c := &lineChart{ID: id, Title: title, YLabel: ylabel, Width: 720, Height: 240, X0: 60, X1: 600, Y0: 12, Y1: 200, width: width, n: n}
	top := 0.0
	for _, s := range data {
		for _, v := range s.Values {
			if !math.IsNaN(v) {
				top = math.Max(top, v)
			}
		}
	}
	if top <= 0 || ylabel == "share" {
		// Shares live in [0, 1]: a split's expected share and band
		// (windowchart.go) may lie above every observed one.
		top = 1
	}
	ticks := niceTicks(0, top*1.05, 5)
	if ylabel == "share" {
		ticks = niceTicks(0, 1, 5)
	}
	if len(ticks) > 0 {
		top = math.Max(top, ticks[len(ticks)-1])
	}
	c.top = top
	x := func(i int) float64 {
		if n == 1 {
			return float64(c.X0+c.X1) / 2
		}
		return float64(c.X0) + float64(i)/float64(n-1)*float64(c.X1-c.X0)
	}
	y := func(v float64) float64 { return float64(c.Y1) - v/top*float64(c.Y1-c.Y0) }
	for _, v := range ticks {
		c.YTicks = append(c.YTicks, ytick{Y: y(v), Label: format(v)})
	}
	for _, i := range niceTicks(0, float64(n-1), 6) {
		if i < 0 || int(i) >= n || i != math.Trunc(i) {
			continue // slices are whole: no tick between two
		}
		c.XTicks = append(c.XTicks, tick{X: x(int(i)), Label: shortDuration(time.Duration(i) * width)})
	}
	every := max(1, n/10)
	for k, s := range data {
		ls := lineSeries{Name: s.Name, Class: fmt.Sprintf("s%d", k%8), Dash: dashes[k%len(dashes)]}
		var pts strings.Builder
		shape := shapes[k%len(shapes)]
		last := -1
		for i, v := range s.Values {
			if math.IsNaN(v) {
				continue
			}
			fmt.Fprintf(&pts, "%.1f,%.1f ", x(i), y(v))
			if i%every == (k*every/len(data))%every {
				ls.Markers = append(ls.Markers, marker{X: x(i), Y: y(v), Shape: shape,
					Title: fmt.Sprintf("%s at %s: %s", s.Name, shortDuration(time.Duration(i)*width), format(v))})
			}
			last = i
		}
		if last < 0 {
			continue
		}
		ls.Points = strings.TrimSpace(pts.String())
		ls.LabelX, ls.LabelY = x(last)+8, y(s.Values[last])+4
		c.Series = append(c.Series, ls)
	}
	spreadLabels(c.Series, float64(c.Y0), float64(c.Y1)+4)
	return c
}

// spreadLabels moves end labels apart so that series ending at the same
// value stay readable.
func spreadLabels(ss []lineSeries, top, bottom float64) {
	const gap = 13
	idx := make([]int, len(ss))
	for i := range idx {
		idx[i] = i
	}
	for i := 1; i < len(idx); i++ { // insertion sort by LabelY: a handful of series
		for j := i; j > 0 && ss[idx[j]].LabelY < ss[idx[j-1]].LabelY; j-- {
			idx[j], idx[j-1] = idx[j-1], idx[j]
		}
	}
	for k := 1; k < len(idx); k++ {
		if prev := ss[idx[k-1]].LabelY; ss[idx[k]].LabelY < prev+gap {
			ss[idx[k]].LabelY = prev + gap
		}
	}
	if n := len(idx); n > 0 && ss[idx[n-1]].LabelY > bottom {
		shift := ss[idx[n-1]].LabelY - bottom
		for _, i := range idx {
			ss[i].LabelY = math.Max(top, ss[i].LabelY-shift)
		}
	}
}

func shortDuration(d time.Duration) string {
	switch {
	case d >= time.Minute:
		return d.Round(time.Second).String()
	case d >= time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', -1, 64) + "s"
	}
	return d.String()
}

// diamondPath is the observed share's marker.
func diamondPath(x float64, y int) template.HTMLAttr {
	return template.HTMLAttr(fmt.Sprintf(`d="M%.1f %dl6 6-6 6-6-6z"`, x, y-6))
}

// offset adds two integers (template geometry).
func offset(a, b int) int { return a + b }

// truncate shortens a label to n runes with an ellipsis in the middle:
// pod names differ at their end (callme-7b469b5ddc-xk2vq).
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	head := (n - 1) / 3
	return string(r[:head]) + "…" + string(r[len(r)-(n-1-head):])
}

// markerPath draws a marker shape centred on (x, y) as an SVG path.
func markerPath(m marker) template.HTMLAttr {
	x, y := m.X, m.Y
	var d string
	switch m.Shape {
	case "square":
		d = fmt.Sprintf("M%.1f %.1fh7v7h-7z", x-3.5, y-3.5)
	case "triangle":
		d = fmt.Sprintf("M%.1f %.1fl4.5 8h-9z", x, y-4.5)
	case "diamond":
		d = fmt.Sprintf("M%.1f %.1fl4.5 4.5-4.5 4.5-4.5-4.5z", x, y-4.5)
	case "cross":
		d = fmt.Sprintf("M%.1f %.1fl8 8m0-8l-8 8", x-4, y-4)
	default:
		d = fmt.Sprintf("M%.1f %.1fa4 4 0 1 0 8 0a4 4 0 1 0-8 0", x-4, y)
	}
	// Only numbers and path letters: safe as an attribute.
	return template.HTMLAttr(`d="` + d + `"`)
}
