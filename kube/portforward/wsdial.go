package portforward

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	constants "k8s.io/apimachinery/pkg/util/portforward"
	restclient "k8s.io/client-go/rest"
	clientportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/websocket"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// wsDialer is client-go's SPDY-over-WebSocket dialer (what kubectl 1.31+
// uses) with the SPDY end replaced: spdyConn (spdyconn.go) instead of
// moby/spdystream behind k8s.io/streaming. Every SPDY frame goes out as one
// WebSocket message (client-go's tunnel sends each of the framer's three
// writes per data frame as a message of its own), and a received frame
// reaches its stream's reader in one goroutine hand-off instead of four
// (docs/architecture.md "Reaching the entry point").
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
	// The tunnel reads the messages as one byte stream (a frame may span
	// messages); frames are written to the WebSocket directly.
	tc := clientportforward.NewTunnelingConnection("client", ws)
	conn, err := newSPDYConn(ws, tc, tc, clientportforward.PingPeriod)
	if err != nil {
		tc.Close()
		return nil, "", err
	}
	return conn, proto, nil
}
