package assert

import "fmt"

// UnmarshalText reads verdicts back from saved JSON reports.
func (v *Verdict) UnmarshalText(b []byte) error {
	for _, c := range []Verdict{Pass, Inconclusive, Fail} {
		if c.String() == string(b) {
			*v = c
			return nil
		}
	}
	return fmt.Errorf("unknown verdict %q", b)
}
