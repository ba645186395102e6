// Package redact is the one place that hides credentials in what
// mesh-verify shows or stores: URLs (user-info passwords, credential-like
// query parameters), error messages that quote them, command lines and
// scenario files. Every report, error and run-directory file passes
// through it.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// credentialWords are query parameter names, or words of them (split at
// - _ . and the like), that carry credentials.
var credentialWords = map[string]bool{
	"token": true, "access_token": true, "key": true, "apikey": true, "api_key": true,
	"password": true, "passwd": true, "secret": true, "sig": true, "signature": true,
}

// credentialSuffixes catch run-together names like sessiontoken or
// clientsecret.
var credentialSuffixes = []string{"token", "apikey", "password", "secret", "signature"}

func isCredentialParam(name string) bool {
	n := strings.ToLower(name)
	if credentialWords[n] {
		return true
	}
	for _, w := range strings.FieldsFunc(n, func(r rune) bool { return !('a' <= r && r <= 'z' || '0' <= r && r <= '9') }) {
		if credentialWords[w] {
			return true
		}
	}
	for _, s := range credentialSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// URL is raw as it may be shown (report, JUnit, messages): the
// password of the user info as url.URL.Redacted hides it, and the values
// of credential-like query parameters (token, key, password, sig, …)
// replaced by REDACTED. A URL without either is returned unchanged.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		// Go's parse errors quote the URL whole: the malformed one is
		// redacted by its text.
		return textURL(raw)
	}
	changed := false
	if _, ok := u.User.Password(); ok {
		changed = true
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, p := range parts {
			k, _, _ := strings.Cut(p, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if isCredentialParam(name) {
				parts[i] = k + "=REDACTED"
				changed = true
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	if !changed {
		return raw
	}
	s := u.Redacted()
	if !strings.Contains(strings.ToUpper(raw), "%7B") && !strings.Contains(strings.ToUpper(raw), "%7D") {
		// Keep placeholders like {seq} as written.
		s = strings.NewReplacer("%7B", "{", "%7D", "}").Replace(s)
	}
	return s
}

// urlInText finds a URL in free text: one quoted whole ("…" with Go's
// backslash escapes, '…' or `…`, as parse errors, YAML and YAML errors
// quote them, spaces included), else scheme:// up to a space or a quote.
var urlInText = regexp.MustCompile(`"` + scheme + `(?:\\.|[^"\\])*"|'` + scheme + `[^']*'|` + "`" + scheme + "[^`]*`|" + scheme + `(?:\\.|[^\s"'\\])+`)

const scheme = `[a-zA-Z][a-zA-Z0-9+.-]*://`

// Message redacts every URL an error message or any free text quotes,
// quoted or not, parsable or not (a URL parse error echoes its input
// whole): user-info passwords and credential-like query values.
func Message(msg string) string {
	if !strings.Contains(msg, "://") {
		return msg
	}
	return urlInText.ReplaceAllStringFunc(msg, quotedURL)
}

// quotedURL redacts a URL urlInText found, keeping its quotes.
func quotedURL(m string) string {
	if q := m[0]; q == '"' || q == '\'' || q == '`' {
		return m[:1] + URL(m[1:len(m)-1]) + m[len(m)-1:]
	}
	// Punctuation that ends a sentence or a field ("--set URL: …") is
	// not the URL's.
	u := strings.TrimRight(m, ".,:;)]}")
	return URL(u) + m[len(u):]
}

// textURL redacts a URL that does not parse, by its text: the user info
// is everything between :// and the last @ before the query (a malformed
// user info may hold a / or a second @), its password is hidden, and the
// query's credential-like values are.
func textURL(raw string) string {
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	head, rest := raw[:i+3], raw[i+3:]
	query, frag := "", ""
	if j := strings.IndexByte(rest, '#'); j >= 0 {
		rest, frag = rest[:j], rest[j:]
	}
	if j := strings.IndexByte(rest, '?'); j >= 0 {
		rest, query = rest[:j], rest[j+1:]
	}
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		if c := strings.IndexByte(rest[:at], ':'); c >= 0 {
			rest = rest[:c] + ":xxxxx" + rest[at:]
		}
	}
	out := head + rest
	if strings.Contains(raw[i:len(raw)-len(frag)], "?") {
		out += "?" + redactQuery(query)
	}
	return out + frag
}

// redactQuery replaces the values of credential-like parameters of a raw
// query (& or ; separated), keeping the rest byte for byte.
func redactQuery(q string) string {
	var b strings.Builder
	for q != "" {
		p, sep := q, ""
		if j := strings.IndexAny(q, "&;"); j >= 0 {
			p, sep, q = q[:j], q[j:j+1], q[j+1:]
		} else {
			q = ""
		}
		if k, _, ok := strings.Cut(p, "="); ok {
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if isCredentialParam(name) {
				p = k + "=REDACTED"
			}
		}
		b.WriteString(p + sep)
	}
	return b.String()
}

// Args is a command line as it may be stored in a report: the
// value of a credential flag (--token, --password, …, as "--token X" or
// "--token=X") replaced by REDACTED, and URLs redacted like the target's.
func Args(args []string) []string {
	out := make([]string, len(args))
	hideNext, setNext := false, false
	for i, a := range args {
		switch {
		case hideNext:
			out[i], hideNext = "REDACTED", false
			continue
		case setNext:
			out[i], setNext = Set(a), false
			continue
		case a == "--set":
			out[i], setNext = a, true
			continue
		case strings.HasPrefix(a, "--set="):
			out[i] = "--set=" + Set(strings.TrimPrefix(a, "--set="))
			continue
		case strings.HasPrefix(a, "-"):
			name, _, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
			if isCredentialParam(name) {
				if hasValue {
					out[i] = a[:strings.Index(a, "=")+1] + "REDACTED"
				} else {
					out[i], hideNext = a, true
				}
				continue
			}
		}
		out[i] = a
		if strings.Contains(a, "://") {
			if k, v, ok := strings.Cut(a, "="); ok && !strings.Contains(k, "://") {
				out[i] = k + "=" + URL(v)
			} else {
				out[i] = URL(a)
			}
		}
	}
	return out
}

// Set is a --set PATH=VALUE override as it may be shown: the value of a
// credential-like field (attack.headers.Authorization, a token, a
// password) replaced by REDACTED, and a URL value redacted like the
// target's (README.md "CI gate").
func Set(arg string) string {
	path, value, ok := strings.Cut(arg, "=")
	if !ok {
		return arg
	}
	last := path
	if i := strings.LastIndexAny(path, ".["); i >= 0 {
		last = strings.Trim(path[i+1:], `"]`)
	}
	if isCredentialParam(last) || headerWords[strings.ToLower(last)] {
		return path + "=REDACTED"
	}
	if v := strings.TrimSpace(value); strings.HasPrefix(v, "{") || strings.HasPrefix(v, "[") {
		// A flow value (attack.headers={Authorization: Bearer x}) holds
		// keys of its own: redacted as a scenario's line is.
		return path + "=" + strings.TrimPrefix(Scenario("x: "+value), "x: ")
	}
	if strings.Contains(value, "://") {
		return path + "=" + URL(value)
	}
	return arg
}

// headerWords are header names whose value is a credential though no word
// of theirs says so.
var headerWords = map[string]bool{"authorization": true, "proxy-authorization": true, "cookie": true, "set-cookie": true}

// yamlKey finds a YAML mapping key with an inline value: "  Key: value",
// "- key: value", quoted keys too.
var yamlKey = regexp.MustCompile(`^(\s*(?:-\s+)?["']?)([^"':#\s][^"':#]*?)(["']?\s*:\s+)(\S.*)$`)

// keyOnly finds a YAML mapping key whose value starts on the next line.
var keyOnly = regexp.MustCompile(`^(\s*(?:-\s+)?["']?)([^"':#\s][^"':#]*?)(["']?\s*:)\s*(?:#.*)?$`)

// Scenario is a scenario file as it may be shown in a report: the value
// of every key that names a credential (a header like Authorization or
// X-Api-Key, a token, a password) replaced by REDACTED, and every URL
// redacted like the target's.
func Scenario(text string) string {
	lines := strings.Split(text, "\n")
	hideBelow := -1 // the indent of a credential key whose value continues on the lines below
	for i, l := range lines {
		indent := len(l) - len(strings.TrimLeft(l, " \t"))
		if hideBelow >= 0 {
			if strings.TrimSpace(l) == "" || indent > hideBelow {
				if strings.TrimSpace(l) != "" {
					lines[i] = l[:indent] + "REDACTED"
				}
				continue
			}
			hideBelow = -1
		}
		if m := yamlKey.FindStringSubmatch(l); m != nil {
			if name := strings.TrimSpace(m[2]); isCredentialParam(name) || headerWords[strings.ToLower(name)] {
				lines[i] = m[1] + m[2] + m[3] + "REDACTED"
				if v := strings.TrimSpace(m[4]); strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">") {
					hideBelow = indent // a block scalar: its text is on the lines below
				}
				continue
			}
		}
		if m := keyOnly.FindStringSubmatch(l); m != nil {
			if name := strings.TrimSpace(m[2]); isCredentialParam(name) || headerWords[strings.ToLower(name)] {
				hideBelow = indent // the value is on the lines below
				continue
			}
		}
		l = flowNested(l)
		l = flowPair.ReplaceAllStringFunc(l, func(p string) string {
			m := flowPair.FindStringSubmatch(p)
			if name := m[3]; isCredentialParam(name) || headerWords[strings.ToLower(name)] {
				return m[1] + m[2] + m[3] + m[4] + "REDACTED"
			}
			return p
		})
		lines[i] = Message(l)
	}
	return strings.Join(lines, "\n")
}

// flowPair finds a key and its value inside a flow mapping
// ("headers: {Authorization: "Bearer x", X-Api-Key: y}"): the value is a
// quoted string or runs to the next comma or closing brace.
var flowPair = regexp.MustCompile(`([{,]\s*)(["']?)([A-Za-z0-9_.-]+)(["']?\s*:\s*)("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^,{}\[\s][^,}]*)`)

// flowNestedKey finds a key of a flow mapping whose value is a flow
// sequence or mapping ("X-Api-Key: [k1, k2]", "Authorization: {a: b}").
var flowNestedKey = regexp.MustCompile(`[{,]\s*["']?([A-Za-z0-9_.-]+)["']?\s*:\s*[\[{]`)

// flowNested replaces the whole sequence or mapping under a
// credential-like key of a flow mapping by REDACTED, brackets balanced
// (to the end of the line when they are not).
func flowNested(l string) string {
	ms := flowNestedKey.FindAllStringSubmatchIndex(l, -1)
	for i := len(ms) - 1; i >= 0; i-- {
		m := ms[i]
		name := l[m[2]:m[3]]
		if !isCredentialParam(name) && !headerWords[strings.ToLower(name)] {
			continue
		}
		open := m[1] - 1
		end, depth := len(l), 0
		for j := open; j < len(l); j++ {
			switch l[j] {
			case '[', '{':
				depth++
			case ']', '}':
				depth--
			}
			if depth == 0 {
				end = j + 1
				break
			}
		}
		l = l[:open] + "REDACTED" + l[end:]
	}
	return l
}
