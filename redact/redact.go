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
		return "(unparsable URL)"
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

// quotedURL finds the URLs net/http quotes in its errors (Get "URL": …).
var quotedURL = regexp.MustCompile(`"[a-zA-Z][a-zA-Z0-9+.-]*://[^"\s]*"`)

// Message redacts the quoted URLs of an error message.
func Message(msg string) string {
	return quotedURL.ReplaceAllStringFunc(msg, func(q string) string {
		return `"` + URL(q[1:len(q)-1]) + `"`
	})
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

// anyURL finds URLs in free text.
var anyURL = regexp.MustCompile(`[a-zA-Z][a-zA-Z0-9+.-]*://[^\s"'<>]+`)

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
		l = flowPair.ReplaceAllStringFunc(l, func(p string) string {
			m := flowPair.FindStringSubmatch(p)
			if name := m[3]; isCredentialParam(name) || headerWords[strings.ToLower(name)] {
				return m[1] + m[2] + m[3] + m[4] + "REDACTED"
			}
			return p
		})
		lines[i] = anyURL.ReplaceAllStringFunc(l, URL)
	}
	return strings.Join(lines, "\n")
}

// flowPair finds a key and its value inside a flow mapping
// ("headers: {Authorization: "Bearer x", X-Api-Key: y}"): the value is a
// quoted string or runs to the next comma or closing brace.
var flowPair = regexp.MustCompile(`([{,]\s*)(["']?)([A-Za-z0-9_.-]+)(["']?\s*:\s*)("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^,{}\[\s][^,}]*)`)
