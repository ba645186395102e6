package envoylog

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// maxLine bounds what Parse reads: Envoy's lines are a few hundred bytes,
// and the kubelet splits log records above 16 KiB.
const maxLine = 16 << 10

// Parse reads one access-log line written in format back into an Entry.
// Fields written as "-" come back empty (durations as -1). It is what the
// lab's tests count sidecar lines with; mesh-verify itself reads logs with
// the scenario's regular expressions.
func Parse(format, line string) (Entry, error) {
	if len(line) > maxLine {
		return Entry{}, fmt.Errorf("access-log line of %d bytes: longer than %d", len(line), maxLine)
	}
	if format == IstioJSON || format == KumaJSON {
		return parseJSON(format, line)
	}
	toks, err := tokens(line)
	if err != nil {
		return Entry{}, err
	}
	want := map[string]int{Istio: 22, Kuma: 18}[format]
	if want == 0 {
		return Entry{}, fmt.Errorf("access-log format %q: want %s", format, strings.Join(Formats(), ", "))
	}
	if len(toks) != want {
		return Entry{}, fmt.Errorf("%s access-log line has %d fields, want %d: %q", format, len(toks), want, line)
	}
	p := &parser{toks: toks, format: format}
	var e Entry
	e.Start = p.time()
	if format == Kuma {
		e.Mesh = p.bare()
	}
	e.Method, e.Path, e.Protocol = p.request()
	e.Code = int(p.num("response code"))
	e.Flags = p.bare()
	if format == Istio {
		e.Details = p.bare()
		p.bare()   // %CONNECTION_TERMINATION_DETAILS%
		p.quoted() // %UPSTREAM_TRANSPORT_FAILURE_REASON%
	}
	e.BytesIn = p.num("bytes received")
	e.BytesOut = p.num("bytes sent")
	e.Duration = p.ms("duration")
	e.Upstream = p.ms("upstream service time")
	e.XFF, e.UserAgent = p.quoted(), p.quoted()
	if format == Kuma {
		e.TraceID = p.quoted()
	}
	e.RequestID, e.Authority = p.quoted(), p.quoted()
	if format == Kuma {
		e.SourceService, e.DestService, e.SourceAddress = p.quoted(), p.quoted(), p.quoted()
	}
	e.UpstreamHost = p.quoted()
	if format == Istio {
		e.UpstreamCluster, e.UpstreamLocal, e.DownstreamLocal = p.bare(), p.bare(), p.bare()
		e.DownstreamRemote, e.SNI, e.Route = p.bare(), p.bare(), p.bare()
	}
	if p.err != nil {
		return Entry{}, fmt.Errorf("%s access-log line %q: %w", format, line, p.err)
	}
	return e, nil
}

type token struct {
	s     string
	delim byte // '[', '"' or 0 for a bare word
}

// tokens splits a line into [bracketed], "quoted" and bare fields,
// separated by single spaces. Envoy does not escape quotes inside quoted
// values, so a value with a quote cannot be read back; such a line is an
// error rather than a silently shifted record.
func tokens(line string) ([]token, error) {
	var out []token
	for i := 0; i < len(line); {
		var t token
		switch line[i] {
		case '[', '"':
			end := byte(']')
			if line[i] == '"' {
				end = '"'
			}
			j := strings.IndexByte(line[i+1:], end)
			if j < 0 {
				return nil, fmt.Errorf("unterminated %c field at byte %d of %q", line[i], i, line)
			}
			t = token{s: line[i+1 : i+1+j], delim: line[i]}
			i += j + 2
		case ' ':
			return nil, fmt.Errorf("empty field at byte %d of %q", i, line)
		default:
			j := strings.IndexByte(line[i:], ' ')
			if j < 0 {
				j = len(line) - i
			}
			t = token{s: line[i : i+j]}
			i += j
		}
		out = append(out, t)
		if i < len(line) {
			if line[i] != ' ' {
				return nil, fmt.Errorf("want a space after the field ending at byte %d of %q", i, line)
			}
			i++
			if i == len(line) {
				return nil, fmt.Errorf("trailing space in %q", line)
			}
		}
	}
	return out, nil
}

type parser struct {
	toks   []token
	i      int
	format string
	err    error
}

func (p *parser) next() token {
	t := p.toks[p.i]
	p.i++
	return t
}

func (p *parser) fail(format string, a ...any) {
	if p.err == nil {
		p.err = fmt.Errorf("field %d: %s", p.i, fmt.Sprintf(format, a...))
	}
}

func undash(s string) string {
	if s == "-" {
		return ""
	}
	return s
}

// bare reads an unquoted field; quotes and brackets belong to other fields.
func (p *parser) bare() string {
	t := p.next()
	if t.delim != 0 || strings.ContainsAny(t.s, `"[]`) {
		p.fail("%q: want an unquoted value", t.s)
	}
	return undash(t.s)
}

// quoted reads a "quoted" field.
func (p *parser) quoted() string {
	t := p.next()
	if t.delim != '"' {
		p.fail("%q: want a quoted value", t.s)
	}
	return undash(t.s)
}

func (p *parser) time() time.Time {
	t := p.next()
	ts, err := time.Parse(TimeLayout, t.s)
	if t.delim != '[' || err != nil {
		p.fail("start time %q: want [%s]", t.s, TimeLayout)
	}
	return ts
}

func (p *parser) request() (method, path, proto string) {
	t := p.next()
	parts := strings.Split(t.s, " ")
	if t.delim != '"' || len(parts) != 3 {
		p.fail(`request %q: want "METHOD PATH PROTOCOL"`, t.s)
		return "", "", ""
	}
	return undash(parts[0]), undash(parts[1]), undash(parts[2])
}

func (p *parser) num(what string) int64 {
	t := p.next()
	n, err := strconv.ParseInt(t.s, 10, 64)
	if t.delim != 0 || err != nil || n < 0 {
		p.fail("%s %q: want a number", what, t.s)
	}
	return n
}

func (p *parser) ms(what string) time.Duration {
	t := p.next()
	if t.s == "-" && t.delim == 0 {
		return -1
	}
	n, err := strconv.ParseInt(t.s, 10, 64)
	if t.delim != 0 || err != nil || n < 0 || n > int64(time.Duration(1<<62)/time.Millisecond) {
		p.fail("%s %q: want milliseconds", what, t.s)
	}
	return time.Duration(n) * time.Millisecond
}
