package reports

import (
	"fmt"
	"io"
	"time"

	"github.com/olekukonko/tablewriter"
	"github.com/olekukonko/tablewriter/renderer"
	"github.com/olekukonko/tablewriter/tw"

	"github.com/mesh-verify/mesh-verify/assert"
)

// Converge is the record of a gate that repeats the whole scenario until
// Need consecutive runs pass or Within has passed (run --converge N
// --within D, README.md "CI gate"): a mesh configuration takes time to
// propagate, so the first runs after a push may fail and still converge.
type Converge struct {
	// Need is how many consecutive PASS runs were required.
	Need int `json:"need"`
	// Within is the deadline, counted from the start of the first attempt.
	Within time.Duration `json:"within"`
	// Converged is true when Need consecutive runs passed in time.
	Converged bool `json:"converged"`
	// Reason says why the gate stopped.
	Reason string `json:"reason"`
	// Done is set in the gate's final report; an attempt's report written
	// while the gate went on has it false.
	Done bool `json:"done,omitempty"`
	// Attempts are every run of the gate, in order; each has its own run
	// directory under --out named by its run id. A gate that judged the
	// windows of one run (Mode ConvergeWindows) has none.
	Attempts []Attempt `json:"attempts"`

	// Mode is ConvergeRuns (whole runs repeated) or ConvergeWindows (one
	// run whose windows were judged as they sealed); "" is ConvergeRuns.
	Mode string `json:"mode,omitempty"`
	// The rest is a windows gate's (docs/statistics.md §10.1). Window is
	// the length of the windows cut between changes, Looks the windows it
	// may judge (⌈Within/Window⌉), Level the confidence each is judged at
	// (1 - α/Looks), Judged the windows it judged.
	Window time.Duration `json:"window,omitempty"`
	Looks  int           `json:"looks,omitempty"`
	Level  float64       `json:"level,omitempty"`
	Judged int           `json:"judged,omitempty"`
	// Stopped is why the attack ended: converged, deadline, looks spent
	// or interrupted.
	Stopped string `json:"stopped,omitempty"`
	// LastChange is the 1-based window the last change of the expected
	// shares opened (0: none), ChangeAt its start after the attack's.
	LastChange int            `json:"lastChange,omitempty"`
	ChangeAt   *time.Duration `json:"changeAt,omitempty"`
	// ConvergedAt is the end of the last of the Need consecutive passing
	// windows (Windows) after the attack's start; TimeToConverge is that
	// after ChangeAt (after the start without a change): an upper bound on
	// when the split entered its band.
	ConvergedAt    *time.Duration `json:"convergedAt,omitempty"`
	TimeToConverge *time.Duration `json:"timeToConverge,omitempty"`
	Windows        []int          `json:"windows,omitempty"`
	// FailedWindows are the 1-based windows after the last change that
	// FAILed.
	FailedWindows []int `json:"failedWindows,omitempty"`
}

// Modes of a converge gate (Converge.Mode).
const (
	ConvergeRuns    = "runs"
	ConvergeWindows = "windows"
)

// Attempt is one run of a converging gate.
type Attempt struct {
	RunID    string         `json:"runId"`
	Start    time.Time      `json:"start"`
	Duration time.Duration  `json:"duration"`
	Verdict  assert.Verdict `json:"verdict"`
	ExitCode int            `json:"exitCode"`
	// Reason is one line: the failing expectation, the setup error.
	Reason string `json:"reason,omitempty"`
}

// attempts prints the converge section of the terminal and Markdown output.
func (p *printer) attempts(r *Report, table func(io.Writer) *tablewriter.Table, heading string) {
	c := r.Converge
	if c == nil {
		return
	}
	state := "converged"
	if !c.Converged {
		state = "did not converge"
	}
	if c.Mode == ConvergeWindows {
		// One run: its windows are the split's, listed with it.
		p.f("%sconverge: %d consecutive windows passing within %s, judged as they sealed (windows of %s, %d looks at %s; attack stopped: %s) — %s (%s)\n\n",
			heading, c.Need, c.Within, c.Window, c.Looks, Level(c.Level), c.Stopped, state, p.esc(c.Reason))
		return
	}
	p.f("%sconverge: %d consecutive passes within %s — %s (%s)\n\n", heading, c.Need, c.Within, state, p.esc(c.Reason))
	t := table(p.w)
	t.Header("attempt", "run", "start", "duration", "verdict", "exit", "reason")
	for i, a := range c.Attempts {
		p.err(t.Append(fmt.Sprint(i+1), p.esc(a.RunID), a.Start.UTC().Format(time.TimeOnly), round(a.Duration),
			a.Verdict.String(), fmt.Sprint(a.ExitCode), p.esc(a.Reason)))
	}
	p.table(t)
	if !p.markdown {
		p.f("\n")
	}
}

// ConvergeTable writes the converge section alone, as the terminal
// output shows it (run --converge prints it after the last attempt).
func ConvergeTable(w io.Writer, c *Converge) error {
	p := &printer{w: w}
	p.attempts(&Report{Converge: c}, func(w io.Writer) *tablewriter.Table {
		return tablewriter.NewTable(w, tablewriter.WithRenderer(renderer.NewBlueprint(tw.Rendition{Symbols: tw.NewSymbols(tw.StyleLight)})))
	}, "")
	return nil
}
