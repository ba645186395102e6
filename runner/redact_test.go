package runner

import (
	"bytes"
	"context"
	"net"
	"strings"
	"testing"

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
