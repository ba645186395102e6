// Package relay stands between kwok's port-forward and a lab pod's
// server, so that a backend closing an idle connection never leaves a
// client hanging (lab/README.md, "Connections behind a port-forward").
//
// kwok's port-forward copies a stream to its target and back, and ends
// the stream only when both directions have ended: when the backend closes
// an idle keep-alive connection (nginx on every reload, an app draining on
// SIGTERM), the client is not told; its next request is written into a
// socket nobody reads, and it waits until its timeout. A real kubelet
// (containerd) ends the stream within a second of either direction
// ending, so the client sees the close and opens a new connection.
//
// Through kwok the relay gives the client the same outcome:
//   - the backend closes an idle connection it did not announce closing:
//     the relay keeps the client's side open and sends the client's next
//     request over a new backend connection, as the client would have;
//   - the backend announced the close (a "Connection: close" answer), or
//     the client had half-closed: the close is passed on, as ever;
//   - the backend closes with a request unanswered (an idle close racing
//     the request): an idempotent request (GET, HEAD, OPTIONS, TRACE, which
//     Go's HTTP client itself sends again) goes again on a new connection;
//     anything else resets the client's side.
//
// What it cannot fix: a backend that dies in the middle of an answer, or
// is gone when the client's next request comes, leaves that request
// waiting, as kwok passes no reset on to the client (mesh-verify's own
// port-forward bounds that wait: it drops a deleted pod's connections).
package relay

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/loopback"
)

// Limits.
const (
	// MaxReplay is how many unanswered bytes a connection keeps to send a
	// request again; a larger request is never replayed.
	MaxReplay = 64 << 10
	// MaxIdleRedials bounds the backend connections in a row that ended
	// without answering anything: a backend that accepts and closes at
	// once is treated as gone.
	MaxIdleRedials = 5
	// DialTimeout bounds one connect to the backend (loopback).
	DialTimeout = 2 * time.Second
	// DefaultLinger is how long a client's connection is kept open after
	// the backend closed it idle, waiting for the client's next request;
	// then it is closed, so kwok's stream of a client that left goes too.
	DefaultLinger = time.Minute
	// headSniff is how much of an answer is searched for the header that
	// announces the close.
	headSniff = 4 << 10
	bufSize   = 32 << 10
)

// Stats count what the relay did.
type Stats struct {
	// Connections accepted from kwok; Open of them are open now.
	Connections int64 `json:"connections"`
	Open        int64 `json:"open"`
	// Redials are backend connections opened again after the backend
	// closed an idle one, the client's connection kept.
	Redials int64 `json:"redials,omitempty"`
	// Replays are unanswered requests sent again after the backend closed
	// without answering them.
	Replays int64 `json:"replays,omitempty"`
	// Resets are client connections reset because the backend could not
	// be reached or closed with a request that cannot be sent again.
	Resets int64 `json:"resets,omitempty"`
}

// Relay accepts on a loopback port and relays every connection to target.
type Relay struct {
	target string
	linger time.Duration
	ln     net.Listener
	dialer net.Dialer

	connections, redials, replays, resets atomic.Int64

	mu     sync.Mutex
	closed bool
	pipes  map[*pipe]struct{}
	wg     sync.WaitGroup
}

