package reports

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
)

// FuzzDiff: two report.json files read back for `report diff` may have
// been edited or crafted. Comparing them must refuse them with an error or
// succeed without a panic, and when it succeeds the summary line must say
// the outcome the exit code follows (issue 22: "no significant change"
// beside a table of changes), whatever the counts.
func FuzzDiff(f *testing.F) {
	var full bytes.Buffer
	if err := WriteJSON(&full, sample()); err != nil {
		f.Fatal(err)
	}
	f.Add(full.Bytes(), full.Bytes())
	f.Add(full.Bytes(), []byte(`{"schema": "`+Schema+`", "dimensions": [{"name": "cluster", "attributed": 1, "buckets": [{"name": "c1", "count": -1}]}]}`))
	f.Add([]byte(`{"schema": "`+Schema+`", "dimensions": [{"name": "cluster", "buckets": [{"name": "c1", "count": 9223372036854775807}, {"name": "c2", "count": 1}]}]}`), full.Bytes())
	f.Add([]byte(`{"schema": "`+Schema+`", "expectations": [{"name": "s", "kind": "successRate", "verdict": "PASS", "result": {"verdict": "PASS", "observed": 1, "n": 10, "effectiveN": -1}}]}`), full.Bytes())
	f.Fuzz(func(t *testing.T, a, b []byte) {
		ra, err := DecodeJSON("a.json", a)
		if err != nil {
			return
		}
		rb, err := DecodeJSON("b.json", b)
		if err != nil {
			return
		}
		d, err := Diff(ra, rb, 0.95)
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := DiffTerminal(&out, d); err != nil {
			t.Fatalf("terminal: %v", err)
		}
		want := map[assert.ExpectationStatus]string{assert.ExpectationChanged: "RESULT: CHANGED",
			assert.ExpectationSame: "RESULT: no change", assert.ExpectationUntestable: "RESULT: UNTESTABLE"}[d.Outcome]
		if want == "" || !strings.Contains(out.String(), want) {
			t.Fatalf("outcome %q, summary:\n%s", d.Outcome, out.String())
		}
		_ = DiffHTML(io.Discard, d)
		_ = DiffJSON(io.Discard, d)
	})
}
