package podlogs

import (
	"regexp"
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// NewRule returns a Rule for re that is quicker on lines it cannot match
// and, for the istio-proxy presets, on lines it does, with exactly the
// regex's matches and captures: a follower reads every line of a sidecar's
// log, most of which the rule refuses (README.md, log ingestion).
// A Rule built as a literal (Rule{Regex: re}) stays correct, only slower.
func NewRule(re *regexp.Regexp) Rule {
	r := Rule{Regex: re}
	if re == nil {
		return r
	}
	r.fast = &fastPath{literal: requiredLiteral(re.String())}
	for _, kind := range []string{"inbound|", "outbound|"} {
		if re.String() == envoyHead+regexp.QuoteMeta(kind) {
			r.fast.envoy = kind
		}
	}
	// The Envoy JSON presets read their fields from the decoded object.
	r.json = re.String() == envoyJSONInbound || re.String() == envoyJSONOutbound
	return r
}

// fastPath is what NewRule derived from a Rule's regex.
type fastPath struct {
	// literal is a string every line the regex matches contains ("": none
	// known): a line without it is refused without running the regex.
	literal string
	// envoy is the upstream cluster kind ("inbound|", "outbound|") when the
	// regex is envoyHead followed by it: matched by envoyFind, not the regex.
	envoy string
}

// requiredLiteral returns the longest literal that every match of expr
// contains, or "" when none is known. It only looks where a literal is
// certain to be in the match: concatenations, captures and repeats of at
// least one; never in alternations, optional or case-folded parts.
func requiredLiteral(expr string) string {
	re, err := syntax.Parse(expr, syntax.Perl)
	if err != nil {
		return ""
	}
	best := ""
	for _, lit := range required(re) {
		if len(lit) > len(best) {
			best = lit
		}
	}
	return best
}

func required(re *syntax.Regexp) []string {
	switch re.Op {
	case syntax.OpLiteral:
		if s, ok := plainLiteral(re); ok {
			return []string{s}
		}
	case syntax.OpCapture, syntax.OpPlus:
		return required(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return required(re.Sub[0])
		}
	case syntax.OpConcat:
		var out []string
		var run strings.Builder
		flush := func() {
			if run.Len() > 0 {
				out = append(out, run.String())
				run.Reset()
			}
		}
		for _, sub := range re.Sub {
			if s, ok := plainLiteral(sub); ok {
				// Adjacent literals of a concatenation are adjacent in the
				// match.
				run.WriteString(s)
				continue
			}
			flush()
			out = append(out, required(sub)...)
		}
		flush()
		return out
	}
	return nil
}

// plainLiteral returns a literal node's text when a match of it is exactly
// its UTF-8 bytes: not case-folded, and without U+FFFD, which the regexp
// package also matches on invalid UTF-8 bytes.
func plainLiteral(re *syntax.Regexp) (string, bool) {
	if re.Op != syntax.OpLiteral || re.Flags&syntax.FoldCase != 0 {
		return "", false
	}
	for _, r := range re.Rune {
		if r == utf8.RuneError {
			return "", false
		}
	}
	return string(re.Rune), true
}

// envoyGroups is the number of submatch index pairs of envoyHead+kind: the
// whole match and method, path, status, request_id, authority, upstream.
const envoyGroups = 7

// envoyFind is regexp.FindStringSubmatchIndex of envoyHead+kind (kind
// quoted) on s, without the backtracker: every part of the pattern but
// the lazy `.*?` stops at the first byte that ends it, and the lazy part
// is tried at each '"' in turn, as the regex does. Byte scanning equals
// the regex's rune scanning because every byte it looks for is ASCII,
// which never occurs inside a multi-byte UTF-8 sequence.
func envoyFind(s, kind string, loc *[2 * envoyGroups]int) bool {
	// ^\[[^\]]+\] "
	if len(s) == 0 || s[0] != '[' {
		return false
	}
	i := strings.IndexByte(s[1:], ']') + 1
	if i < 2 || !strings.HasPrefix(s[i:], `] "`) {
		return false
	}
	i += 3
	// (?P<method>[A-Z]+) (?P<path>\S+) [^"]*"
	loc[2] = i
	for i < len(s) && 'A' <= s[i] && s[i] <= 'Z' {
		i++
	}
	if i == loc[2] || i >= len(s) || s[i] != ' ' {
		return false
	}
	loc[3] = i
	i++
	loc[4] = i
	for i < len(s) && !isPerlSpace(s[i]) {
		i++
	}
	if i == loc[4] || i >= len(s) || s[i] != ' ' {
		return false
	}
	loc[5] = i
	i++
	q := strings.IndexByte(s[i:], '"')
	if q < 0 {
		return false
	}
	i += q + 1
	// (?P<status>\d+)
	if i >= len(s) || s[i] != ' ' {
		return false
	}
	i++
	loc[6] = i
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i == loc[6] || i >= len(s) || s[i] != ' ' {
		return false
	}
	loc[7] = i
	i++
	// .*? then the five quoted fields: `.` stops at a newline.
	limit := len(s)
	if nl := strings.IndexByte(s[i:], '\n'); nl >= 0 {
		limit = i + nl
	}
	for q := i; q < limit; q++ {
		k := strings.IndexByte(s[q:limit], '"')
		if k < 0 {
			return false
		}
		q += k
		if end, ok := envoyTail(s, q, kind, loc); ok {
			loc[0], loc[1] = 0, end
			return true
		}
	}
	return false
}

// envoyTail matches `"[^"]*" "[^"]*" "(rid)" "(authority)" "(upstream)" kind`
// at s[q:], returning the end of the match.
func envoyTail(s string, q int, kind string, loc *[2 * envoyGroups]int) (int, bool) {
	i := q + 1 // s[q] is '"'
	for f := range 5 {
		k := strings.IndexByte(s[i:], '"')
		if k < 0 {
			return 0, false
		}
		if f >= 2 {
			loc[2*f+4], loc[2*f+5] = i, i+k
		}
		i += k + 1
		if f < 4 {
			if !strings.HasPrefix(s[i:], ` "`) {
				return 0, false
			}
			i += 2
			continue
		}
		if len(s)-i < 1+len(kind) || s[i] != ' ' || s[i+1:i+1+len(kind)] != kind {
			return 0, false
		}
		i += 1 + len(kind)
	}
	return i, true
}

// isPerlSpace is the regexp package's \s: [\t\n\f\r ].
func isPerlSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r'
}
