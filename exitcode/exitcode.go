// Package exitcode is mesh-verify's one vocabulary of exit codes (README.md
// "Exit codes"): a dedicated code per outcome, so that a CI gate tells a
// failed expectation from inconclusive evidence and from a broken setup.
// Any error can carry a code (Wrap, as k6's errext does); Of reads it back
// wherever the error travelled, and the process ends with it.
package exitcode

import (
	"errors"
	"fmt"
	"slices"
)

// The codes mesh-verify exits with; no other is ever given.
const (
	Pass         = 0
	Fail         = 1
	Inconclusive = 2
	Setup        = 3
	InvalidInput = 4
	Interrupted  = 130
)

// all lists every code mesh-verify gives.
var all = [...]int{Pass, Fail, Inconclusive, Setup, InvalidInput, Interrupted}

// Known says whether code is one mesh-verify gives: a report edited by
// hand may hold another, which the shell would take modulo 256.
func Known(code int) bool { return slices.Contains(all[:], code) }

// Coder is any error that decides the exit code it ends the process with.
type Coder interface {
	error
	ExitCode() int
}

// Error carries an exit code and a message not printed yet. A nil Err is
// an exit code alone: the outcome was printed already (a verdict), and
// the error's message is empty.
type Error struct {
	Code int
	Err  error
}

// Wrap attaches code to err; a nil err gives an error with an empty
// message that still ends the process with code.
func Wrap(code int, err error) *Error { return &Error{Code: code, Err: err} }

// InvalidInputf is the error of bad input (exit InvalidInput), formatted
// as fmt.Errorf does: the one constructor cmd and judge share.
func InvalidInputf(format string, a ...any) error {
	return Wrap(InvalidInput, fmt.Errorf(format, a...))
}

func (e *Error) Error() string {
	if e.Err == nil {
		return ""
	}
	return e.Err.Error()
}

// Unwrap lets errors.Is and errors.As see the cause.
func (e *Error) Unwrap() error { return e.Err }

// ExitCode is the code the process ends with.
func (e *Error) ExitCode() int { return e.Code }

// Of is the code of the outermost error in err's chain that carries one,
// def when none does.
func Of(err error, def int) int {
	var c Coder
	if errors.As(err, &c) {
		return c.ExitCode()
	}
	return def
}

// severity orders the codes for Worst, least severe first: an
// infrastructure fault or bad input says nothing about the mesh, so it
// outranks a FAIL rather than hiding behind one, and an interrupted batch
// did not finish at all.
var severity = [...]int{Pass, Inconclusive, Fail, Setup, InvalidInput, Interrupted}

// Worst is the code of several outcomes combined (run a.yaml b.yaml):
// the most severe by severity; Pass for none. A code mesh-verify does
// not give counts as Setup.
func Worst(codes ...int) int {
	w := 0
	for _, c := range codes {
		i := slices.Index(severity[:], c)
		if i < 0 {
			i = slices.Index(severity[:], Setup)
		}
		w = max(w, i)
	}
	return severity[w]
}

// Name is the outcome a code stands for, as summaries print it.
func Name(code int) string {
	switch code {
	case Pass:
		return "PASS"
	case Fail:
		return "FAIL"
	case Inconclusive:
		return "INCONCLUSIVE"
	case Setup:
		return "SETUP ERROR"
	case InvalidInput:
		return "INVALID INPUT"
	case Interrupted:
		return "INTERRUPTED"
	}
	return fmt.Sprintf("exit %d", code)
}
