package splittest

import (
	"slices"
	"testing"
)

// Every block of `of` draws holds exactly ofC1 trues, and the blocks do
// not all put them in the same places (the fixed cycle this replaces).
func TestBlocksAreExactAndShuffled(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ofC1, of int }{{5, 10}, {8, 10}, {1, 2}, {0, 3}, {3, 3}} {
		b := NewBlocks(c.ofC1, c.of)
		var first []bool
		moved := false
		for block := range 50 {
			got := make([]bool, c.of)
			n := 0
			for i := range got {
				got[i] = b.Next()
				if got[i] {
					n++
				}
			}
			if n != c.ofC1 {
				t.Fatalf("NewBlocks(%d, %d): block %d has %d trues: %v", c.ofC1, c.of, block, n, got)
			}
			if block == 0 {
				first = got
			} else if !slices.Equal(got, first) {
				moved = true
			}
		}
		if !moved && c.ofC1 != 0 && c.ofC1 != c.of {
			t.Errorf("NewBlocks(%d, %d): 50 blocks all put the trues at the same places: %v", c.ofC1, c.of, first)
		}
	}
}

func TestNewBlocksRefusesImpossibleSplits(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ ofC1, of int }{{1, 0}, {-1, 2}, {3, 2}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("NewBlocks(%d, %d) did not panic", c.ofC1, c.of)
				}
			}()
			NewBlocks(c.ofC1, c.of)
		}()
	}
}
