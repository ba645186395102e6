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
