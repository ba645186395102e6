package redact

import (
	"slices"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8080/ping", "http://127.0.0.1:8080/ping"},
		{"http://gw.example/{seq}?n=1&b=x%20y", "http://gw.example/{seq}?n=1&b=x%20y"},
		{"https://alice:s3cr3t@gw.example/", "https://alice:xxxxx@gw.example/"},
		{"https://gw.example/p?token=s3cr3t&n=1", "https://gw.example/p?token=REDACTED&n=1"},
		{"https://gw.example/{seq}?n=1&access_token=a&API_KEY=b&apikey=c&password=d&secret=e&sig=f&signature=g",
			"https://gw.example/{seq}?n=1&access_token=REDACTED&API_KEY=REDACTED&apikey=REDACTED&password=REDACTED&secret=REDACTED&sig=REDACTED&signature=REDACTED"},
		{"https://s3.example/o?X-Amz-Signature=abc&client_secret=d&sessionToken=e&key=f", "https://s3.example/o?X-Amz-Signature=REDACTED&client_secret=REDACTED&sessionToken=REDACTED&key=REDACTED"},
		{"http://u:p@h/?token=t", "http://u:xxxxx@h/?token=REDACTED"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	msg := `Get "http://u:p@127.0.0.1:1/x?token=s3cr3t&n=2": dial tcp 127.0.0.1:1: connect: connection refused`
	if got, want := Message(msg), `Get "http://u:xxxxx@127.0.0.1:1/x?token=REDACTED&n=2": dial tcp 127.0.0.1:1: connect: connection refused`; got != want {
		t.Errorf("Message = %q, want %q", got, want)
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"run", "s.yaml", "--token", "abc", "-n", "x"}, []string{"run", "s.yaml", "--token", "REDACTED", "-n", "x"}},
		{[]string{"run", "--token=abc", "--api-key=k"}, []string{"run", "--token=REDACTED", "--api-key=REDACTED"}},
		{[]string{"--set", "target.url=http://u:pw@h/p?sig=1&a=2"}, []string{"--set", "target.url=http://u:xxxxx@h/p?sig=REDACTED&a=2"}},
		{[]string{"run", "https://h/x?api_key=s3cr3t"}, []string{"run", "https://h/x?api_key=REDACTED"}},
		{[]string{"run", "--context", "kind-c1"}, []string{"run", "--context", "kind-c1"}},
		{[]string{"--set", "attack.headers.Authorization=Bearer abc", "--set=attack.headers.X-Api-Key=k"},
			[]string{"--set", "attack.headers.Authorization=REDACTED", "--set=attack.headers.X-Api-Key=REDACTED"}},
		{[]string{"--set", `attack.headers["Cookie"]=s=1`, "--set", "attack.rate=5/s"}, []string{"--set", `attack.headers["Cookie"]=REDACTED`, "--set", "attack.rate=5/s"}},
		// A flow value carries keys of its own.
		{[]string{"--set", "attack.headers={Authorization: Bearer X9, Accept: json}"}, []string{"--set", "attack.headers={Authorization: REDACTED, Accept: json}"}},
		{[]string{"--set=attack={rate: 5, headers: {X-Api-Key: k3y}}"}, []string{"--set=attack={rate: 5, headers: {X-Api-Key: REDACTED}}"}},
		// A list (a header's values) or a mapping under a credential key.
		{[]string{"--set", "attack.headers={X-Api-Key: [S3CRET, two], Accept: json}"}, []string{"--set", "attack.headers={X-Api-Key: REDACTED, Accept: json}"}},
		{[]string{"--set", "attack.headers={Authorization: {b: S3CRET}}"}, []string{"--set", "attack.headers={Authorization: REDACTED}"}},
	} {
		if got := Args(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("Args(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestScenario(t *testing.T) {
	in := `target:
  url: "https://user:hunter2@mesh.example/ping?api_key=k3y&x=1"
attack:
  headers:
    Authorization: Bearer abc.def
    X-Api-Key: zzz
    Accept: text/plain
    Cookie: session=abc123
  - {name: probe, url: "http://h/?token=t0k"}
attack: {rate: 20, headers: {Authorization: "Bearer fl0w", 'X-Api-Key': k3y2, Accept: json}, token: "a,b}c"}
more:
  headers:
    Authorization: >-
      Bearer BL0CKSECRET
    X-Api-Key:
      NEXTLINESECRET
    Accept: text/html
`
	got := Scenario(in)
	for _, leak := range []string{"hunter2", "k3y", "abc.def", "zzz", "abc123", "t0k", "fl0w", "k3y2", "a,b}c", "BL0CKSECRET", "NEXTLINESECRET"} {
		if strings.Contains(got, leak) {
			t.Errorf("%q survived redaction:\n%s", leak, got)
		}
	}
	for _, keep := range []string{"Accept: text/plain", "x=1", "mesh.example/ping", "Accept: json}", "rate: 20", "Accept: text/html"} {
		if !strings.Contains(got, keep) {
			t.Errorf("%q was lost:\n%s", keep, got)
		}
	}
}

func TestMalformedURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://h/\x7f", "http://h/\x7f"},
		{"http://user:hunter2pass@127.0.0.1:9/p%zz?token=tok3nsecret&x=1", "http://user:xxxxx@127.0.0.1:9/p%zz?token=REDACTED&x=1"},
		{"http://u:p/w@h%zz?a=1;api_key=k#f", "http://u:xxxxx@h%zz?a=1;api_key=REDACTED#f"},
		{"http://h:9x/?sig", "http://h:9x/?sig"},
	} {
		if got := URL(tc.in); got != tc.want {
			t.Errorf("URL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Go's parse error quotes the malformed URL whole, a quote escaped.
	msg := `bad.yaml:8:8: target.url: invalid URL: parse "http://user:hun\"ter@h/p%zz?x=1&password=pw0rd": invalid URL escape "%zz"`
	want := `bad.yaml:8:8: target.url: invalid URL: parse "http://user:xxxxx@h/p%zz?x=1&password=REDACTED": invalid URL escape "%zz"`
	if got := Message(msg); got != want {
		t.Errorf("Message(%q)\n= %q\nwant %q", msg, got, want)
	}
	// Unquoted, a URL ends before the punctuation that follows it.
	msg = "--set target.url=http://u:pw@h/%zz?token=t0k: target.url: bad, see http://h/?key=k."
	want = "--set target.url=http://u:xxxxx@h/%zz?token=REDACTED: target.url: bad, see http://h/?key=REDACTED."
	if got := Message(msg); got != want {
		t.Errorf("Message(%q)\n= %q\nwant %q", msg, got, want)
	}
}
