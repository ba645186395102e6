package testutil

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// RawConn is one client TCP connection driven by hand, so a test decides
// exactly which connection carries which request.
type RawConn struct {
	net.Conn
	R *bufio.Reader
}

// Dial connects to addr. The connection is closed when the test ends, and
// reads and writes on it fail once limit has passed, so a hang fails the
// test instead of holding it.
func Dial(t *testing.T, addr string, limit time.Duration) *RawConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(limit))
	t.Cleanup(func() { c.Close() })
	return &RawConn{Conn: c, R: bufio.NewReader(c)}
}

// Do sends one keep-alive HTTP/1.1 request without a body and reads the
// answer and its body.
func (rc *RawConn) Do(method, path, host string) (*http.Response, string, error) {
	if _, err := fmt.Fprintf(rc, "%s %s HTTP/1.1\r\nHost: %s\r\nContent-Length: 0\r\n\r\n", method, path, host); err != nil {
		return nil, "", fmt.Errorf("write request: %w", err)
	}
	resp, err := http.ReadResponse(rc.R, nil)
	if err != nil {
		return nil, "", fmt.Errorf("read response: %w", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp, string(b), fmt.Errorf("read body: %w", err)
	}
	return resp, string(b), nil
}
