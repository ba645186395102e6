// Package rawtest is a real HTTP/1.1 peer on a loopback socket for tests
// that need answers a well-behaved server does not send (oversized
// headers, broken framing) or a server that allocates nothing per request
// (so that a process's allocation count is the client's). It reads each
// request head and writes a fixed answer; it is not a fake of the
// client's peer: the client speaks to it over TCP as to nginx.
package rawtest

import (
	"bufio"
	"bytes"
	"net"
	"sync"
	"testing"
)

// Target listens on 127.0.0.1 and answers every request head on a
// connection with answer (requests without a body: the tests send GETs);
// once closes each connection after its first answer. It returns the
// base URL ("http://127.0.0.1:PORT"); the listener and every connection
// are closed, and their goroutines waited for, when the test ends.
func Target(t testing.TB, answer []byte, once bool) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns[c] = true
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				serve(c, answer, once)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// serve answers each request head on c until the client closes it (or
// after one answer, once).
func serve(c net.Conn, answer []byte, once bool) {
	r := bufio.NewReaderSize(c, 4096)
	for {
		for {
			line, err := r.ReadSlice('\n')
			if err != nil {
				return
			}
			if len(bytes.TrimRight(line, "\r\n")) == 0 {
				break
			}
		}
		if _, err := c.Write(answer); err != nil || once {
			return
		}
	}
}
