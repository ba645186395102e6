package scenarios

import (
	"errors"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    Rate
		perSec  float64
		wantErr string
	}{
		{"200/s", Rate{200, time.Second}, 200, ""},
		{"50/100ms", Rate{50, 100 * time.Millisecond}, 500, ""},
		{"1000/1m", Rate{1000, time.Minute}, 1000.0 / 60, ""},
		{"60/m", Rate{60, time.Minute}, 1, ""},
		{"1/2s", Rate{1, 2 * time.Second}, 0.5, ""},
		{"300", Rate{300, time.Second}, 300, ""},
		{" 7 / s ", Rate{7, time.Second}, 7, ""},
		{"0/s", Rate{}, 0, "must be positive"},
		{"-5/s", Rate{}, 0, "must be positive"},
		{"0.5/s", Rate{}, 0, "whole number (write 1/2s"},
		{"10/0s", Rate{}, 0, "period must be positive"},
		{"10/-1s", Rate{}, 0, "period must be positive"},
		{"fast", Rate{}, 0, "want a rate like"},
		{"10/fortnight", Rate{}, 0, "want a rate like"},
		{"", Rate{}, 0, "want a rate like"},
	}
	for _, c := range cases {
		got, err := ParseRate(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseRate(%q) error = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want || got.PerSecond() != c.perSec {
			t.Errorf("ParseRate(%q) = %v (%v/s), %v; want %v (%v/s)", c.in, got, got.PerSecond(), err, c.want, c.perSec)
		}
		back, err := ParseRate(got.String())
		if err != nil || back != got {
			t.Errorf("round trip of %q through %q = %v, %v", c.in, got.String(), back, err)
		}
	}
}

func TestParseSize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    Size
		wantErr string
	}{
		{"512", 512, ""},
		{"512B", 512, ""},
		{"64KiB", 64 << 10, ""},
		{"1MiB", 1 << 20, ""},
		{"1.5MiB", 3 << 19, ""},
		{"2GiB", 2 << 30, ""},
		{"10kB", 10000, ""},
		{"3MB", 3000000, ""},
		{"1 KiB", 1024, ""},
		{"0", 0, ""},
		{"64KB", 0, `unknown unit "KB"`},
		{"64k", 0, `unknown unit "k"`},
		{"-1KiB", 0, "negative"},
		{"0.5B", 0, "whole number of bytes"},
		{"lots", 0, "unknown unit"},
		{"KiB", 0, "want a number of bytes"},
		{"99999999TiB", 0, "too large"},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseSize(%q) error = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
		if back, err := ParseSize(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q through %q = %d, %v", c.in, got.String(), back, err)
		}
	}
}

