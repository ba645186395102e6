package reports

import (
	"encoding/xml"
	"fmt"
	"io"

	"github.com/mesh-verify/mesh-verify/assert"
)

// JUnit test-suite XML as CI systems read it: one test case per
// expectation; FAIL is a failure, INCONCLUSIVE is a failure too unless the
// scenario lets inconclusive pass, in which case it is reported as skipped.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     float64     `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
	Out      string      `xml:"system-out,omitempty"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// JUnit writes the report as JUnit XML.
func JUnit(w io.Writer, r *Report) error {
	// One escaping layer: clean makes every string printable text, the
	// XML encoder escapes it for XML.
	s := junitSuite{Name: "mesh-verify/" + clean(r.Scenario.Name, false), Time: r.Attack.Elapsed.Seconds(),
		Out: fmt.Sprintf("run %s, %d requests, target %s", clean(r.RunID, false), r.Metrics.Requests, clean(r.Target, false))}
	switch f := r.Failure; {
	case f != nil:
		// A run that judged nothing is one error case, never zero tests.
		text := "phase: " + clean(f.Phase, false)
		if f.Cause != "" {
			text += "\ncause: " + clean(f.Cause, false)
		}
		s.Errors++
		s.Cases = append(s.Cases, junitCase{Name: clean(f.Kind, false), Classname: s.Name,
			Error: &junitMessage{Message: clean(f.Error, false), Type: clean(f.Kind, false), Text: text}})
	case r.SetupError != "":
		s.Errors++
		s.Cases = append(s.Cases, junitCase{Name: "setup", Classname: s.Name,
			Error: &junitMessage{Message: clean(r.SetupError, false), Type: "setup"}})
	}
	for _, ce := range r.ConfigErrors {
		text := ""
		for _, smp := range ce.Samples {
			text += clean(smp, false) + "\n"
		}
		s.Errors++
		s.Cases = append(s.Cases, junitCase{Name: "configuration: " + clean(ce.Subject, false), Classname: s.Name,
			Error: &junitMessage{Message: clean(ce.Message, false), Type: "configuration", Text: text}})
	}
	for _, e := range r.Expectation {
		c := junitCase{Name: clean(e.Name, false), Classname: s.Name}
		reason := clean(e.Reason, false)
		text := ""
		if e.Windows != nil {
			// The reason names the deciding window; the text lists them all.
			text = windowsText(e.Windows)
		}
		switch e.Verdict {
		case assert.Fail:
			c.Failure = &junitMessage{Message: reason, Type: "FAIL", Text: text}
			s.Failures++
		case assert.Inconclusive:
			if r.Statistics.Inconclusive == "pass" {
				c.Skipped = &junitMessage{Message: reason}
				s.Skipped++
			} else {
				c.Failure = &junitMessage{Message: reason, Type: "INCONCLUSIVE", Text: text}
				s.Failures++
			}
		}
		s.Cases = append(s.Cases, c)
	}
	if c := r.Converge; c != nil {
		// The gate is a case of its own, so that junit.xml agrees with
		// the exit code: a gate that did not converge is a failure even
		// when its last attempt passed.
		gc := junitCase{Name: fmt.Sprintf("converge: %d consecutive passes within %s", c.Need, c.Within), Classname: s.Name}
		switch {
		case !c.Done:
			gc.Skipped = &junitMessage{Message: clean(c.Reason, false)}
			s.Skipped++
		case !c.Converged:
			gc.Failure = &junitMessage{Message: clean(c.Reason, false), Type: "converge"}
			s.Failures++
		}
		s.Cases = append(s.Cases, gc)
	}
	s.Tests = len(s.Cases)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(junitSuites{Suites: []junitSuite{s}}); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}
