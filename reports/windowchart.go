package reports

import (
	"fmt"
	"math"
	"time"
)

// The split-over-time chart of a split judged in windows
// (docs/statistics.md §10): per window and bucket the allowed band and
// the expected share, a line at each change of the expected shares, and
// a line where the change is shown converged (or, when not, where the
// window that FAILs starts).

// wband is a bucket's allowed band in one window.
type wband struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

// wexpected is a bucket's expected share in one window.
type wexpected struct {
	X0, X1, Y float64
	Class     string
	Title     string
}

// vline is a vertical mark across the plot: a change, a convergence.
type vline struct {
	X     float64
	Class string
	Label string
	Title string
}

// timeX maps a time after the start onto the chart's x axis, as
// newLineChart places slice i at i·width.
func (c *lineChart) timeX(t time.Duration) float64 {
	if c.n <= 1 {
		return float64(c.X0+c.X1) / 2
	}
	f := float64(t) / float64(c.width) / float64(c.n-1)
	return float64(c.X0) + math.Min(math.Max(f, 0), 1)*float64(c.X1-c.X0)
}

// shareY maps a share onto the y axis, clipped to the plot.
func (c *lineChart) shareY(v float64) float64 {
	v = math.Min(math.Max(v, 0), c.top)
	return float64(c.Y1) - v/c.top*float64(c.Y1-c.Y0)
}

// addWindows draws the windows of ws over a share chart whose series are
// the buckets (a series' colour class is its bucket's; a bucket the
// chart has no series for is drawn in the class of none).
func (c *lineChart) addWindows(ws *Windows) {
	if c == nil || ws == nil {
		return
	}
	class := map[string]string{}
	for _, s := range c.Series {
		class[s.Name] = s.Class
	}
	for _, w := range ws.Windows {
		x0, x1 := c.timeX(w.Start), c.timeX(w.End)
		state := w.Verdict.String()
		if w.Settling {
			state = "settling, not judged"
		}
		from := ""
		if w.Source != nil {
			from = " from " + w.Source.Object + " resourceVersion " + w.Source.ResourceVersion
		}
		for _, b := range w.Split.Buckets {
			cl, ok := class[b.Bucket]
			if !ok {
				continue
			}
			hi, lo := c.shareY(b.Allowed.Hi), c.shareY(b.Allowed.Lo)
			title := fmt.Sprintf("window %d (%s–%s, %s): %s expected %s, allowed %s–%s, observed %s%s", w.Index, shortDuration(w.Start.Round(100*time.Millisecond)),
				shortDuration(w.End.Round(100*time.Millisecond)), state, b.Bucket, pct(b.Expected), pct(b.Allowed.Lo), pct(b.Allowed.Hi), pct(b.Observed), from)
			if !w.Settling {
				c.Bands = append(c.Bands, wband{X: x0, Y: hi, W: math.Max(x1-x0, 1), H: math.Max(lo-hi, 1), Class: cl, Title: title})
			}
			c.Expected = append(c.Expected, wexpected{X0: x0, X1: x1, Y: c.shareY(b.Expected), Class: cl, Title: title})
		}
	}
	for _, cv := range ws.Converge {
		c.VLines = append(c.VLines, vline{X: c.timeX(cv.At), Class: "wchange", Label: "change",
			Title: "expected shares changed (resourceVersion " + cv.ResourceVersion + ") at " + shortDuration(cv.At.Round(100*time.Millisecond))})
		switch {
		case cv.Converged:
			c.VLines = append(c.VLines, vline{X: c.timeX(cv.At + cv.Within), Class: "wconv", Label: "in band",
				Title: "converged within " + shortDuration(cv.Within.Round(100*time.Millisecond)) + ": " + cv.Text})
		case cv.NotConverged && cv.Window > 0 && cv.Window <= len(ws.Windows):
			c.VLines = append(c.VLines, vline{X: c.timeX(ws.Windows[cv.Window-1].Start), Class: "wfail", Label: "not converged",
				Title: cv.Text})
		}
	}
}

// windowSeries is, per bucket, each slice's window's observed share: the
// split over time as the windows judged it, for dimensions the timeline
// has no per-slice counts of (version, pod).
func windowSeries(ws *Windows, width time.Duration, n int) []seriesData {
	var names []string
	seen := map[string]bool{}
	for _, w := range ws.Windows {
		for _, b := range w.Split.Buckets {
			if !seen[b.Bucket] {
				seen[b.Bucket] = true
				names = append(names, b.Bucket)
			}
		}
	}
	out := make([]seriesData, len(names))
	for k, name := range names {
		out[k] = seriesData{Name: name, Values: make([]float64, n)}
		for i := range n {
			out[k].Values[i] = math.NaN()
			t := time.Duration(i) * width
			for _, w := range ws.Windows {
				if t >= w.Start && t < w.End && w.Split.N > 0 {
					for _, b := range w.Split.Buckets {
						if b.Bucket == name {
							out[k].Values[i] = b.Observed
						}
					}
				}
			}
		}
	}
	return out
}

// windowCharts draws one split-over-time chart per split judged in
// windows: over the timeline's split by cluster when it is by cluster,
// else over its windows' observed shares.
func windowCharts(r *Report, charts []*lineChart) []*lineChart {
	tl := r.Timeline
	n, width := len(tl.Slices), tl.SliceWidth
	if n == 0 || width <= 0 {
		return charts
	}
	for _, e := range r.Expectation {
		if e.Windows == nil {
			continue
		}
		var c *lineChart
		if e.By == "cluster" && (e.Source == "" || e.Source == "body") {
			for _, ch := range charts {
				if ch.ID == "split" {
					c = ch
				}
			}
		}
		if c == nil {
			c = newLineChart("windows", "Split by "+e.By+" over time, per window", "share", width, n, windowSeries(e.Windows, width, n), pct)
			if c == nil {
				continue
			}
			charts = append(charts, c)
		}
		c.Title += "; " + e.Name + ": expected share and allowed band per window"
		c.addWindows(e.Windows)
	}
	return charts
}
