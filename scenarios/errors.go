package scenarios

import (
	"sort"
	"strconv"
	"strings"
)

// FieldError is one problem in a scenario file, positioned so an editor
// can jump to it: "file:line:col: field: msg". Field is the dotted path of
// the offending value (attack.rate, expect[2].split.weights.c4); it is
// empty for problems of the file as a whole (syntax, empty file). Line and
// Column are 1-based and 0 when unknown (a scenario built in code).
type FieldError struct {
	File   string
	Line   int
	Column int
	Field  string
	Msg    string

	err error // the underlying error, e.g. from reading the file
}

// Error formats the problem as "file:line:col: field: msg", leaving out the
// parts that are unknown.
func (e *FieldError) Error() string {
	var b strings.Builder
	b.WriteString(e.File)
	if e.Line > 0 {
		if b.Len() > 0 {
			b.WriteByte(':')
		}
		b.WriteString(strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteByte(':')
			b.WriteString(strconv.Itoa(e.Column))
		}
	}
	for _, s := range []string{e.Field, e.Msg} {
		if s == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteString(": ")
		}
		b.WriteString(s)
	}
	return b.String()
}

// Unwrap exposes the underlying error (e.g. fs.ErrNotExist from Load).
func (e *FieldError) Unwrap() error { return e.err }

// Errors are all the problems found in one scenario, sorted by position.
// Loading reports every problem at once so a user fixes a file in one pass.
type Errors []*FieldError

// Error puts one problem per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap lets errors.As find a *FieldError and errors.Is see causes.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortErrors orders by position; problems without a position (line 0)
// come first. The sort is stable so checks on one line keep their order.
func sortErrors(es Errors) {
	sort.SliceStable(es, func(i, j int) bool {
		a, b := es[i], es[j]
		if a.Line != b.Line {
			return a.Line < b.Line
		}
		return a.Column < b.Column
	})
}

// errOrNil avoids returning a typed nil inside a non-nil error interface.
func errOrNil(es Errors) error {
	if len(es) == 0 {
		return nil
	}
	sortErrors(es)
	return es
}
