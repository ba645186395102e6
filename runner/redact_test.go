package runner

import (
	"bytes"
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/reports"
)

func TestRedactURL(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"http://127.0.0.1:8080/ping", "http://127.0.0.1:8080/ping"},
		{"http://gw.example/{seq}?n=1&b=x%20y", "http://gw.example/{seq}?n=1&b=x%20y"},
		{"https://alice:s3cr3t@gw.example/", "https://alice:xxxxx@gw.example/"},
		{"https://gw.example/p?token=s3cr3t&n=1", "https://gw.example/p?token=REDACTED&n=1"},
		{"https://gw.example/{seq}?n=1&access_token=a&API_KEY=b&apikey=c&password=d&secret=e&sig=f&signature=g",
			"https://gw.example/{seq}?n=1&access_token=REDACTED&API_KEY=REDACTED&apikey=REDACTED&password=REDACTED&secret=REDACTED&sig=REDACTED&signature=REDACTED"},
		{"https://s3.example/o?X-Amz-Signature=abc&client_secret=d&sessionToken=e&key=f", "https://s3.example/o?X-Amz-Signature=REDACTED&client_secret=REDACTED&sessionToken=REDACTED&key=REDACTED"},
		{"http://u:p@h/?token=t", "http://u:xxxxx@h/?token=REDACTED"},
		{"http://h/\x7f", "(unparsable URL)"},
	} {
		if got := redactURL(tc.in); got != tc.want {
			t.Errorf("redactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	msg := `Get "http://u:p@127.0.0.1:1/x?token=s3cr3t&n=2": dial tcp 127.0.0.1:1: connect: connection refused`
	if got, want := redactMessage(msg), `Get "http://u:xxxxx@127.0.0.1:1/x?token=REDACTED&n=2": dial tcp 127.0.0.1:1: connect: connection refused`; got != want {
		t.Errorf("redactMessage = %q, want %q", got, want)
	}
}

// The credentials of the target URL reach neither the report, its JUnit
// form nor the unreachable-target error.
func TestTargetCredentialsAreRedacted(t *testing.T) {
	ts, hits := coinServer(t, 0.5)
	raw := strings.Replace(ts.URL, "http://", "http://alice:pa55word@", 1) + "/?token=s3cr3t&n=1"
	sc := load(t, raw, "  concurrency: 2\n  requests: 20", "", "  - reached: {buckets: [c1, c2]}")
	rep, err := Run(context.Background(), sc, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if hits.Load() == 0 {
		t.Fatal("the server saw no request")
	}
	if want := strings.Replace(ts.URL, "http://", "http://alice:xxxxx@", 1) + "/?token=REDACTED&n=1"; rep.Target != want {
		t.Errorf("report target %q, want %q", rep.Target, want)
	}
	var out bytes.Buffer
	if err := reports.WriteJSON(&out, rep); err != nil {
		t.Fatal(err)
	}
	if err := reports.JUnit(&out, rep); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); strings.Contains(s, "pa55word") || strings.Contains(s, "s3cr3t") {
		t.Errorf("a credential is in the report or JUnit:\n%s", s)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there any more
	sc = load(t, "http://alice:pa55word@"+addr+"/?api_key=s3cr3t", "  concurrency: 2\n  requests: 20", "", "  - reached: {buckets: [c1]}")
	_, err = Run(context.Background(), sc, Options{})
	if err == nil || !strings.Contains(err.Error(), "cannot reach target http://alice:xxxxx@"+addr+"/?api_key=REDACTED") {
		t.Fatalf("Run: %v, want the unreachable target, redacted", err)
	}
	if strings.Contains(err.Error(), "pa55word") || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("a credential is in the error: %v", err)
	}
}

func TestRedactArgs(t *testing.T) {
	for _, tc := range []struct{ in, want []string }{
		{[]string{"run", "s.yaml", "--token", "abc", "-n", "x"}, []string{"run", "s.yaml", "--token", "REDACTED", "-n", "x"}},
		{[]string{"run", "--token=abc", "--api-key=k"}, []string{"run", "--token=REDACTED", "--api-key=REDACTED"}},
		{[]string{"--set", "target.url=http://u:pw@h/p?sig=1&a=2"}, []string{"--set", "target.url=http://u:xxxxx@h/p?sig=REDACTED&a=2"}},
		{[]string{"run", "https://h/x?api_key=s3cr3t"}, []string{"run", "https://h/x?api_key=REDACTED"}},
		{[]string{"run", "--context", "kind-c1"}, []string{"run", "--context", "kind-c1"}},
	} {
		if got := RedactArgs(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("RedactArgs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
