package judge

import (
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/assert"
)

// FuzzCounts: check's counts files (CSV or JSON) are user input: a parse
// either gives counts within the bounds or an error naming the file.
func FuzzCounts(f *testing.F) {
	for _, s := range []string{"bucket,count\nc2,5000\n# c\nc3,5000\n", `{"c2": 700, "c3": 300}`, "{\n  \"c2\": 480,\n  \"c3\": 1.5\n}\n", "c1,9223372036854775807\n", `{"a":1,"a":2}`, "\"x\ny\",1\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data string) {
		for _, parse := range []func(string, []byte) (assert.Counts, error){parseCountsCSV, parseCountsJSON} {
			c, err := parse("counts.x", []byte(data))
			if err != nil {
				if !strings.Contains(err.Error(), "counts.x") {
					t.Errorf("error names no file: %v", err)
				}
				continue
			}
			if len(c.Buckets) != len(c.N) || len(c.Buckets) > MaxBuckets {
				t.Errorf("%d buckets, %d counts", len(c.Buckets), len(c.N))
			}
			for _, n := range c.N {
				if n < 0 || n > MaxCount {
					t.Errorf("count %d out of bounds", n)
				}
			}
		}
	})
}
