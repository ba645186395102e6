// Package loopback keeps lab traffic on 127.0.0.0/8: a dialer that refuses
// any other address, an HTTP transport built on it, and a check of the
// address a listener actually bound.
package loopback

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"
)

// Dialer refuses to connect anywhere but loopback. Its Control hook sees
// the resolved address, so even a name resolving elsewhere cannot leave
// 127.0.0.0/8.
func Dialer() *net.Dialer {
	return &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second, Control: control}
}

// Transport is an HTTP client transport that keeps connections alive (up to
// maxIdle idle ones in all, maxIdlePerHost per host), never uses an
// environment proxy (an HTTP_PROXY on a developer machine must not capture
// lab traffic) and dials with Dialer, so it refuses anything but loopback.
func Transport(maxIdle, maxIdlePerHost int) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         Dialer().DialContext,
		MaxIdleConns:        maxIdle,
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     90 * time.Second,
	}
}

// control is a net.Dialer Control hook that refuses non-loopback addresses.
func control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("dial %s %s: %w", network, address, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("dial %s %s: refusing a non-loopback address: the lab stays on 127.0.0.0/8", network, address)
	}
	return nil
}

// CheckListener checks the address a listener actually bound: it must be
// a TCP address on loopback.
func CheckListener(a net.Addr) error {
	ta, ok := a.(*net.TCPAddr)
	if !ok {
		return errors.New("want a TCP listener")
	}
	if !ta.IP.IsLoopback() {
		return fmt.Errorf("listener %s is not on loopback: the lab stays on 127.0.0.0/8", a)
	}
	return nil
}
