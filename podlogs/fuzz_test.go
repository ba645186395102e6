package podlogs

import (
	"bytes"
	"testing"
)

// FuzzDecode: the log framings never panic on any input, never return a
// line longer than the limit, and a line without a timestamp is refused.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"2026-01-02T03:04:05.123456789Z hello",
		"2026-01-02T03:04:05.2Z stdout P hel",
		"2026-01-02T03:04:07Z stdout F:x world",
		"2026-02-30T03:04:05.123456789Z x",
		"garbage",
	} {
		f.Add([]byte(s), true)
		f.Add([]byte(s), false)
	}
	f.Fuzz(func(t *testing.T, raw []byte, cri bool) {
		format := FormatTimestamps
		if cri {
			format = FormatCRI
		}
		d := decoder{format: format, max: 64}
		for _, line := range bytes.Split(raw, []byte{'\n'}) {
			_, text, _, ok, err := d.decode(line)
			if ok && len(text) > 64 {
				t.Fatalf("%d bytes past the limit of 64", len(text))
			}
			if err == nil && bytes.IndexByte(line, ' ') < 0 {
				t.Fatalf("decoded %q, which has no timestamp", line)
			}
		}
	})
}
