// Package nginxtest runs the machine's nginx (nginxbin.Find) for a test or
// a benchmark: a real third-party HTTP/1.1 server in another process, so
// that what a test measures is the client's side alone.
package nginxtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/nginxbin"
)

// Start runs nginx with one worker on a free loopback port, serving
// server (the body of its server block, without listen), and returns
// "http://127.0.0.1:PORT". It skips the test when nginx is not
// installed, and stops nginx by its pid at cleanup.
func Start(tb testing.TB, server string) string {
	tb.Helper()
	bin, err := nginxbin.Find()
	if err != nil {
		tb.Skip(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	d := tb.TempDir()
	conf := fmt.Sprintf(`worker_processes 1;
daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log warn;
events { worker_connections 4096; }
http {
  access_log off;
  client_body_temp_path %[1]s/body; proxy_temp_path %[1]s/proxy; fastcgi_temp_path %[1]s/fcgi;
  uwsgi_temp_path %[1]s/uwsgi; scgi_temp_path %[1]s/scgi;
  server {
    listen 127.0.0.1:%[2]d;
%[3]s
  }
}
`, d, port, server)
	if err := os.WriteFile(filepath.Join(d, "nginx.conf"), []byte(conf), 0o600); err != nil {
		tb.Fatal(err)
	}
	cmd := exec.Command(bin, "-p", d, "-c", filepath.Join(d, "nginx.conf"))
	// Its own process group: SIGKILL to the master alone would leave its
	// worker running, holding the port, after the test.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		// SIGTERM: the master stops its worker and exits; past 5 s the
		// whole group is killed (the master is not reaped yet, so the
		// group id is still its own).
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			c.Close()
			return "http://" + addr
		}
		select {
		case <-exited:
			tb.Fatalf("nginx exited (log %s/error.log)", d)
		case <-time.After(50 * time.Millisecond):
		}
	}
	tb.Fatalf("nginx does not answer on %s (log %s/error.log)", addr, d)
	return ""
}
