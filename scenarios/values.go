package scenarios

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Rate is Freq requests every Per, written "200/s", "50/100ms", "1000/1m"
// or as a bare integer meaning per second. It keeps vegeta's Freq/Per
// shape so the attack can hand it to vegeta.ConstantPacer unchanged.
type Rate struct {
	Freq int
	Per  time.Duration
}

// ParseRate reads a rate as written in a scenario file.
func ParseRate(s string) (Rate, error) {
	s = strings.TrimSpace(s)
	const hint = `want a rate like "200/s", "50/100ms", "1000/1m" or a whole number per second`
	num, den, hasPer := strings.Cut(s, "/")
	freq, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil {
		if _, ferr := strconv.ParseFloat(strings.TrimSpace(num), 64); ferr == nil {
			return Rate{}, fmt.Errorf("rate %q: the count must be a whole number (write 1/2s rather than 0.5/s)", s)
		}
		return Rate{}, fmt.Errorf("rate %q: %s", s, hint)
	}
	if freq <= 0 {
		return Rate{}, fmt.Errorf("rate %q: the count must be positive", s)
	}
	per := time.Second
	if hasPer {
		den = strings.TrimSpace(den)
		// "1/s" and "1/m" read naturally; time.ParseDuration needs a number.
		if den != "" && strings.IndexByte("0123456789.+-", den[0]) < 0 {
			den = "1" + den
		}
		per, err = time.ParseDuration(den)
		if err != nil {
			return Rate{}, fmt.Errorf("rate %q: %s", s, hint)
		}
		if per <= 0 {
			return Rate{}, fmt.Errorf("rate %q: the period must be positive", s)
		}
	}
	return Rate{Freq: freq, Per: per}, nil
}

// PerSecond is the rate in requests per second (0 for the zero Rate).
func (r Rate) PerSecond() float64 {
	if r.Per <= 0 {
		return 0
	}
	return float64(r.Freq) / r.Per.Seconds()
}

// IsZero reports an unset rate.
func (r Rate) IsZero() bool { return r.Freq == 0 && r.Per == 0 }

// String writes the rate back in the form ParseRate reads.
func (r Rate) String() string {
	switch r.Per {
	case time.Second:
		return fmt.Sprintf("%d/s", r.Freq)
	case time.Minute:
		return fmt.Sprintf("%d/m", r.Freq)
	case time.Hour:
		return fmt.Sprintf("%d/h", r.Freq)
	case time.Millisecond:
		return fmt.Sprintf("%d/ms", r.Freq)
	}
	return fmt.Sprintf("%d/%s", r.Freq, r.Per)
}

// UnmarshalYAML reads a rate; its errors carry the node's position.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalarText(n, "a rate like 200/s")
	if err != nil {
		return err
	}
	v, err := ParseRate(s)
	if err != nil {
		return nodeError(n, err.Error())
	}
	*r = v
	return nil
}

// MarshalYAML writes the rate as a string.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// Duration is a non-negative Go duration written "10s", "1m30s", "250ms".
// A bare number is refused: "10" could mean seconds or milliseconds.
type Duration struct{ time.Duration }

// UnmarshalYAML reads a duration; its errors carry the node's position.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalarText(n, "a duration like 10s")
	if err != nil {
		return err
	}
	s = strings.TrimSpace(s)
	v, err := time.ParseDuration(s)
	if err != nil {
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil && s != "0" {
			return nodeError(n, fmt.Sprintf("duration %q has no unit: write %ss or %sms (units: ns, us, ms, s, m, h)", s, s, s))
		}
		return nodeError(n, fmt.Sprintf("invalid duration %q: want a Go duration like 10s, 1m30s or 250ms", s))
	}
	if v < 0 {
		return nodeError(n, fmt.Sprintf("duration %q is negative", s))
	}
	d.Duration = v
	return nil
}

// MarshalYAML writes the duration as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// Size is a byte count written "512", "64KiB", "1MiB" or "10kB".
// IEC units (KiB, MiB, GiB, TiB) are powers of 1024; SI units (kB, MB, GB,
// TB) are powers of 1000, as in the units' definitions. "K", "KB" and "M"
// are refused because people use them for both.
type Size int64

