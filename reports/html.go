package reports

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/redact"
)

//go:embed report.html.tmpl
var htmlTemplateText string

// HTMLOptions add what report.json does not hold to the HTML report.
type HTMLOptions struct {
	// Scenario is the scenario file as run; credential-like values are
	// redacted before it is shown.
	Scenario []byte
}

// HTML writes report.html: one self-contained page (inline CSS and SVG, no
// script, nothing fetched — a Content-Security-Policy says so to the
// browser) with the verdict, a chart of each expectation's rule, the
// observed tables, the timeline, the mirror, the clusters and what it
// takes to reproduce the run. Everything that came from a response, a
// log, a header or a cluster is escaped by html/template.
func HTML(w io.Writer, r *Report) error { return HTMLWith(w, r, HTMLOptions{}) }

// HTMLWith is HTML with extras from the run directory.
func HTMLWith(w io.Writer, r *Report, o HTMLOptions) error {
	t, err := template.New("report").Funcs(template.FuncMap{
		"pct":      pct,
		"level":    Level,
		"dur":      round,
		"marker":   markerPath,
		"f1":       func(v float64) string { return fmt.Sprintf("%.1f", v) },
		"verdict":  verdictClass,
		"mark":     verdictMark,
		"levels":   LevelsLine,
		"evidence": EvidenceLine,
		"chi":      ChiSquareLine,
		"upper":    strings.ToUpper,
		"diamond":  diamondPath,
		"yoff":     offset,
		"trunc":    truncate,
		"inc":      func(i int) int { return i + 1 },
		"last":     func(first, n int) int { return first + n - 1 },
		// A split judged in windows: windowRow's cells, as the terminal
		// and Markdown show them.
		"windowHeader": func() []string { return windowHeader },
		"windowRow":    windowRow,
	}).Parse(htmlTemplateText)
	if err != nil {
		return fmt.Errorf("parse the HTML template: %w", err)
	}
	// One escaping layer for HTML: every string made printable (no raw
	// ESC or BEL from a response), then escaped by html/template.
	printable, err := MapStrings(r, htmlText)
	if err != nil {
		return fmt.Errorf("HTML report: %w", err)
	}
	return t.Execute(w, newHTMLView(printable, o))
}

type htmlView struct {
	R            *Report
	Mark         string
	ExitMeaning  string
	Started      string
	Expectations []expView
	Dimensions   []dimView
	Charts       []*lineChart
	Mirrors      []expView
	Inventory    []inventoryRow
	Tunnel       string
	Plan         []planRow
	Scenario     string
	Generated    string
}

type expView struct {
	Expectation
	Mark   string
	Chart  *shareChart
	Advice string
}

type dimView struct {
	Title   string
	Name    string
	Rows    []dimRow
	Errors  bool
	Unattr  int64
	UnattrE int64
}

type dimRow struct {
	Label, Sources string
	Count, Errors  int64
	Share          float64
	Bar            float64 // 0–100, width of the share bar
}

type inventoryRow struct {
	Cluster, Name, Workload, Version, Phase, IP, Node string
	Ready                                             bool
	Restarts                                          int
}

type planRow struct {
	Name, Unit, Verdict string
	Sent, Planned       int64
	Required            string
	Enough              string
}

