package portforward

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"

	constants "k8s.io/apimachinery/pkg/util/portforward"
	restclient "k8s.io/client-go/rest"
	clientportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/websocket"
	streamhttp "k8s.io/streaming/pkg/httpstream"
	streamspdy "k8s.io/streaming/pkg/httpstream/spdy"
)

// wsDialer is client-go's SPDY-over-WebSocket dialer (what kubectl 1.31+
// uses) with one change: each SPDY frame goes out as one WebSocket message.
// The SPDY framer writes a data frame as three writes (stream id, flags and
// length, payload) and client-go's tunnel sends each write as a message of
// its own, so every frame cost three TLS records and three write system
// calls here and three reads on the API server (docs/architecture.md
// "Reaching the entry point").
type wsDialer struct {
	url       *url.URL
	transport http.RoundTripper
	holder    websocket.ConnectionHolder
}

func newWSDialer(u *url.URL, cfg *restclient.Config) (*wsDialer, error) {
	rt, holder, err := websocket.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	return &wsDialer{url: u, transport: rt, holder: holder}, nil
}

func (d *wsDialer) Dial(protocols ...string) (streamhttp.Connection, string, error) {
	req, err := http.NewRequest(http.MethodGet, d.url.String(), nil)
	if err != nil {
		return nil, "", err
	}
	tunneling := make([]string, len(protocols))
	for i, p := range protocols {
		tunneling[i] = constants.WebsocketsSPDYTunnelingPrefix + p
	}
	ws, err := websocket.Negotiate(d.transport, d.holder, req, tunneling...)
	if err != nil {
		return nil, "", err
	}
	if ws == nil {
		return nil, "", fmt.Errorf("negotiated websocket connection is nil")
	}
	proto := strings.TrimPrefix(ws.Subprotocol(), constants.WebsocketsSPDYTunnelingPrefix)
	tc := &frameConn{Conn: clientportforward.NewTunnelingConnection("client", ws)}
	conn, err := streamspdy.NewClientConnectionWithPings(tc, clientportforward.PingPeriod)
	if err != nil {
		tc.Close()
		return nil, "", err
	}
	return conn, proto, nil
}

// spdyHeader is the size of a SPDY/3 frame header, control or data: its
// last three bytes are the length of the rest of the frame.
const spdyHeader = 8

// frameConn gathers the writes of one SPDY frame and writes it whole.
// Bytes that do not yet make a frame are held until the rest comes: the
// framer always writes a whole frame under its lock before the next.
type frameConn struct {
	net.Conn
	mu  sync.Mutex
	buf []byte
}

func (c *frameConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf = append(c.buf, p...)
	for len(c.buf) >= spdyHeader {
		n := spdyHeader + (int(c.buf[5])<<16 | int(c.buf[6])<<8 | int(c.buf[7]))
		if len(c.buf) < n {
			break
		}
		if _, err := c.Conn.Write(c.buf[:n]); err != nil {
			c.buf = c.buf[:0]
			return 0, err
		}
		c.buf = c.buf[:copy(c.buf, c.buf[n:])]
	}
	if cap(c.buf) > 1<<20 && len(c.buf) == 0 {
		c.buf = nil // a large frame's buffer is not kept
	}
	return len(p), nil
}
