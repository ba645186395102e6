package attack

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
)

// ConnectToEnv is the environment variable `run` and `worker` read a
// connect-to list from (after --connect-to's entries); the lab gives its
// Job pods the Service names of their cluster in it.
const ConnectToEnv = "MESH_VERIFY_CONNECT_TO"

// Limits of a connect-to list (`run --connect-to`, $MESH_VERIFY_CONNECT_TO):
// the list comes from a flag or an environment variable another program
// wrote, so its size is bounded before anything is kept of it.
const (
	// MaxConnectToEntries bounds how many entries one list holds. The lab
	// writes four names per Service port and one entry per replica behind
	// each: a thousand covers dozens of Services with several replicas.
	MaxConnectToEntries = 1024
	// MaxConnectToLen bounds the whole list in bytes (comma-separated).
	MaxConnectToLen = 128 << 10
	// MaxConnectToHost bounds one host name, as DNS does (253 characters).
	MaxConnectToHost = 253
)

// ConnectToEntry is one curl `--connect-to HOST:PORT:CONNECT_HOST:CONNECT_PORT`:
// a connection the attack would open to HOST:PORT goes to
// CONNECT_HOST:CONNECT_PORT instead, while the request keeps its URL (Host
// header, TLS server name). An empty Host or a zero Port matches any; an
// empty ConnectHost or a zero ConnectPort keeps the original.
type ConnectToEntry struct {
	Host        string
	Port        int
	ConnectHost string
	ConnectPort int
}

func (e ConnectToEntry) String() string {
	port := func(p int) string {
		if p == 0 {
			return ""
		}
		return strconv.Itoa(p)
	}
	return bracket(e.Host) + ":" + port(e.Port) + ":" + bracket(e.ConnectHost) + ":" + port(e.ConnectPort)
}

func bracket(h string) string {
	if strings.Contains(h, ":") {
		return "[" + h + "]"
	}
	return h
}

// ConnectTo is a parsed connect-to list. The zero value (or nil) changes
// nothing.
type ConnectTo struct {
	entries []ConnectToEntry
}

// Entries are the list's entries in order.
func (c *ConnectTo) Entries() []ConnectToEntry {
	if c == nil {
		return nil
	}
	return append([]ConnectToEntry(nil), c.entries...)
}

// ParseConnectTo parses connect-to values: each value is one entry or
// several separated by commas (the form $MESH_VERIFY_CONNECT_TO takes);
// empty values and empty items are skipped. Errors name the entry.
func ParseConnectTo(values ...string) (*ConnectTo, error) {
	total := 0
	for _, v := range values {
		total += len(v) + 1
		if total > MaxConnectToLen {
			return nil, fmt.Errorf("connect-to list: longer than %d bytes", MaxConnectToLen)
		}
	}
	c := &ConnectTo{}
	n := 0
	for _, v := range values {
		for item := range strings.SplitSeq(v, ",") {
			item = strings.TrimSpace(item)
			if item == "" {
				continue
			}
			n++
			if n > MaxConnectToEntries {
				return nil, fmt.Errorf("connect-to list: more than %d entries", MaxConnectToEntries)
			}
			e, err := parseConnectToEntry(item)
			if err != nil {
				return nil, fmt.Errorf("connect-to entry %d %q: %w", n, item, err)
			}
			c.entries = append(c.entries, e)
		}
	}
	return c, nil
}

// parseConnectToEntry parses HOST:PORT:CONNECT_HOST:CONNECT_PORT, where a
// host may be an IPv6 address in brackets.
func parseConnectToEntry(s string) (ConnectToEntry, error) {
	var e ConnectToEntry
	var fields [4]string
	rest := s
	for i := range fields {
		if i == 3 {
			if strings.Contains(rest, ":") {
				return e, errors.New("want HOST:PORT:CONNECT_HOST:CONNECT_PORT (too many fields)")
			}
			fields[i] = rest
			break
		}
		var f string
		var err error
		f, rest, err = cutField(rest, i%2 == 0)
		if err != nil {
			return e, err
		}
		fields[i] = f
	}
	var err error
	if e.Host, err = checkHost(fields[0]); err != nil {
		return e, fmt.Errorf("HOST: %w", err)
	}
	if e.Port, err = checkPort(fields[1]); err != nil {
		return e, fmt.Errorf("PORT: %w", err)
	}
	if e.ConnectHost, err = checkHost(fields[2]); err != nil {
		return e, fmt.Errorf("CONNECT_HOST: %w", err)
	}
	if e.ConnectPort, err = checkPort(fields[3]); err != nil {
		return e, fmt.Errorf("CONNECT_PORT: %w", err)
	}
	return e, nil
}

