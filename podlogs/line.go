package podlogs

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"time"
)

// Target names one container's log: the unit that is followed and resumed.
type Target struct {
	Cluster   string
	Namespace string
	Pod       string
	// Container may be empty when the pod has a single container; the API
	// server refuses an empty container for pods with sidecars.
	Container string
}

func (t Target) String() string {
	s := t.Cluster + "/" + t.Namespace + "/" + t.Pod
	if t.Container != "" {
		s += "/" + t.Container
	}
	return s
}

// describe is the object part of an error message.
func (t Target) describe() string {
	s := fmt.Sprintf("pod %s/%s", t.Namespace, t.Pod)
	if t.Container != "" {
		s += fmt.Sprintf(" container %s", t.Container)
	}
	return s + " in cluster " + t.Cluster
}

// Line is one complete log line.
type Line struct {
	Target Target
	// Time is the runtime's timestamp of the line (when the container
	// runtime received it), not a time the app printed.
	Time time.Time
	// Text is the line without the timestamp prefix and without the newline,
	// cut to Options.MaxLineBytes.
	Text string
}

// Format is the framing of the stream an Opener returns.
type Format int

const (
	// FormatTimestamps is what the API server returns for
	// PodLogOptions{Timestamps: true}: "<RFC3339Nano> <text>" per line. The
	// kubelet writes the prefix only on the first chunk of a line that the
	// runtime split into partial records, so one output line is one app line.
	FormatTimestamps Format = iota
	// FormatCRI is a container runtime's log file as stored on the node:
	// "<RFC3339Nano> <stdout|stderr> <P|F>[:tags] <text>", where P records
	// are partial and are joined, per stream, until the F record.
	FormatCRI
)

// errMalformed marks a line that has no timestamp: a continuation of a line
// whose start fell before sinceTime (the kubelet filters records, not lines,
// and writes no prefix on a continuation), or garbage. Such a fragment was
// either delivered before as part of its whole line or lies before the
// window, so it is dropped, never counted.
var errMalformed = errors.New("malformed log line")

// decoder turns raw lines into complete lines. One decoder serves one open
// stream: partial records pending at a cut are dropped with it and read again
// after the resume (their timestamp is not older than the last delivered line).
type decoder struct {
	format  Format
	max     int
	pending [2]partial // stdout, stderr
}

type partial struct {
	active    bool
	ts        time.Time
	text      []byte
	truncated bool
}

// decode returns the line completed by raw, if any. ok is false when raw only
// started or continued a partial line; err is errMalformed for lines without
// a timestamp.
func (d *decoder) decode(raw []byte) (ts time.Time, text []byte, truncated, ok bool, err error) {
	sp := bytes.IndexByte(raw, ' ')
	if sp < 0 {
		return time.Time{}, nil, false, false, errMalformed
	}
	ts, err = parseTimestamp(raw[:sp])
	if err != nil {
		return time.Time{}, nil, false, false, errMalformed
	}
	rest := raw[sp+1:]
	if d.format == FormatTimestamps {
		text, truncated = cut(rest, d.max)
		return ts, text, truncated, true, nil
	}
	// CRI: stream, tags, message.
	sp = bytes.IndexByte(rest, ' ')
	if sp < 0 {
		return time.Time{}, nil, false, false, errMalformed
	}
	var p *partial
	switch string(rest[:sp]) {
	case "stdout":
		p = &d.pending[0]
	case "stderr":
		p = &d.pending[1]
	default:
		return time.Time{}, nil, false, false, errMalformed
	}
	rest = rest[sp+1:]
	tags, msg, found := bytes.Cut(rest, []byte{' '})
	if !found {
		// An empty F record is "tag" with nothing after it.
		tags, msg = rest, nil
	}
	if tag, _, _ := bytes.Cut(tags, []byte{':'}); len(tag) != 1 || (tag[0] != 'P' && tag[0] != 'F') {
		return time.Time{}, nil, false, false, errMalformed
	}
	isPartial := tags[0] == 'P'
	if !p.active {
		// The joined line carries the first record's timestamp, as the
		// kubelet's prefix does.
		*p = partial{active: true, ts: ts, text: p.text[:0]}
	}
	if room := d.max - len(p.text); room < len(msg) {
		msg = msg[:max(room, 0)]
		p.truncated = true
	}
	p.text = append(p.text, msg...)
	if isPartial {
		return time.Time{}, nil, false, false, nil
	}
	p.active = false
	return p.ts, p.text, p.truncated, true, nil
}

func cut(b []byte, n int) ([]byte, bool) {
	if len(b) > n {
		return b[:n], true
	}
	return b, false
}

// parseTimestamp reads the kubelet's fixed-width RFC3339Nano UTC timestamp
// ("2006-01-02T15:04:05.000000000Z", cri-client's RFC3339NanoFixed) without
// time.Parse, since every line has one; anything else (the runtime's
// variable-width form in CRI files, offsets) goes through time.Parse.
func parseTimestamp(b []byte) (time.Time, error) {
	if len(b) == 30 && b[4] == '-' && b[7] == '-' && b[10] == 'T' && b[13] == ':' && b[16] == ':' && b[19] == '.' && b[29] == 'Z' {
		num := func(lo, hi int) int {
			n := 0
			for _, c := range b[lo:hi] {
				if c < '0' || c > '9' {
					return -1
				}
				n = n*10 + int(c-'0')
			}
			return n
		}
		y, mo, d, h, mi, s, ns := num(0, 4), num(5, 7), num(8, 10), num(11, 13), num(14, 16), num(17, 19), num(20, 29)
		if y >= 0 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h >= 0 && h < 24 && mi >= 0 && mi < 60 && s >= 0 && s < 60 && ns >= 0 {
			t := time.Date(y, time.Month(mo), d, h, mi, s, ns, time.UTC)
			if t.Day() == d { // reject Feb 30 and the like, as time.Parse does
				return t, nil
			}
		}
	}
	return time.Parse(time.RFC3339Nano, string(b))
}

// readLine reads one '\n'-terminated line into buf, keeping at most limit
// bytes of it: an over-long line is cut, not fatal, and the rest of it is
// consumed. A final fragment without '\n' is returned with the reader's
// error and must not be used: the line is incomplete (a cut stream, or a
// line the app is still writing) and will be read whole after a resume.
func readLine(r *bufio.Reader, buf []byte, limit int) (line []byte, truncated bool, err error) {
	line = buf[:0]
	for {
		frag, err := r.ReadSlice('\n')
		keep := frag
		if err == nil {
			keep = frag[:len(frag)-1]
		}
		if room := limit - len(line); len(keep) > room {
			keep = keep[:max(room, 0)]
			truncated = true
		}
		line = append(line, keep...)
		if err == bufio.ErrBufferFull {
			continue
		}
		return line, truncated, err
	}
}
