package reports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable is text from a response or a log made safe for a terminal
// (control characters and invalid UTF-8 shown escaped), for output the
// reports do not print themselves, like the live progress line.
func Printable(s string) string { return clean(s, false) }

// clean makes text taken from a response, a log line or a scenario's
// regex safe to print: control characters (terminal escape sequences among
// them) and invalid UTF-8 are shown escaped, like Go's %q without the
// quotes; in Markdown, characters that would format the text, open HTML or
// split a table cell are escaped too, and what GitHub would turn into a
// link (scheme://, www., an e-mail address) is broken by an entity or a
// backslash, so it shows as written.
func clean(s string, markdown bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\r':
			b.WriteString(`\r`)
		case !unicode.IsPrint(r) && r != ' ':
			if r < 0x10000 {
				fmt.Fprintf(&b, `\u%04x`, r)
			} else {
				fmt.Fprintf(&b, `\U%08x`, r)
			}
		case markdown && r == '<':
			b.WriteString("&lt;")
		case markdown && r == '>':
			b.WriteString("&gt;")
		case markdown && r == '&':
			b.WriteString("&amp;")
		case markdown && r == ':' && strings.HasPrefix(s[i+1:], "//"):
			// GitHub links a bare scheme://: a URL from a response stays text.
			b.WriteString("&#58;")
		case markdown && r == '.' && i >= 3 && strings.EqualFold(s[i-3:i], "www"):
			b.WriteString("&#46;") // and www.host
		case markdown && strings.ContainsRune("\\`*_[]|#~@", r):
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
		i += size
	}
	return b.String()
}

// MapStrings is a copy of r with every string in it (map keys too)
// replaced by f's result: one walk over the encoded report reaches every
// field, new ones too. The CLI redacts with it; the HTML report makes
// every string printable with it before the template escapes it for HTML.
func MapStrings(r *Report, f func(string) string) (*Report, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode the report: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("decode the report: %w", err)
	}
	if b, err = json.Marshal(mapJSON(doc, f)); err != nil {
		return nil, fmt.Errorf("encode the report: %w", err)
	}
	var out Report
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, fmt.Errorf("decode the report: %w", err)
	}
	return &out, nil
}

func mapJSON(v any, f func(string) string) any {
	switch v := v.(type) {
	case string:
		return f(v)
	case []any:
		for i := range v {
			v[i] = mapJSON(v[i], f)
		}
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[f(k)] = mapJSON(x, f)
		}
		return out
	}
	return v
}

// htmlText is text made printable for the HTML report, before
// html/template escapes it: control characters (ESC, BEL) and invalid
// UTF-8 are shown escaped as in the terminal; line breaks and tabs stay.
func htmlText(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\n' || r == '\t' || (r != utf8.RuneError || size > 1) && (unicode.IsPrint(r) || r == ' ') {
			b.WriteString(s[i : i+size])
		} else {
			b.WriteString(clean(s[i:i+size], false))
		}
		i += size
	}
	return b.String()
}