// cutField takes one field up to the next colon; a host field may be a
// bracketed IPv6 address, whose colons do not count.
func cutField(s string, host bool) (field, rest string, err error) {
	if host && strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return "", "", errors.New("unclosed '[' in a host")
		}
		field, rest = s[:end+1], s[end+1:]
		if !strings.HasPrefix(rest, ":") {
			return "", "", errors.New("want ':' after a bracketed host")
		}
		return field, rest[1:], nil
	}
	field, rest, ok := strings.Cut(s, ":")
	if !ok {
		return "", "", errors.New("want HOST:PORT:CONNECT_HOST:CONNECT_PORT (too few fields)")
	}
	return field, rest, nil
}

func checkHost(h string) (string, error) {
	if strings.HasPrefix(h, "[") {
		if !strings.HasSuffix(h, "]") {
			return "", errors.New("unclosed '['")
		}
		ip := net.ParseIP(h[1 : len(h)-1])
		if ip == nil || ip.To4() != nil {
			return "", fmt.Errorf("%q is not an IPv6 address", h)
		}
		return ip.String(), nil
	}
	if len(h) > MaxConnectToHost {
		return "", fmt.Errorf("longer than %d characters", MaxConnectToHost)
	}
	for _, r := range h {
		ok := r == '-' || r == '.' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z')
		if !ok {
			return "", fmt.Errorf("%q: character %q is not allowed in a host name", h, r)
		}
	}
	return strings.ToLower(h), nil
}

func checkPort(p string) (int, error) {
	if p == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strings.HasPrefix(p, "+") {
		return 0, fmt.Errorf("%q is not a port number (1-65535)", p)
	}
	return n, nil
}

// Resolve is where a connection to addr (host:port) goes: the first entry
// that matches it decides, as in curl, except that every entry with the
// same HOST:PORT as that one is a candidate and one is picked at random
// for each connection, as kube-proxy picks one endpoint of a Service per
// connection. ok is false when no entry matches (addr is dialled as is).
func (c *ConnectTo) Resolve(addr string) (target string, ok bool) {
	if c == nil || len(c.entries) == 0 {
		return addr, false
	}
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, false
	}
	port, _ := strconv.Atoi(portStr)
	host = strings.ToLower(host)
	if ip := net.ParseIP(host); ip != nil {
		host = ip.String()
	}
	first := -1
	var n int
	var pick ConnectToEntry
	for i, e := range c.entries {
		if first < 0 {
			if (e.Host != "" && e.Host != host) || (e.Port != 0 && e.Port != port) {
				continue
			}
			first = i
		} else if e.Host != c.entries[first].Host || e.Port != c.entries[first].Port {
			continue
		}
		// Reservoir sampling: a uniform pick without a second pass.
		n++
		if rand.IntN(n) == 0 {
			pick = e
		}
	}
	if first < 0 {
		return addr, false
	}
	h, p := host, port
	if pick.ConnectHost != "" {
		h = pick.ConnectHost
	}
	if pick.ConnectPort != 0 {
		p = pick.ConnectPort
	}
	return net.JoinHostPort(h, strconv.Itoa(p)), true
}

// Dial wraps next (nil: plain TCP, as the attack dials without a tunnel)
// so that every connection honours the list; plug it into Options.Dial.
// Every transport the attack builds (HTTP/1.1 lanes, HTTP/2 over h2c or
// TLS, gRPC) opens its connections through Options.Dial.
func (c *ConnectTo) Dial(next DialFunc) DialFunc {
	if next == nil {
		next = plainDial()
	}
	if c == nil || len(c.entries) == 0 {
		return next
	}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		target, _ := c.Resolve(addr)
		conn, err := next(ctx, network, target)
		if err != nil && target != addr {
			return nil, fmt.Errorf("connect to %s for %s (connect-to): %w", target, addr, err)
		}
		return conn, err
	}
}
