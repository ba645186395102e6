package runlog

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"unicode/utf8"

	"github.com/mesh-verify/mesh-verify/attribution"
)

// Attribution is one line of attribution.jsonl: who served one request,
// as the response said, joined to results.bin by its place in the file
// and by Seq.
type Attribution struct {
	// Seq is vegeta's sequence number of the request, the Seq of its
	// result in results.bin.
	Seq uint64 `json:"seq"`
	// RequestID is the id the request carried (X-Request-Id: run id and
	// mesh-verify's own request number); ConnID numbers the TCP connection
	// that carried it within the run (0: none, it failed before one).
	RequestID string `json:"requestId"`
	ConnID    uint64 `json:"connId"`
	attribution.Identity
	// Source is where the identity was read: SourceBody, or empty when
	// the response said nothing (or there was no response).
	Source string `json:"source"`
	// Code is the HTTP status, 0 without a response; OK says whether the
	// run counted the request as answered (a success code).
	Code uint16 `json:"code"`
	OK   bool   `json:"ok"`
	// Unread says the response's body was never read: the run's
	// attribution queue was full, or a second Ctrl-C cut attribution
	// short (README.md, Limits). Such a line names no one, and not
	// because no rule matched.
	Unread bool `json:"unread,omitempty"`
}

// SourceBody marks an identity read from the response (its body or
// headers, by the scenario's attribution rules).
const SourceBody = "body"

// appendAttribution appends a's line, every key always present, strings
// escaped as encoding/json escapes them (HTML-safe; invalid UTF-8 becomes
// U+FFFD), so the line is what json.Marshal would write for the same
// values, in a fixed key order.
func appendAttribution(b []byte, a *Attribution) []byte {
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, a.Seq, 10)
	b = append(b, `,"requestId":`...)
	b = appendJSONString(b, a.RequestID)
	b = append(b, `,"connId":`...)
	b = strconv.AppendUint(b, a.ConnID, 10)
	b = append(b, `,"cluster":`...)
	b = appendJSONString(b, a.Cluster)
	b = append(b, `,"pod":`...)
	b = appendJSONString(b, a.Pod)
	b = append(b, `,"version":`...)
	b = appendJSONString(b, a.Version)
	b = append(b, `,"service":`...)
	b = appendJSONString(b, a.Service)
	b = append(b, `,"source":`...)
	b = appendJSONString(b, a.Source)
	b = append(b, `,"code":`...)
	b = strconv.AppendUint(b, uint64(a.Code), 10)
	if a.OK {
		b = append(b, `,"ok":true`...)
	} else {
		b = append(b, `,"ok":false`...)
	}
	if a.Unread {
		b = append(b, `,"unread":true`...)
	}
	return append(b, '}', '\n')
}

// jsonSafe marks the ASCII bytes a JSON string carries as they are:
// printable, not a quote or backslash, and not < > & (HTML-safe, as
// encoding/json writes them).
var jsonSafe = func() (t [utf8.RuneSelf]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = true
	}
	for _, c := range `"\<>&` {
		t[c] = false
	}
	return t
}()

const hexDigits = "0123456789abcdef"

func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if jsonSafe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		// U+2028 and U+2029 end a line in JavaScript.
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// ParseAttribution reads one line of attribution.jsonl (without its
// newline). Keys it does not know are ignored, for files of later
// versions; the line must be one JSON object.
func ParseAttribution(line []byte) (Attribution, error) {
	var a Attribution
	line = bytes.TrimSpace(line)
	if len(line) == 0 || line[0] != '{' {
		return a, errors.New("not a JSON object")
	}
	if err := json.Unmarshal(line, &a); err != nil {
		return Attribution{}, err
	}
	return a, nil
}
