package attribution

import "sync"

// Bounds of the interner (issue 27): the values rules capture repeat (a
// run sees a handful of clusters, versions and pods), so each distinct
// one is made a string once instead of once per response. Past
// MaxInternedValues distinct values, or for a value longer than
// MaxInternedLen bytes, a capture is made a string per response as
// before: a rule that captures per-request values (a request id, a
// timestamp) must not grow the interner with the run.
const (
	MaxInternedValues = 4096
	MaxInternedLen    = 128
)

// interner hands out one string per distinct captured value; safe for the
// attribution workers to share.
type interner struct {
	mu sync.RWMutex
	m  map[string]string
}

// str is string(b), the same string for the same bytes while the
// interner has room.
func (in *interner) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if len(b) > MaxInternedLen {
		return string(b)
	}
	in.mu.RLock()
	s, ok := in.m[string(b)] // a lookup by string(b) does not allocate
	full := len(in.m) >= MaxInternedValues
	in.mu.RUnlock()
	if ok {
		return s
	}
	s = string(b)
	if full {
		return s
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if v, ok := in.m[s]; ok {
		return v
	}
	if len(in.m) < MaxInternedValues {
		if in.m == nil {
			in.m = map[string]string{}
		}
		in.m[s] = s
	}
	return s
}

// size is how many values the interner holds.
func (in *interner) size() int {
	in.mu.RLock()
	defer in.mu.RUnlock()
	return len(in.m)
}