// sizeUnit is a switch rather than a table variable so there is no
// package-level mutable state.
func sizeUnit(u string) (int64, bool) {
	switch u {
	case "", "B":
		return 1, true
	case "kB":
		return 1000, true
	case "MB":
		return 1000 * 1000, true
	case "GB":
		return 1000 * 1000 * 1000, true
	case "TB":
		return 1000 * 1000 * 1000 * 1000, true
	case "KiB":
		return 1 << 10, true
	case "MiB":
		return 1 << 20, true
	case "GiB":
		return 1 << 30, true
	case "TiB":
		return 1 << 40, true
	}
	return 0, false
}

// ParseSize reads a size as written in a scenario file.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.' || t[i] == '-' || t[i] == '+') {
		i++
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult, ok := sizeUnit(unit)
	if !ok {
		return 0, fmt.Errorf("size %q: unknown unit %q (use B, KiB, MiB, GiB, TiB for powers of 1024 or kB, MB, GB, TB for powers of 1000)", s, unit)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || num == "" {
		return 0, fmt.Errorf("size %q: want a number of bytes like 512, 64KiB or 10kB", s)
	}
	if v < 0 {
		return 0, fmt.Errorf("size %q is negative", s)
	}
	b := v * float64(mult)
	if b >= math.MaxInt64 {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	if b != math.Trunc(b) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return Size(b), nil
}

// Bytes is the size as an int64 (what vegeta.MaxBody takes).
func (z Size) Bytes() int64 { return int64(z) }

// String writes the size in the largest IEC unit that divides it exactly.
func (z Size) String() string {
	for _, u := range []string{"TiB", "GiB", "MiB", "KiB"} {
		m, _ := sizeUnit(u)
		if z != 0 && int64(z)%m == 0 {
			return fmt.Sprintf("%d%s", int64(z)/m, u)
		}
	}
	return strconv.FormatInt(int64(z), 10)
}

// UnmarshalYAML reads a size; its errors carry the node's position.
func (z *Size) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalarText(n, "a size like 64KiB")
	if err != nil {
		return err
	}
	v, err := ParseSize(s)
	if err != nil {
		return nodeError(n, err.Error())
	}
	*z = v
	return nil
}

// MarshalYAML writes the size as a string.
func (z Size) MarshalYAML() (any, error) { return z.String(), nil }

// Percent is a share stored as a fraction in [0,1]: "5%" and 0.05 both
// read as 0.05. A bare number above 1 is refused rather than guessed:
// "margin: 5" could mean 5% or 500%.
type Percent float64

// ParsePercent reads a percentage as written in a scenario file.
func ParsePercent(s string) (Percent, error) {
	t := strings.TrimSpace(s)
	if num, ok := strings.CutSuffix(t, "%"); ok {
		v, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || math.IsNaN(v) {
			return 0, fmt.Errorf("percentage %q: want a share like 5%% or 0.05", s)
		}
		if v < 0 || v > 100 {
			return 0, fmt.Errorf("percentage %q is outside 0%%..100%%", s)
		}
		return Percent(v / 100), nil
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || math.IsNaN(v) {
		return 0, fmt.Errorf("percentage %q: want a share like 5%% or 0.05", s)
	}
	if v > 1 && v <= 100 {
		return 0, fmt.Errorf("ambiguous share %s: write \"%s%%\" for a percentage or a fraction in [0, 1] like %g", t, t, v/100)
	}
	if v < 0 || v > 1 {
		return 0, fmt.Errorf("share %s is outside [0, 1] (or 0%%..100%%)", t)
	}
	return Percent(v), nil
}

// Fraction is the share as a float64 in [0,1].
func (p Percent) Fraction() float64 { return float64(p) }

// String writes the share as a percentage, e.g. "5%".
func (p Percent) String() string {
	return strconv.FormatFloat(float64(p)*100, 'g', -1, 64) + "%"
}

// UnmarshalYAML reads a share; its errors carry the node's position.
func (p *Percent) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalarText(n, `a share like "5%" or 0.05`)
	if err != nil {
		return err
	}
	v, err := ParsePercent(s)
	if err != nil {
		return nodeError(n, err.Error())
	}
	*p = v
	return nil
}

// MarshalYAML writes the share as a percentage string.
func (p Percent) MarshalYAML() (any, error) { return p.String(), nil }