// Start listens on 127.0.0.1 (a free port) and relays to target, a
// loopback "host:port"; linger is how long a connection the backend
// closed idle waits for the client (0 means DefaultLinger).
func Start(target string, linger time.Duration) (*Relay, error) {
	if linger < 0 {
		return nil, fmt.Errorf("relay to %s: linger %v is negative", target, linger)
	}
	if linger == 0 {
		linger = DefaultLinger
	}
	host, _, err := net.SplitHostPort(target)
	if err != nil {
		return nil, fmt.Errorf("relay to %s: %w", target, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("relay to %s: target is not a loopback address", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("relay to %s: listen: %w", target, err)
	}
	if err := loopback.CheckListener(ln.Addr()); err != nil {
		ln.Close()
		return nil, fmt.Errorf("relay to %s: %w", target, err)
	}
	r := &Relay{target: target, linger: linger, ln: ln, dialer: net.Dialer{Timeout: DialTimeout}, pipes: map[*pipe]struct{}{}}
	r.wg.Add(1)
	go r.accept()
	return r, nil
}

// Addr is where the relay listens: the target of the pod's kwok
// PortForward.
func (r *Relay) Addr() string { return r.ln.Addr().String() }

// Target is the backend address.
func (r *Relay) Target() string { return r.target }

// Stats returns the counters.
func (r *Relay) Stats() Stats {
	r.mu.Lock()
	open := int64(len(r.pipes))
	r.mu.Unlock()
	return Stats{Connections: r.connections.Load(), Open: open, Redials: r.redials.Load(),
		Replays: r.replays.Load(), Resets: r.resets.Load()}
}

// Close stops accepting and resets every connection (the pod is gone),
// then waits for the relay's goroutines.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	pipes := make([]*pipe, 0, len(r.pipes))
	for p := range r.pipes {
		pipes = append(pipes, p)
	}
	r.mu.Unlock()
	err := r.ln.Close()
	for _, p := range pipes {
		p.reset()
	}
	r.wg.Wait()
	return err
}

func (r *Relay) accept() {
	defer r.wg.Done()
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return // closed
		}
		r.connections.Add(1)
		p := &pipe{r: r, down: c.(*net.TCPConn)}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			resetConn(p.down)
			return
		}
		r.pipes[p] = struct{}{}
		r.wg.Add(1)
		r.mu.Unlock()
		go p.run()
	}
}

// pipe is one client connection (kwok's side, "down") and the backend
// connection currently serving it ("up").
type pipe struct {
	r    *Relay
	down *net.TCPConn

	// wmu orders the client's writes with the replacement of the backend
	// connection: a chunk is either in the pending bytes a replacement
	// sends again, or written to the replacement, never both.
	wmu sync.Mutex

	mu       sync.Mutex
	up       *net.TCPConn // nil after an idle close, until the client sends again
	pending  []byte       // client bytes sent since the backend last sent any
	overflow bool         // pending outgrew MaxReplay
	head     []byte       // the start of the backend's latest answer
	answered bool         // the current up has sent at least one byte
	idle     int          // backend connections in a row that answered nothing
	downEOF  bool         // the client half-closed
	dead     bool
	linger   *time.Timer
	pumps    sync.WaitGroup
}

func (p *pipe) run() {
	defer p.r.wg.Done()
	defer func() {
		p.r.mu.Lock()
		delete(p.r.pipes, p)
		p.r.mu.Unlock()
	}()
	if err := p.connect(); err != nil {
		p.reset()
		return
	}
	p.fromClient()
	p.pumps.Wait()
}

// connect dials the backend and starts copying its bytes to the client.
func (p *pipe) connect() error {
	c, err := p.r.dialer.Dial("tcp", p.r.target)
	if err != nil {
		return err
	}
	up := c.(*net.TCPConn)
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		up.Close()
		return net.ErrClosed
	}
	p.up, p.answered = up, false
	p.stopLingerLocked()
	p.pumps.Add(1)
	p.mu.Unlock()
	go p.fromBackend(up)
	return nil
}

// fromClient copies the client's bytes to the backend.
func (p *pipe) fromClient() {
	buf := make([]byte, bufSize)
	for {
		n, err := p.down.Read(buf)
		if n > 0 && !p.send(buf[:n]) {
			return // dead
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				p.mu.Lock()
				p.downEOF = true
				up := p.up
				p.mu.Unlock()
				if up != nil {
					_ = up.CloseWrite() // the client half-closed: so do we
				} else {
					p.finish() // nothing to answer it
				}
				return
			}
			p.reset() // the client or kwok reset: end everything
			return
		}
	}
}

// send writes one chunk of the client's to the backend, connecting again
// if the backend closed the last connection idle; false when the pipe is
// dead.
func (p *pipe) send(b []byte) bool {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return false
	}
	if !p.overflow {
		if len(p.pending)+len(b) > MaxReplay {
			p.pending, p.overflow = nil, true
		} else {
			p.pending = append(p.pending, b...)
		}
	}
	up := p.up
	p.mu.Unlock()
	if up == nil {
		if err := p.connect(); err != nil {
			p.reset() // the backend is gone
			return false
		}
		p.r.redials.Add(1)
		p.mu.Lock()
		up = p.up
		p.mu.Unlock()
		if up == nil {
			return false // reset meanwhile
		}
	}
	// A failed write means the backend went away; its reader sees that
	// too and decides what becomes of the pending bytes.
	_, _ = up.Write(b)
	return true
}

