package scenarios

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// FuzzParse: a scenario file is user input. Whatever it holds, Parse ends
// quickly (aliases and merges are bounded) and either accepts it or names
// the file in every error. Seeded with the catalog and testdata.
func FuzzParse(f *testing.F) {
	for _, name := range BuiltinNames() {
		src, err := BuiltinSource(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(src)
	}
	_ = filepath.WalkDir("testdata", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".yaml") {
			if b, err := os.ReadFile(p); err == nil {
				f.Add(b)
			}
		}
		return nil
	})
	f.Add([]byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: w}
clusters: [{name: c1, context: k}]
target: {portForward: {cluster: c1, resource: svc/web, port: "80"}}
attack: {rate: 7/s, requests: 23, workers: 3}
attribution: {preset: tutorial}
expect: [{successRate: {atLeast: 99%}}]
`))
	f.Add([]byte("a: &a [*a]\n"))
	f.Add([]byte("<<: {<<: {<<: {}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		start := time.Now()
		s, err := Parse("fuzz.yaml", data)
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("Parse took %s on %d bytes", el, len(data))
		}
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if line != "" && !strings.HasPrefix(line, "fuzz.yaml") {
					t.Fatalf("an error line that names no file: %q", line)
				}
			}
			return
		}
		if s == nil || s.File != "fuzz.yaml" {
			t.Fatalf("accepted without a scenario: %+v", s)
		}
		// A distributed scenario that loads can be shared out: every
		// worker gets a non-zero share and the shares add up.
		if n := s.Attack.Workers; n > 0 {
			var rate, reqs int64
			for i := range n {
				a, err := s.Attack.WorkerShare(i, n)
				if err != nil {
					t.Fatalf("loaded with workers %d, but worker %d: %v", n, i, err)
				}
				rate += rateFreq(a.Rate)
				reqs += int64(a.Requests)
			}
			if rate != rateFreq(s.Attack.Rate) || reqs != int64(s.Attack.Requests) {
				t.Fatalf("shares of %d workers add up to rate %d, requests %d; the scenario says %d, %d", n, rate, reqs, rateFreq(s.Attack.Rate), s.Attack.Requests)
			}
		}
	})
}

// FuzzValues: the scalar parsers of rates, sizes and percentages never
// panic, and what they accept prints back to a value they accept.
func FuzzValues(f *testing.F) {
	for _, s := range []string{"200/s", "50/100ms", "1000/1m", "7", "64KiB", "1.5MiB", "5%", "0.05", "120%", "-1/s", "1e308", "9223372036854775807/ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if r, err := ParseRate(s); err == nil {
			if _, err := ParseRate(r.String()); err != nil {
				t.Errorf("rate %q prints as %q, which does not parse: %v", s, r.String(), err)
			}
		}
		if z, err := ParseSize(s); err == nil {
			if back, err := ParseSize(z.String()); err != nil || back != z {
				t.Errorf("size %q prints as %q, which reads %v, %v", s, z.String(), back, err)
			}
		}
		_, _ = ParsePercent(s)
	})
}
