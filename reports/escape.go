package reports

import (
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