func TestParsePercent(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    Percent
		wantErr string
	}{
		{"5%", 0.05, ""},
		{"0.05", 0.05, ""},
		{"99.5%", 0.995, ""},
		{"100%", 1, ""},
		{"1", 1, ""},
		{"0", 0, ""},
		{"0%", 0, ""},
		{"5", 0, `ambiguous share 5: write "5%"`},
		{"50", 0, `write "50%"`},
		{"150", 0, "outside [0, 1]"},
		{"-0.1", 0, "outside [0, 1]"},
		{"101%", 0, "outside 0%..100%"},
		{"-1%", 0, "outside 0%..100%"},
		{"five%", 0, "want a share like 5% or 0.05"},
		{"half", 0, "want a share like 5% or 0.05"},
		{"nan", 0, "want a share"},
	}
	for _, c := range cases {
		got, err := ParsePercent(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParsePercent(%q) error = %v, want %q", c.in, err, c.wantErr)
			}
			continue
		}
		if err != nil || abs(float64(got-c.want)) > 1e-12 {
			t.Errorf("ParsePercent(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
	if s := Percent(0.05).String(); s != "5%" {
		t.Errorf("String() = %q, want 5%%", s)
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// TestValuesWithPlainYAML checks the value types also work, with
// positioned errors, when decoded by yaml.Unmarshal directly.
func TestValuesWithPlainYAML(t *testing.T) {
	t.Parallel()
	var v struct {
		R Rate     `yaml:"r"`
		D Duration `yaml:"d"`
		S Size     `yaml:"s"`
		P Percent  `yaml:"p"`
	}
	if err := yaml.Unmarshal([]byte("r: 5/s\nd: 1m30s\ns: 2KiB\np: 5%\n"), &v); err != nil {
		t.Fatal(err)
	}
	if v.R != (Rate{5, time.Second}) || v.D.Duration != 90*time.Second || v.S != 2048 || v.P != 0.05 {
		t.Errorf("decoded %+v", v)
	}
	out, err := yaml.Marshal(v)
	if err != nil || string(out) != "r: 5/s\nd: 1m30s\ns: 2KiB\np: 5%\n" {
		t.Errorf("marshal = %q, %v", out, err)
	}

	bad := []struct{ src, want string }{
		{"r: 5/x", "1:4: rate \"5/x\""},
		{"\nd: 10", "2:4: duration \"10\" has no unit"},
		{"d: -1s", "1:4: duration \"-1s\" is negative"},
		{"s: [1]", "1:4: want a size like 64KiB, got a list"},
		{"\n\np: 7", "3:4: ambiguous share 7"},
	}
	for _, c := range bad {
		err := yaml.Unmarshal([]byte(c.src), &v)
		var fe *FieldError
		if !errors.As(err, &fe) || !strings.HasPrefix(fe.Error(), c.want) {
			t.Errorf("yaml.Unmarshal(%q) = %v, want %q", c.src, err, c.want)
		}
	}
}

func TestFieldErrorFormat(t *testing.T) {
	t.Parallel()
	cases := []struct {
		e    FieldError
		want string
	}{
		{FieldError{File: "s.yaml", Line: 3, Column: 9, Field: "attack.rate", Msg: "bad"}, "s.yaml:3:9: attack.rate: bad"},
		{FieldError{File: "s.yaml", Line: 3, Field: "attack.rate", Msg: "bad"}, "s.yaml:3: attack.rate: bad"},
		{FieldError{File: "s.yaml", Field: "attack.rate", Msg: "bad"}, "s.yaml: attack.rate: bad"},
		{FieldError{Field: "attack.rate", Msg: "bad"}, "attack.rate: bad"},
		{FieldError{File: "s.yaml", Line: 1, Column: 1, Msg: "empty"}, "s.yaml:1:1: empty"},
	}
	for _, c := range cases {
		if got := c.e.Error(); got != c.want {
			t.Errorf("Error() = %q, want %q", got, c.want)
		}
	}
}

func TestParseStatusRange(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in      string
		want    StatusRange
		wantErr string
	}{
		{"200", StatusRange{200, 200}, ""},
		{" 301 ", StatusRange{301, 301}, ""},
		{"2xx", StatusRange{200, 299}, ""},
		{"5XX", StatusRange{500, 599}, ""},
		{"200-299", StatusRange{200, 299}, ""},
		{"200-204", StatusRange{200, 204}, ""},
		{"404-404", StatusRange{404, 404}, ""},
		{"99", StatusRange{}, "want an HTTP status"},
		{"600", StatusRange{}, "outside 100..599"},
		{"0xx", StatusRange{}, "want 1xx, 2xx, 3xx, 4xx or 5xx"},
		{"2x", StatusRange{}, "want an HTTP status"},
		{"-200", StatusRange{}, "want an HTTP status"},
		{"+200", StatusRange{}, "want an HTTP status"},
		{"300-200", StatusRange{}, "runs backwards: write 200-300"},
		{"200-", StatusRange{}, "want an HTTP status"},
		{"200-2000", StatusRange{}, "want an HTTP status"},
		{"", StatusRange{}, "want an HTTP status"},
	}
	for _, c := range cases {
		got, err := ParseStatusRange(c.in)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("ParseStatusRange(%q) = %v, %v; want error %q", c.in, got, err, c.wantErr)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseStatusRange(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
		if back, err := ParseStatusRange(got.String()); err != nil || back != got {
			t.Errorf("round trip of %q through %q = %v, %v", c.in, got.String(), back, err)
		}
	}
	codes := StatusCodes{{200, 299}, {304, 304}}
	for code, want := range map[int]bool{200: true, 299: true, 304: true, 301: false, 199: false, 503: false} {
		if codes.Contains(code) != want {
			t.Errorf("%v contains %d: %v", codes, code, !want)
		}
	}
	if codes.String() != "2xx, 304" {
		t.Errorf("String() = %q", codes.String())
	}
}

// FuzzParseStatusRange: any text either parses into a range within
// 100..599 that prints back to itself, or is refused with an error.
func FuzzParseStatusRange(f *testing.F) {
	for _, s := range []string{"200", "2xx", "200-299", "600", "x", "1-2", "599-100"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseStatusRange(s)
		if err != nil {
			return
		}
		if r.Lo < 100 || r.Hi > 599 || r.Lo > r.Hi {
			t.Fatalf("%q parsed to %v", s, r)
		}
		if back, err := ParseStatusRange(r.String()); err != nil || back != r {
			t.Fatalf("%q: %v prints as %q, which reads %v, %v", s, r, r.String(), back, err)
		}
	})
}
