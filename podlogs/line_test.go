package podlogs

import (
	"bufio"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func TestParseTimestampAgreesWithTimeParse(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 9))
	for range 20000 {
		ts := time.Unix(rng.Int64N(4e9), rng.Int64N(1e9)).UTC()
		for _, s := range []string{
			ts.Format("2006-01-02T15:04:05.000000000Z07:00"), // the kubelet's
			ts.Format(time.RFC3339Nano),                      // containerd's
			ts.In(time.FixedZone("x", 3600)).Format(time.RFC3339Nano),
		} {
			got, err := parseTimestamp([]byte(s))
			if err != nil || !got.Equal(ts) {
				t.Fatalf("parseTimestamp(%q) = %v, %v", s, got, err)
			}
		}
	}
	for _, bad := range []string{"", "x", "2026-02-30T03:04:05.000000000Z", "2026-13-02T03:04:05.000000000Z", "2026-01-02T03:04:05.00000000xZ", "2026-01-02 03:04:05.000000000Z"} {
		if _, err := parseTimestamp([]byte(bad)); err == nil {
			t.Errorf("parseTimestamp(%q) accepted", bad)
		}
	}
}

func TestDecoder(t *testing.T) {
	ts := "2026-01-02T03:04:05.123456789Z"
	want, _ := time.Parse(time.RFC3339Nano, ts)
	d := decoder{format: FormatTimestamps, max: 10}
	if at, text, cut, ok, err := d.decode([]byte(ts + " hello world, long")); err != nil || !ok || !at.Equal(want) || string(text) != "hello worl" || !cut {
		t.Errorf("%v %q %v %v %v", at, text, cut, ok, err)
	}
	if _, text, _, ok, err := d.decode([]byte(ts + " ")); err != nil || !ok || len(text) != 0 {
		t.Errorf("empty line: %q %v %v", text, ok, err)
	}
	for _, bad := range []string{"continuation of a line", "", "2026-01-02T03:04:05Z"} {
		if _, _, _, _, err := d.decode([]byte(bad)); err != errMalformed {
			t.Errorf("decode(%q): %v", bad, err)
		}
	}

	c := decoder{format: FormatCRI, max: 100}
	steps := []struct {
		in   string
		ok   bool
		text string
	}{
		{ts + " stdout P hel", false, ""},
		{"2026-01-02T03:04:05.2Z stderr F oops", true, "oops"},
		{"2026-01-02T03:04:06Z stdout P lo ", false, ""},
		{"2026-01-02T03:04:07Z stdout F:x world", true, "hello world"},
		{"2026-01-02T03:04:08Z stdout F", true, ""},
	}
	for _, s := range steps {
		at, text, _, ok, err := c.decode([]byte(s.in))
		if err != nil || ok != s.ok || (ok && string(text) != s.text) {
			t.Errorf("decode(%q) = %q %v %v", s.in, text, ok, err)
		}
		if s.text == "hello world" && !at.Equal(want) {
			t.Errorf("joined line at %v, want its first record's time", at)
		}
	}
	for _, bad := range []string{ts + " stdin F x", ts + " stdout X x", ts + " stdout", "garbage"} {
		if _, _, _, _, err := c.decode([]byte(bad)); err != errMalformed {
			t.Errorf("decode(%q): %v", bad, err)
		}
	}
}

func TestReadLineCutsAndDropsFragments(t *testing.T) {
	br := bufio.NewReaderSize(strings.NewReader(strings.Repeat("a", 100)+"\nshort\nunterminated"), 16)
	var buf []byte
	line, cut, err := readLine(br, buf, 40)
	if err != nil || !cut || string(line) != strings.Repeat("a", 40) {
		t.Fatalf("%q %v %v", line, cut, err)
	}
	line, cut, err = readLine(br, line, 40)
	if err != nil || cut || string(line) != "short" {
		t.Fatalf("%q %v %v", line, cut, err)
	}
	if _, _, err = readLine(br, line, 40); err == nil {
		t.Fatal("an unterminated fragment came back without its error")
	}
}

func BenchmarkIngest(b *testing.B) {
	var sb strings.Builder
	ts := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 1000 {
		sb.WriteString(ts.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000000000Z07:00"))
		sb.WriteString(` [2026-01-02T03:04:05.000Z] "GET /productpage HTTP/1.1" 200 - via_upstream - "-" 0 5293 30 29 "-" "vegeta" "run-1-12345" "productpage:9080" "10.0.0.1:9080"` + "\n")
	}
	data := sb.String()
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		br := bufio.NewReader(strings.NewReader(data))
		d := decoder{format: FormatTimestamps, max: 64 << 10}
		var buf []byte
		var p position
		for {
			raw, _, err := readLine(br, buf, 64<<10)
			if err != nil {
				break
			}
			buf = raw
			at, text, _, _, _ := d.decode(raw)
			p.replayed(at)
			_ = string(text)
			p.delivered(at)
		}
	}
}