// fromBackend copies one backend connection's bytes to the client, then
// decides what its end means.
func (p *pipe) fromBackend(up *net.TCPConn) {
	defer p.pumps.Done()
	buf := make([]byte, bufSize)
	for {
		n, err := up.Read(buf)
		if n > 0 {
			p.mu.Lock()
			if len(p.pending) > 0 || p.overflow || !p.answered {
				p.head = p.head[:0] // the first bytes of an answer
			}
			if room := headSniff - len(p.head); room > 0 {
				p.head = append(p.head, buf[:min(n, room)]...)
			}
			p.pending, p.overflow, p.answered = p.pending[:0], false, true
			p.mu.Unlock()
			if _, werr := p.down.Write(buf[:n]); werr != nil {
				p.reset()
				return
			}
		}
		if err != nil {
			p.backendEnded(up)
			return
		}
	}
}

// backendEnded handles the end of backend connection up.
func (p *pipe) backendEnded(up *net.TCPConn) {
	up.Close() // also ends a write of the client's blocked on it
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	if p.dead || p.up != up {
		p.mu.Unlock()
		return
	}
	p.up = nil
	pending := bytes.Clone(p.pending)
	overflow, downEOF := p.overflow, p.downEOF
	announced := p.answered && len(pending) == 0 && announcesClose(p.head)
	if p.answered {
		p.idle = 0
	} else {
		p.idle++
	}
	tooIdle := p.idle > MaxIdleRedials
	p.mu.Unlock()
	switch {
	case downEOF || announced:
		// The client is done sending, or knows the backend closes after
		// this answer: an ordinary close, passed on as one.
		p.finish()
	case tooIdle:
		p.reset()
	case len(pending) == 0:
		// An idle close the client was not told of: keep its connection
		// for its next request, which send carries over a new one.
		p.mu.Lock()
		p.linger = time.AfterFunc(p.r.linger, p.lingerEnded)
		p.mu.Unlock()
	case !overflow && replayable(pending):
		if err := p.connect(); err != nil {
			p.reset()
			return
		}
		p.mu.Lock()
		nu := p.up
		p.mu.Unlock()
		if nu == nil {
			return // reset meanwhile
		}
		if _, err := nu.Write(pending); err != nil {
			p.reset()
			return
		}
		p.r.replays.Add(1)
	default:
		p.reset()
	}
}

// lingerEnded closes a client connection the backend closed idle and the
// client has not used since.
func (p *pipe) lingerEnded() {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	idle := p.up == nil
	p.mu.Unlock()
	if idle {
		p.finish()
	}
}

// announcesClose reports whether an answer's head says the connection
// closes after it (HTTP/1.1 "Connection: close").
func announcesClose(head []byte) bool {
	end := bytes.Index(head, []byte("\r\n\r\n"))
	if end < 0 {
		end = len(head)
	}
	for _, line := range bytes.Split(head[:end], []byte("\r\n")) {
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && bytes.EqualFold(bytes.TrimSpace(name), []byte("Connection")) {
			for _, tok := range bytes.Split(value, []byte(",")) {
				if bytes.EqualFold(bytes.TrimSpace(tok), []byte("close")) {
					return true
				}
			}
		}
	}
	return false
}

// replayable reports whether the unanswered bytes begin with a method
// Go's HTTP client would itself send again on a new connection.
func replayable(b []byte) bool {
	for _, m := range []string{"GET ", "HEAD ", "OPTIONS ", "TRACE "} {
		if bytes.HasPrefix(b, []byte(m)) {
			return true
		}
	}
	return false
}

// finish closes the client's side normally.
func (p *pipe) finish() { p.end(false) }

// reset ends the pipe with a TCP reset towards the client, so that kwok's
// next write fails at once.
func (p *pipe) reset() { p.end(true) }

// end closes both sides once: the client's with a reset or normally.
func (p *pipe) end(reset bool) {
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return
	}
	p.dead = true
	up := p.up
	p.up = nil
	p.stopLingerLocked()
	p.mu.Unlock()
	if reset {
		p.r.resets.Add(1)
		resetConn(p.down)
	} else {
		p.down.Close()
	}
	if up != nil {
		up.Close()
	}
}

func (p *pipe) stopLingerLocked() {
	if p.linger != nil {
		p.linger.Stop()
	}
}

func resetConn(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
