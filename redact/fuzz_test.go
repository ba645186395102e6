package redact

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// FuzzURL: a credential in a query parameter never survives, and
// redacting twice changes nothing.
func FuzzURL(f *testing.F) {
	for _, s := range []string{"http://u:p@h/x?token=abc", "https://h/?api_key=k&x=1", "http://h/?sig=%zz", "::::", "http://[::1]:80/?password=p#frag"} {
		f.Add(s, "s3cr3tvalue")
	}
	f.Fuzz(func(t *testing.T, raw, secret string) {
		once := URL(raw)
		if twice := URL(once); twice != once {
			t.Errorf("URL(URL(%q)) = %q, URL once %q", raw, twice, once)
		}
		// Tokens are URL-safe text; control characters cannot be in a URL
		// net/http sends (and it quotes them escaped).
		if len(secret) < 6 || strings.Trim(secret, tokenChars) != "" || strings.Contains(raw, secret) {
			return
		}
		withToken := "http://mesh.example/ping?token=" + secret + "&x=1"
		if got := URL(withToken); strings.Contains(got, secret) {
			t.Errorf("URL(%q) = %q keeps the token", withToken, got)
		}
		msg := `Get "` + withToken + `": connection refused`
		if got := Message(msg); strings.Contains(got, secret) {
			t.Errorf("Message(%q) = %q keeps the token", msg, got)
		}
	})
}

// FuzzScenario: in any YAML document, the value of a mapping key named
// Authorization (block or flow style) never survives.
func FuzzScenario(f *testing.F) {
	f.Add("s3cr3tvalue", "attack:\n  headers:\n    Authorization: Bearer %s\n")
	f.Add("s3cr3tvalue", "attack: {headers: {Authorization: \"Bearer %s\"}}\n")
	f.Add("s3cr3tvalue", "- {name: a, headers: {Accept: json, authorization: '%s'}}\n")
	f.Fuzz(func(t *testing.T, secret, layout string) {
		if len(secret) < 6 || strings.Trim(secret, tokenChars) != "" || strings.Count(layout, "%s") != 1 {
			return
		}
		text := strings.Replace(layout, "%s", secret, 1)
		var doc yaml.Node
		if yaml.Unmarshal([]byte(text), &doc) != nil || !authorizationHolds(&doc, secret) {
			return
		}
		if got := Scenario(text); strings.Contains(got, secret) {
			t.Errorf("Scenario(%q) = %q keeps the header's value", text, got)
		}
	})
}

// authorizationHolds reports whether a mapping key Authorization has a
// scalar value containing secret, in a document whose only occurrence of
// secret is that value.
func authorizationHolds(n *yaml.Node, secret string) bool {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if strings.EqualFold(k.Value, "authorization") && k.Style == 0 && v.Kind == yaml.ScalarNode && strings.Contains(v.Value, secret) && k.Line == v.Line {
				return true
			}
		}
	}
	for _, c := range n.Content {
		if authorizationHolds(c, secret) {
			return true
		}
	}
	return false
}

// tokenChars are the characters of the secrets the fuzz targets plant.
const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-"
