package runlog

import (
	"errors"
	"fmt"
	"io"
	"slices"

	vegeta "github.com/tsenart/vegeta/v12/lib"
	"github.com/tsenart/vegeta/v12/lib/plot"
)

// PlotPoints is how many points each series of a plot keeps at most (half
// vegeta plot's default; more than a chart's width shows): however many
// requests, a page of a few clusters stays under a megabyte.
const PlotPoints = 2000

// Plot labels: a request's cluster when attribution named one, else
// Unattributed; failed requests (not answered with a success code) get
// their own series, which vegeta's page draws in red ("ERROR").
const (
	Unattributed = "unattributed"
	FailedLabel  = "ERROR"
)

// PlotLabel is the series a request is drawn in.
func PlotLabel(a Attribution) string {
	switch {
	case a.OK && a.Cluster != "":
		return a.Cluster
	case a.OK:
		return Unattributed
	case a.Cluster != "":
		return a.Cluster + " " + FailedLabel
	}
	return FailedLabel
}

// Plot writes the run directory's latencies over time as vegeta plot's
// interactive HTML page, one series per PlotLabel, each downsampled to
// PlotPoints. vegeta's plot draws a result only once every earlier
// sequence number has come, so results are renumbered over those the
// directory holds: a log cut by a write error still plots whole. A cut
// log (ErrTruncated) is plotted up to the cut and the error returned
// after the page is written.
func Plot(w io.Writer, dir, title string) error {
	// First pass: which sequence numbers there are, per attack name.
	seqs := map[string][]uint64{}
	cut := ReadResults(dir, func(r *vegeta.Result, _ Attribution) error {
		seqs[r.Attack] = append(seqs[r.Attack], r.Seq)
		return nil
	})
	if cut != nil && !errors.Is(cut, ErrTruncated) {
		return cut
	}
	for name, s := range seqs {
		slices.Sort(s)
		if i := dupAt(s); i >= 0 {
			return fmt.Errorf("runlog: %s: seq %d of attack %q appears twice", ResultsFile, s[i], name)
		}
	}

	var label string
	p := plot.New(
		plot.Title(title),
		plot.Downsample(PlotPoints),
		plot.Label(func(*vegeta.Result) string { return label }),
	)
	err := ReadResults(dir, func(r *vegeta.Result, a Attribution) error {
		rank, ok := slices.BinarySearch(seqs[r.Attack], r.Seq)
		if !ok {
			return nil // recorded after the first pass: a run still going
		}
		r.Seq = uint64(rank)
		label = PlotLabel(a)
		return p.Add(r)
	})
	if err != nil && !errors.Is(err, ErrTruncated) {
		return err
	}
	p.Close()
	if _, err := p.WriteTo(w); err != nil {
		return err
	}
	return cut
}

func dupAt(s []uint64) int {
	for i := 1; i < len(s); i++ {
		if s[i] == s[i-1] {
			return i
		}
	}
	return -1
}