func newHTMLView(r *Report, o HTMLOptions) htmlView {
	v := htmlView{R: r, Mark: verdictMark(r.Verdict), ExitMeaning: exitMeaning(r.ExitCode),
		Generated: time.Now().UTC().Format(time.RFC3339)}
	if !r.Attack.Started.IsZero() {
		v.Started = r.Attack.Started.UTC().Format(time.RFC3339)
	}
	podCluster := map[string]string{}
	for _, d := range r.Dimensions {
		for _, b := range d.Buckets {
			if b.Cluster != "" {
				podCluster[b.Name] = b.Cluster
			}
		}
	}
	for i, e := range r.Expectation {
		if e.By == "pod" && e.Split != nil {
			// Pods are shown as cluster/pod, in a copy: the report is the caller's.
			s := *e.Split
			s.Buckets = slices.Clone(s.Buckets)
			for k, b := range s.Buckets {
				if c := podCluster[b.Bucket]; c != "" && !strings.HasPrefix(b.Bucket, c+"/") {
					s.Buckets[k].Bucket = c + "/" + b.Bucket
				}
			}
			e.Split = &s
		}
		ev := expView{Expectation: e, Mark: verdictMark(e.Verdict)}
		id := fmt.Sprintf("exp%d", i)
		switch {
		case e.Split != nil:
			ev.Chart = newShareChart(id, e.Split)
		case e.Result != nil:
			ev.Chart = newResultChart(id, e.Kind, e.Result)
		}
		switch {
		case e.RequiredConnections > 0:
			ev.Advice = fmt.Sprintf("to settle it: about %d connections (or keepAlive: false); more requests on the same connections would not", e.RequiredConnections)
		case e.RequiredN > 0:
			ev.Advice = fmt.Sprintf("to settle it: about %d requests in all", e.RequiredN)
		}
		v.Expectations = append(v.Expectations, ev)
		if e.Kind == "mirror" {
			v.Mirrors = append(v.Mirrors, ev)
		}
		v.Plan = append(v.Plan, planOf(e))
	}
	for _, d := range r.Dimensions {
		if d.Attributed == 0 && len(d.Buckets) == 0 {
			continue
		}
		dv := dimView{Title: fmt.Sprintf("by %s, from %s: %d attributed, %d unattributed, %d connections", d.Name, d.Source, d.Attributed, d.Unattributed, d.Units),
			Name: d.Name, Unattr: d.Unattributed, UnattrE: d.ErrorsUnattributed, Errors: d.ErrorsUnattributed > 0}
		for _, b := range d.Buckets {
			dv.Rows = append(dv.Rows, dimRow{Label: BucketLabel(b), Count: b.Count, Share: b.Share, Errors: b.Errors,
				Bar: math.Round(1000*b.Share) / 10, Sources: strings.Join(b.Sources, ", ")})
			dv.Errors = dv.Errors || b.Errors > 0
		}
		v.Dimensions = append(v.Dimensions, dv)
	}
	v.Charts = windowCharts(r, timelineCharts(r.Timeline, r.Attack.Elapsed))
	if k := r.Kubernetes; k != nil {
		v.Inventory = inventoryRows(k.Inventory)
		if k.Tunnel != nil {
			if b, err := json.MarshalIndent(k.Tunnel, "", "  "); err == nil {
				v.Tunnel = string(b)
			}
		}
	}
	if len(o.Scenario) > 0 {
		v.Scenario = htmlText(redact.Scenario(string(o.Scenario)))
	}
	return v
}

// BucketLabel shows a pod bucket with its cluster (pod names repeat
// across clusters); other buckets by name. A pod bucket's name is
// "cluster/pod" already when its cluster is known (tally.PodKey); reports
// of earlier versions named the pod alone.
func BucketLabel(b Bucket) string {
	if b.Cluster != "" && !strings.HasPrefix(b.Name, b.Cluster+"/") {
		return b.Cluster + "/" + b.Name
	}
	return b.Name
}

func planOf(e Expectation) planRow {
	p := planRow{Name: e.Name, Verdict: e.Verdict.String(), Planned: e.Planned, Unit: e.PlannedUnit}
	switch {
	case e.Split != nil:
		p.Sent = e.Split.N
		if e.PlannedUnit == "connections" {
			p.Sent = e.Split.Connections
		}
	case e.Result != nil && e.Result.Evidence != nil:
		p.Sent = e.Result.N
	}
	if p.Unit == "" {
		p.Unit = "requests"
	}
	switch {
	case e.RequiredConnections > 0:
		p.Required = fmt.Sprintf("%d connections", e.RequiredConnections)
	case e.RequiredN > 0:
		p.Required = fmt.Sprintf("%d requests", e.RequiredN)
	}
	if p.Planned > 0 {
		if p.Sent >= p.Planned {
			p.Enough = "enough"
		} else {
			p.Enough = "fewer than planned"
		}
	}
	return p
}

func exitMeaning(code int) string {
	switch code {
	case 0:
		return "pass"
	case 1:
		return "an expectation failed"
	case 2:
		return "inconclusive"
	case 3:
		return "setup error"
	case 4:
		return "invalid input"
	case 130:
		return "interrupted"
	}
	return "unknown"
}

func verdictClass(v assert.Verdict) string {
	switch v {
	case assert.Pass:
		return "pass"
	case assert.Fail:
		return "fail"
	}
	return "inconclusive"
}