// scalarText returns a scalar's text or an error naming what was wanted.
func scalarText(n *yaml.Node, want string) (string, error) {
	if n.Kind != yaml.ScalarNode {
		return "", nodeError(n, fmt.Sprintf("want %s, got %s", want, describe(n)))
	}
	return n.Value, nil
}

// nodeError positions msg at n. The decoder fills in file and field; when
// a value type is decoded by plain yaml.Unmarshal the position still shows.
func nodeError(n *yaml.Node, msg string) *FieldError {
	return &FieldError{Line: n.Line, Column: n.Column, Msg: msg}
}

// describe names a node's kind and value for "want X, got Y" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.DocumentNode:
		return "a document"
	}
	v := n.Value
	if len(v) > 40 {
		v = v[:37] + "..."
	}
	switch n.ShortTag() {
	case "!!null":
		return "nothing (null)"
	case "!!bool":
		return "boolean " + v
	case "!!int", "!!float":
		return "number " + v
	}
	return "string " + strconv.Quote(v)
}

// StatusRange is one entry of attack.successCodes: a code ("200" or 200),
// a class ("2xx") or a range ("200-299"), kept as the inclusive range
// [Lo, Hi] of codes in 100..599.
type StatusRange struct{ Lo, Hi int }

// StatusCodes is a list of status ranges; a code is in it when it is in
// one of them.
type StatusCodes []StatusRange

// ParseStatusRange reads one entry as written in a scenario file.
func ParseStatusRange(s string) (StatusRange, error) {
	t := strings.TrimSpace(s)
	const hint = `want an HTTP status like 200, a class like 2xx or a range like 200-299, within 100..599`
	code := func(x string) (int, error) {
		x = strings.TrimSpace(x)
		n, err := strconv.Atoi(x)
		if err != nil || len(x) != 3 || x[0] == '+' || x[0] == '-' {
			return 0, fmt.Errorf("status %q: %s", s, hint)
		}
		if n < 100 || n > 599 {
			return 0, fmt.Errorf("status %q is outside 100..599", s)
		}
		return n, nil
	}
	if len(t) == 3 && (t[1:] == "xx" || t[1:] == "XX") {
		if t[0] < '1' || t[0] > '5' {
			return StatusRange{}, fmt.Errorf("status class %q: want 1xx, 2xx, 3xx, 4xx or 5xx", s)
		}
		lo := int(t[0]-'0') * 100
		return StatusRange{lo, lo + 99}, nil
	}
	if lo, hi, ok := strings.Cut(t, "-"); ok && lo != "" {
		l, err := code(lo)
		if err != nil {
			return StatusRange{}, err
		}
		h, err := code(hi)
		if err != nil {
			return StatusRange{}, err
		}
		if l > h {
			return StatusRange{}, fmt.Errorf("status range %q runs backwards: write %d-%d", s, h, l)
		}
		return StatusRange{l, h}, nil
	}
	n, err := code(t)
	if err != nil {
		return StatusRange{}, err
	}
	return StatusRange{n, n}, nil
}

// String writes the range back in the form ParseStatusRange reads.
func (r StatusRange) String() string {
	switch {
	case r.Lo == r.Hi:
		return strconv.Itoa(r.Lo)
	case r.Lo%100 == 0 && r.Hi == r.Lo+99:
		return strconv.Itoa(r.Lo/100) + "xx"
	}
	return fmt.Sprintf("%d-%d", r.Lo, r.Hi)
}

// UnmarshalYAML reads one entry; a bare number and a string both work.
func (r *StatusRange) UnmarshalYAML(n *yaml.Node) error {
	s, err := scalarText(n, "an HTTP status like 200, 2xx or 200-299")
	if err != nil {
		return err
	}
	v, err := ParseStatusRange(s)
	if err != nil {
		return nodeError(n, err.Error())
	}
	*r = v
	return nil
}

// MarshalYAML writes the entry as a string.
func (r StatusRange) MarshalYAML() (any, error) { return r.String(), nil }

// Contains reports whether code is one of the statuses.
func (c StatusCodes) Contains(code int) bool {
	for _, r := range c {
		if code >= r.Lo && code <= r.Hi {
			return true
		}
	}
	return false
}

// String lists the entries, comma-separated.
func (c StatusCodes) String() string {
	parts := make([]string, len(c))
	for i, r := range c {
		parts[i] = r.String()
	}
	return strings.Join(parts, ", ")
}
