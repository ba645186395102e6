package attribution

import (
	"fmt"
	"sync"
	"testing"
)

// The interner gives the same string for the same bytes, stops growing
// at MaxInternedValues (still giving the right value past it) and never
// keeps a value longer than MaxInternedLen.
func TestInternerBounds(t *testing.T) {
	t.Parallel()
	var in interner
	a := in.str([]byte("callme-c1-0"))
	b := in.str([]byte("callme-c1-0"))
	if a != "callme-c1-0" || b != a || in.size() != 1 {
		t.Fatalf("got %q, %q, %d values", a, b, in.size())
	}
	if in.str(nil) != "" || in.size() != 1 {
		t.Fatal("an empty value was interned")
	}
	long := make([]byte, MaxInternedLen+1)
	for i := range long {
		long[i] = 'x'
	}
	if got := in.str(long); got != string(long) || in.size() != 1 {
		t.Fatalf("a %d-byte value: %d bytes back, %d values kept", len(long), len(got), in.size())
	}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range MaxInternedValues + 100 {
				v := fmt.Sprintf("pod-%d-%d", w, i)
				if got := in.str([]byte(v)); got != v {
					t.Errorf("%q interned as %q", v, got)
					return
				}
			}
		}()
	}
	wg.Wait()
	if in.size() != MaxInternedValues {
		t.Fatalf("%d values kept, bound %d", in.size(), MaxInternedValues)
	}
}

// A capture is interned: attributing the same body twice gives the very
// same strings, and attributing allocates nothing for them.
func TestAttributeInternsCaptures(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	rules, err := Preset("tutorial")
	if err != nil {
		t.Fatal(err)
	}
	a := New(rules, nil)
	body := []byte("I'm callme-service v1")
	first := a.Attribute(body, nil, true)
	if first.Service != "callme-service" || first.Version != "v1" {
		t.Fatalf("attributed %+v", first)
	}
	allocs := testing.AllocsPerRun(100, func() {
		id := a.Attribute(body, nil, true)
		if id.Version != first.Version {
			t.Fatalf("attributed %+v", id)
		}
	})
	// What is left is the regexp's own match slices (FindAllSubmatchIndex).
	if allocs > 3 {
		t.Errorf("%.0f allocations per attribution, want the regexp's 3 at most", allocs)
	}
}