// timelineCharts draws the rate and errors, the split per cluster as the
// responses say, what the logs counted per cluster, and the latency per
// cluster over the run.
//
// elapsed is the attack's length: the last slice covers only what of it
// is left after the others, and its rate is taken over that part, not
// over a whole slice, so the attack's end is not drawn as a rate drop; a
// last slice of under a quarter of a slice is not drawn at all (a few
// requests over a few milliseconds make no rate).
func timelineCharts(tl Timeline, elapsed time.Duration) []*lineChart {
	n, w := len(tl.Slices), tl.SliceWidth
	if n == 0 || w <= 0 {
		return nil
	}
	covered := func(i int) time.Duration {
		if i == n-1 && elapsed > time.Duration(n-1)*w && elapsed < time.Duration(n)*w {
			return elapsed - time.Duration(n-1)*w
		}
		return w
	}
	perSec := func(c int64) float64 { return float64(c) / w.Seconds() }
	rate := seriesData{Name: "requests/s", Values: make([]float64, n)}
	errs := seriesData{Name: "errors/s", Values: make([]float64, n)}
	clusters, logClusters, latSeries := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for i, s := range tl.Slices {
		switch cov := covered(i); {
		case cov < w/4:
			rate.Values[i], errs.Values[i] = math.NaN(), math.NaN()
		default:
			rate.Values[i], errs.Values[i] = float64(s.Requests)/cov.Seconds(), float64(s.Errors)/cov.Seconds()
		}
		for c := range s.Clusters {
			clusters[c] = true
		}
		for c := range s.Sources["logs"] {
			logClusters[c] = true
		}
		for c := range s.Latency {
			latSeries[c] = true
		}
	}
	fmtRate := func(v float64) string { return fmt.Sprintf("%.4g/s", v) }
	charts := []*lineChart{newLineChart("rate", "Rate and errors", "per second", w, n, []seriesData{rate, errs}, fmtRate)}
	if len(clusters) > 0 {
		var share []seriesData
		for _, c := range slices.Sorted(maps.Keys(clusters)) {
			sd := seriesData{Name: c, Values: make([]float64, n)}
			for i, s := range tl.Slices {
				var tot int64
				for _, v := range s.Clusters {
					tot += v
				}
				sd.Values[i] = math.NaN()
				if tot > 0 {
					sd.Values[i] = float64(s.Clusters[c]) / float64(tot)
				}
			}
			share = append(share, sd)
		}
		charts = append(charts, newLineChart("split", "Split by cluster, as the responses say", "share", w, n, share, pct))
	}
	if len(logClusters) > 0 {
		var logs []seriesData
		for _, c := range slices.Sorted(maps.Keys(logClusters)) {
			sd := seriesData{Name: c, Values: make([]float64, n)}
			for i, s := range tl.Slices {
				sd.Values[i] = perSec(s.Sources["logs"][c])
			}
			logs = append(logs, sd)
		}
		charts = append(charts, newLineChart("logs", "Served per cluster, as the pods' logs say", "lines per second", w, n, logs, fmtRate))
	}
	if len(latSeries) > 0 {
		names := slices.Sorted(maps.Keys(latSeries))
		for _, q := range []struct {
			id, title string
			get       func(SliceLatency) time.Duration
		}{
			{"p50", "Latency p50 per cluster", func(l SliceLatency) time.Duration { return l.P50 }},
			{"p99", "Latency p99 per cluster", func(l SliceLatency) time.Duration { return l.P99 }},
		} {
			var lat []seriesData
			for _, c := range names {
				sd := seriesData{Name: c, Values: make([]float64, n)}
				for i, s := range tl.Slices {
					sd.Values[i] = math.NaN()
					if l, ok := s.Latency[c]; ok && l.N > 0 {
						sd.Values[i] = float64(q.get(l)) / float64(time.Millisecond)
					}
				}
				lat = append(lat, sd)
			}
			charts = append(charts, newLineChart(q.id, q.title, "milliseconds", w, n, lat, func(v float64) string { return fmt.Sprintf("%.3g ms", v) }))
		}
	}
	return slices.DeleteFunc(charts, func(c *lineChart) bool { return c == nil })
}

// inventoryRows reads the pods out of the inventory snapshot, whatever Go
// type wrote it (report.json holds it as plain JSON).
func inventoryRows(inv any) []inventoryRow {
	if inv == nil {
		return nil
	}
	b, err := json.Marshal(inv)
	if err != nil {
		return nil
	}
	var snap struct {
		Clusters []struct {
			Pods []struct {
				Cluster  string `json:"cluster"`
				Name     string `json:"name"`
				Workload string `json:"workload"`
				Version  string `json:"version"`
				Phase    string `json:"phase"`
				IP       string `json:"ip"`
				Node     string `json:"node"`
				Ready    bool   `json:"ready"`
				Restarts int    `json:"restarts"`
			} `json:"pods"`
		} `json:"clusters"`
	}
	if json.Unmarshal(b, &snap) != nil {
		return nil
	}
	var out []inventoryRow
	for _, c := range snap.Clusters {
		for _, p := range c.Pods {
			out = append(out, inventoryRow{Cluster: p.Cluster, Name: p.Name, Workload: p.Workload, Version: p.Version,
				Phase: p.Phase, IP: p.IP, Node: p.Node, Ready: p.Ready, Restarts: p.Restarts})
		}
	}
	return out
}
