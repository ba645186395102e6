package runner

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/reports"
)

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

// When every request fails, the setup error is made of the requests'
// errors, which net/http writes with the URL: they are redacted too.
func TestSetupErrorOfFailedRequestsIsRedacted(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() { // accepts and hangs up: no response
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	sc := load(t, "http://alice:pa55word@"+ln.Addr().String()+"/?token=s3cr3t&sig=s1g", "  rate: 50\n  requests: 10", "", "  - reached: {buckets: [c1, c2]}")
	rep, err := Run(context.Background(), sc, Options{})
	if rep == nil || err == nil || rep.ExitCode != exitcode.Setup {
		t.Fatalf("want a setup error with a report: %v", err)
	}
	var all bytes.Buffer
	all.WriteString(err.Error() + rep.SetupError)
	for _, e := range rep.Metrics.Errors {
		all.WriteString(e.Message)
	}
	if err := reports.Markdown(&all, rep); err != nil {
		t.Fatal(err)
	}
	if err := reports.JUnit(&all, rep); err != nil {
		t.Fatal(err)
	}
	for _, leak := range []string{"pa55word", "s3cr3t", "s1g"} {
		if strings.Contains(all.String(), leak) {
			t.Errorf("%q leaked:\n%s", leak, all.String())
		}
	}
	if !strings.Contains(rep.SetupError, "token=REDACTED") {
		t.Errorf("setup error %q", rep.SetupError)
	}
}
