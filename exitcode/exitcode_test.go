package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestOf(t *testing.T) {
	t.Parallel()
	cause := errors.New("cannot reach target")
	for _, tc := range []struct {
		name string
		err  error
		want int
	}{
		{"no code: the default", cause, InvalidInput},
		{"nil: the default", nil, InvalidInput},
		{"wrapped", Wrap(Setup, cause), Setup},
		{"wrapped further", fmt.Errorf("run: %w", Wrap(Interrupted, cause)), Interrupted},
		{"the outermost code wins", Wrap(Fail, Wrap(Setup, cause)), Fail},
		{"a code alone", Wrap(Inconclusive, nil), Inconclusive},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Of(tc.err, InvalidInput); got != tc.want {
				t.Errorf("Of(%v) = %d, want %d", tc.err, got, tc.want)
			}
		})
	}
}

func TestErrorMessageAndCause(t *testing.T) {
	t.Parallel()
	cause := errors.New("no request was sent")
	e := Wrap(Setup, cause)
	if e.Error() != cause.Error() || !errors.Is(e, cause) {
		t.Errorf("Wrap(Setup, %v): message %q, Is(cause) %v; want the cause's message and chain", cause, e.Error(), errors.Is(e, cause))
	}
	if msg := Wrap(Fail, nil).Error(); msg != "" {
		t.Errorf("a code alone says %q, want nothing (the verdict was printed)", msg)
	}
}

func TestKnown(t *testing.T) {
	t.Parallel()
	for code, want := range map[int]bool{0: true, 1: true, 2: true, 3: true, 4: true, 130: true, 5: false, 256: false, -1: false} {
		if got := Known(code); got != want {
			t.Errorf("Known(%d) = %v, want %v", code, got, want)
		}
	}
}

// TestWorst: a batch's code is its most severe outcome; a setup error or
// bad input outranks FAIL (they say nothing about the mesh), an interrupt
// outranks everything.
func TestWorst(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		codes []int
		want  int
	}{
		{"none", nil, Pass},
		{"all pass", []int{Pass, Pass}, Pass},
		{"inconclusive over pass", []int{Pass, Inconclusive}, Inconclusive},
		{"fail over inconclusive", []int{Inconclusive, Fail, Pass}, Fail},
		{"setup over fail", []int{Fail, Setup}, Setup},
		{"invalid input over setup", []int{Setup, InvalidInput, Fail}, InvalidInput},
		{"interrupt over all", []int{InvalidInput, Interrupted, Fail}, Interrupted},
		{"unknown code counts as setup", []int{Fail, 7}, Setup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := Worst(tc.codes...); got != tc.want {
				t.Errorf("Worst(%v) = %d, want %d", tc.codes, got, tc.want)
			}
		})
	}
}
