package portforward

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
)

// Serve accepts connections on ln and forwards each through the tunnel
// until ctx ends (it then closes ln and the open connections). A
// connection that fails is reported to onError (may be nil) and closed;
// the others and the listener carry on, unlike kubectl port-forward,
// which exits on the first forwarding error.
func (t *Tunnel) Serve(ctx context.Context, ln net.Listener, onError func(error)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	defer wg.Wait()
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()
	report := func(err error) {
		if onError != nil && err != nil {
			onError(err)
		}
	}
	for {
		local, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept on %s: %w", ln.Addr(), err)
		}
		wg.Go(func() {
			defer local.Close()
			remote, err := t.DialContext(ctx, "tcp", "")
			if err != nil {
				report(err)
				return
			}
			defer remote.Close()
			report(splice(ctx, local, remote))
		})
	}
}

// splice copies both ways until the remote side ends (or ctx does),
// half-closing like kubectl's handleConnection: local EOF → FIN to the pod.
func splice(ctx context.Context, local, remote net.Conn) error {
	remoteDone := make(chan error, 1)
	// Plain writers: *net.TCPConn's ReadFrom would wrap the tunnel's
	// error (and its cause) in a "readfrom tcp …" OpError. The tunnel's
	// WriteTo then writes each received frame to local itself.
	go func() {
		_, err := io.Copy(struct{ io.Writer }{local}, remote)
		remoteDone <- err
	}()
	go func() {
		_, err := io.Copy(struct{ io.Writer }{remote}, local)
		if err == nil {
			if cw, ok := remote.(interface{ CloseWrite() error }); ok {
				cw.CloseWrite()
			}
		}
	}()
	select {
	case err := <-remoteDone:
		if errors.Is(err, net.ErrClosed) {
			return nil
		}
		return err
	case <-ctx.Done():
		return nil
	}
}
