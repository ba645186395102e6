package portforward

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	"github.com/moby/spdystream/spdy"
	streamhttp "k8s.io/streaming/pkg/httpstream"
)

// spdyConn limits and timings.
const (
	// spdyHeader is the size of a SPDY/3 frame header, control or data:
	// its last three bytes are the length of the rest of the frame.
	spdyHeader = 8
	// maxStreamBuffer bounds what one stream holds received and not yet
	// read: past it the connection's reader waits for the stream's reader
	// (spdystream hands each frame over unbuffered, so one slow stream
	// holds up the connection there too, only sooner).
	maxStreamBuffer = 256 << 10
	// readChunk is how much of a data frame's payload is read at a time:
	// a frame of any length (up to SPDY's 16 MiB) passes through a buffer
	// of this size, not one of the frame's.
	readChunk = 32 << 10
	// readBuffer is the connection reader's buffer: a burst of frames
	// (headers and small payloads) is parsed from one read.
	readBuffer = 64 << 10
	// createStreamTimeout is how long CreateStream waits for the reply,
	// as k8s.io/streaming's SPDY connection does.
	createStreamTimeout = 30 * time.Second
	// maxClientStreamID: SPDY stream IDs are 31 bits and never reused.
	maxClientStreamID = 1<<31 - 1
)

// errStreamReset is a write on a stream that either end reset.
var errStreamReset = errors.New("stream reset")

// messageWriter is where the connection's frames go: one WebSocket binary
// message per SPDY frame (*websocket.Conn's NextWriter).
type messageWriter interface {
	NextWriter(messageType int) (io.WriteCloser, error)
}

// spdyConn is the client end of a SPDY/3.1 connection carrying
// port-forward streams, in place of moby/spdystream for the WebSocket
// path. It speaks the same frames to the same peer (the kubelet's
// spdystream server, behind the API server's WebSocket tunnel), but per
// forwarded request it costs one goroutine hand-off instead of four:
// spdystream queues each received frame to a worker goroutine that hands
// it, unbuffered, to the stream's reader, and wakes an idle-timer goroutine
// on every frame read or written. Here the one reader goroutine appends a
// frame's payload to its stream's buffer and wakes that stream's reader
// (or, while the stream's WriteTo runs, writes it to WriteTo's writer
// itself: no hand-off at all); a write goes out from the writer's goroutine as one WebSocket message
// (header and payload together). Header blocks are (de)compressed by
// spdystream's own Framer (package spdy), which also parses every control
// frame; data frames, the per-request traffic, are parsed here.
type spdyConn struct {
	out    messageWriter
	closer io.Closer // the tunnel; closing it ends the reader
	br     *bufio.Reader
	framer *spdy.Framer
	// maxFrame is the largest data frame payload written (SPDY's 24-bit
	// length, smaller in tests).
	maxFrame int

	wmu  sync.Mutex   // one frame at a time; also orders SYN_STREAMs by ID
	wbuf bytes.Buffer // the framer's output: one control frame
	hdr  [spdyHeader]byte
	next uint32 // next stream ID (odd: client-initiated)

	closed  atomic.Bool
	closeCh chan bool // closed when the connection ends

	mu      sync.Mutex
	streams map[uint32]*spdyStream
	readErr error // why the reader stopped

	scratch []byte // the reader's chunk buffer
}

// newSPDYConn starts the connection's reader (and, with pingPeriod > 0,
// its pings, which keep idle proxies from closing the tunnel) on r, the
// tunnel's byte stream.
func newSPDYConn(out messageWriter, r io.Reader, closer io.Closer, pingPeriod time.Duration) (*spdyConn, error) {
	c, err := initSPDYConn(out, r, closer)
	if err != nil {
		return nil, err
	}
	go c.readLoop()
	if pingPeriod > 0 {
		go c.pings(pingPeriod)
	}
	return c, nil
}

// initSPDYConn makes a connection without starting its goroutines.
func initSPDYConn(out messageWriter, r io.Reader, closer io.Closer) (*spdyConn, error) {
	c := &spdyConn{out: out, closer: closer, br: bufio.NewReaderSize(r, readBuffer), maxFrame: spdy.MaxDataLength,
		next: 1, closeCh: make(chan bool), streams: map[uint32]*spdyStream{}, scratch: make([]byte, readChunk)}
	f, err := spdy.NewFramer(&c.wbuf, c.br)
	if err != nil {
		return nil, fmt.Errorf("spdy framer: %w", err)
	}
	c.framer = f
	return c, nil
}

// CreateStream opens a stream with headers and waits for the peer's reply.
func (c *spdyConn) CreateStream(headers http.Header) (streamhttp.Stream, error) {
	s := &spdyStream{c: c, headers: headers, replied: make(chan struct{})}
	s.cond.L = &s.mu
	c.wmu.Lock()
	c.mu.Lock()
	if c.closed.Load() {
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, errConnClosed
	}
	if c.next > maxClientStreamID {
		c.mu.Unlock()
		c.wmu.Unlock()
		return nil, fmt.Errorf("create stream: every SPDY stream ID of the connection used")
	}
	s.id = c.next
	c.next += 2
	c.streams[s.id] = s
	c.mu.Unlock()
	err := c.writeControlLocked(&spdy.SynStreamFrame{StreamId: spdy.StreamId(s.id), Headers: headers})
	c.wmu.Unlock()
	if err != nil {
		c.remove(s.id)
		return nil, fmt.Errorf("create stream %d: %w", s.id, err)
	}
	t := time.NewTimer(createStreamTimeout)
	defer t.Stop()
	select {
	case <-s.replied:
		s.mu.Lock()
		refused := s.refused
		s.mu.Unlock()
		if refused && c.closed.Load() {
			return nil, fmt.Errorf("create stream %d: %w", s.id, errConnClosed)
		}
		if refused {
			return nil, fmt.Errorf("create stream %d: %w by the peer", s.id, errStreamReset)
		}
		return s, nil
	case <-c.closeCh:
		return nil, fmt.Errorf("create stream %d: %w", s.id, errConnClosed)
	case <-t.C:
		s.Reset()
		return nil, fmt.Errorf("create stream %d: no reply within %s", s.id, createStreamTimeout)
	}
}

// errConnClosed is an operation on a closed connection.
var errConnClosed = errors.New("SPDY connection closed")

// Close ends the connection: its streams read what they hold, then EOF.
func (c *spdyConn) Close() error {
	c.shut()
	return nil
}

// CloseChan is closed when the connection ends, either side closing it.
func (c *spdyConn) CloseChan() <-chan bool { return c.closeCh }

// SetIdleTimeout is part of streamhttp.Connection and does nothing: the
// tunnel never sets one (its liveness is the pings and the pod watch), and
// an idle timer is what spdystream resets on every frame.
func (c *spdyConn) SetIdleTimeout(time.Duration) {}

// RemoveStreams forgets streams: frames for them are dropped.
func (c *spdyConn) RemoveStreams(streams ...streamhttp.Stream) {
	for _, s := range streams {
		if s != nil {
			c.remove(s.Identifier())
		}
	}
}

func (c *spdyConn) remove(id uint32) {
	c.mu.Lock()
	delete(c.streams, id)
	c.mu.Unlock()
}

func (c *spdyConn) stream(id uint32) *spdyStream {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.streams[id]
}

// shut marks the connection closed, ends its streams' reads (after what
// they hold) and closes the tunnel, once.
func (c *spdyConn) shut() {
	c.mu.Lock()
	if c.closed.Swap(true) {
		c.mu.Unlock()
		return
	}
	streams := c.streams
	c.streams = map[uint32]*spdyStream{}
	c.mu.Unlock()
	for _, s := range streams {
		s.remoteEnd(false)
	}
	close(c.closeCh)
	c.closer.Close()
}

// writeData sends p on stream id as data frames of at most maxFrame
// bytes, each one WebSocket message; fin marks the last.
func (c *spdyConn) writeData(id uint32, p []byte, fin bool) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for {
		n := min(len(p), c.maxFrame)
		var flags byte
		if fin && n == len(p) {
			flags = byte(spdy.DataFlagFin)
		}
		binary.BigEndian.PutUint32(c.hdr[:4], id)
		c.hdr[4], c.hdr[5], c.hdr[6], c.hdr[7] = flags, byte(n>>16), byte(n>>8), byte(n)
		if err := c.writeMessage(c.hdr[:], p[:n]); err != nil {
			return err
		}
		p = p[n:]
		if len(p) == 0 {
			return nil
		}
	}
}

// writeControl sends one control frame.
func (c *spdyConn) writeControl(f spdy.Frame) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.writeControlLocked(f)
}

// writeControlLocked: c.wmu is held (the framer's output buffer and its
// header compressor are the writers').
func (c *spdyConn) writeControlLocked(f spdy.Frame) error {
	c.wbuf.Reset()
	if err := c.framer.WriteFrame(f); err != nil {
		return fmt.Errorf("encode %T: %w", f, err)
	}
	return c.writeMessage(c.wbuf.Bytes(), nil)
}

// writeMessage writes a and b as one WebSocket message; c.wmu is held. A
// failed write ends the connection: the tunnel's framing is lost.
func (c *spdyConn) writeMessage(a, b []byte) error {
	if c.closed.Load() {
		return errConnClosed
	}
	w, err := c.out.NextWriter(gwebsocket.BinaryMessage)
	if err == nil {
		if _, err = w.Write(a); err == nil && len(b) > 0 {
			_, err = w.Write(b)
		}
		if cerr := w.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		c.shut() // lock order c.wmu, c.mu, a stream's mu, as in CreateStream
		return fmt.Errorf("write to the tunnel: %w", err)
	}
	return nil
}

// pings sends a PING every period until the connection ends, as
// k8s.io/streaming's connection does for kubectl; replies are not waited
// for (a dead tunnel shows as a read error).
func (c *spdyConn) pings(period time.Duration) {
	t := time.NewTicker(period)
	defer t.Stop()
	for id := uint32(1); ; id += 2 {
		select {
		case <-c.closeCh:
			return
		case <-t.C:
		}
		if id > maxClientStreamID {
			id = 1
		}
		if err := c.writeControl(&spdy.PingFrame{Id: id}); err != nil {
			return
		}
	}
}

// readLoop reads frames until the tunnel ends, then ends the connection.
func (c *spdyConn) readLoop() {
	err := c.readFrames()
	c.mu.Lock()
	c.readErr = err
	c.mu.Unlock()
	c.shut()
}

// readFrames parses frames off the tunnel and dispatches them; it returns
// the error that ended the connection (read error, protocol error, GOAWAY).
func (c *spdyConn) readFrames() error {
	for {
		h, err := c.br.Peek(spdyHeader)
		if err != nil {
			return err
		}
		if h[0]&0x80 == 0 {
			if err := c.readData(h); err != nil {
				return err
			}
			continue
		}
		f, err := c.framer.ReadFrame()
		if err != nil {
			return fmt.Errorf("read control frame: %w", err)
		}
		switch f := f.(type) {
		case *spdy.SynReplyFrame:
			if s := c.stream(uint32(f.StreamId)); s != nil {
				s.reply()
			}
		case *spdy.RstStreamFrame:
			if s := c.stream(uint32(f.StreamId)); s != nil {
				c.remove(s.id)
				s.remoteEnd(true)
			}
		case *spdy.PingFrame:
			if f.Id&1 == 0 { // the peer's: echo it (ours are odd)
				go c.writeControl(f)
			}
		case *spdy.SynStreamFrame:
			// Nothing in port-forward opens streams from the server side.
			go c.writeControl(&spdy.RstStreamFrame{StreamId: f.StreamId, Status: spdy.RefusedStream})
		case *spdy.GoAwayFrame:
			return fmt.Errorf("peer sent GOAWAY (status %d)", f.Status)
		}
		// SETTINGS, WINDOW_UPDATE, HEADERS: nothing to do (spdystream
		// does no flow control either).
	}
}

// readData reads one data frame whose header h was peeked, into its
// stream (or nowhere, for a stream already gone).
func (c *spdyConn) readData(h []byte) error {
	id := binary.BigEndian.Uint32(h[:4])
	flags := h[4]
	n := int(h[5])<<16 | int(h[6])<<8 | int(h[7])
	if id == 0 {
		return errors.New("data frame on stream 0")
	}
	if _, err := c.br.Discard(spdyHeader); err != nil {
		return err
	}
	s := c.stream(id)
	for n > 0 {
		k := min(n, len(c.scratch))
		if _, err := io.ReadFull(c.br, c.scratch[:k]); err != nil {
			return fmt.Errorf("read data frame of stream %d: %w", id, err)
		}
		if s != nil {
			s.push(c.scratch[:k])
		}
		n -= k
	}
	if flags&byte(spdy.DataFlagFin) != 0 && s != nil {
		s.remoteEnd(false)
	}
	return nil
}

// spdyStream is one stream of a spdyConn; it implements streamhttp.Stream.
type spdyStream struct {
	c       *spdyConn
	id      uint32
	headers http.Header
	replied chan struct{} // closed on SYN_REPLY, or when the stream ends before one

	mu        sync.Mutex
	cond      sync.Cond // on mu: data arrived, was read, or the stream ended
	buf       []byte    // received, unread from off
	off       int
	remoteFin bool // no more data will come (FIN, RST or the connection ended)
	localFin  bool // we sent FIN or RST: no more writes
	reset     bool // reset here: reads end now, held data dropped
	repliedOK bool
	refused   bool // ended before the reply

	// WriteTo's writer: data goes to it from the connection's reader,
	// without a hand-off to the goroutine in WriteTo.
	sink    io.Writer
	sinking bool  // a write to sink is under way (mu not held)
	sunk    int64 // bytes written to sink
	sinkErr error // the failed write's error: later data is dropped
}

func (s *spdyStream) reply() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.repliedOK {
		s.repliedOK = true
		close(s.replied)
	}
}

// push appends received data, waiting while the stream holds
// maxStreamBuffer unread bytes (the reader goroutine is the caller).
func (s *spdyStream) push(p []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.sinking || (s.sink == nil && len(s.buf)-s.off >= maxStreamBuffer && !s.reset && !s.c.closed.Load()) {
		s.cond.Wait() // shut, Reset, Read and WriteTo broadcast
	}
	if s.reset || s.sinkErr != nil {
		return // nobody will read it
	}
	if s.sink != nil {
		// WriteTo waits: write straight to its writer, in order (this is
		// the only goroutine writing once WriteTo flushed the buffer).
		s.sinkWrite(p)
		return
	}
	if s.off > 0 {
		s.buf = s.buf[:copy(s.buf, s.buf[s.off:])]
		s.off = 0
	}
	s.buf = append(s.buf, p...)
	s.cond.Broadcast()
}

// sinkWrite writes p to the sink without holding s.mu (a blocked local
// socket must not block Reset); s.mu is held on entry and on return, and
// sinking keeps a second write from starting meanwhile.
func (s *spdyStream) sinkWrite(p []byte) {
	w := s.sink
	s.sinking = true
	s.mu.Unlock()
	n, err := w.Write(p)
	s.mu.Lock()
	s.sinking = false
	s.sunk += int64(n)
	if err != nil {
		s.sinkErr = err
	}
	s.cond.Broadcast()
}

// remoteEnd: the peer will send no more (FIN, or with rst its RST_STREAM,
// after which nothing may be written either), or the connection ended.
func (s *spdyStream) remoteEnd(rst bool) {
	s.mu.Lock()
	s.remoteFin = true
	if rst {
		s.localFin = true
	}
	both := s.localFin
	if !s.repliedOK {
		s.repliedOK = true
		s.refused = true
		close(s.replied)
	}
	s.cond.Broadcast()
	s.mu.Unlock()
	if both {
		s.c.remove(s.id)
	}
}

// Read returns received data; after the peer's FIN (or RST, or the
// connection's end) and what came before it, io.EOF. A single Read returns
// at most what is buffered.
func (s *spdyStream) Read(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.off == len(s.buf) || s.reset {
		if s.reset || s.remoteFin {
			return 0, io.EOF
		}
		s.cond.Wait()
	}
	n := copy(p, s.buf[s.off:])
	s.off += n
	if s.off == len(s.buf) {
		// Drained: keep a small buffer for the next frame, not one a burst
		// grew (an idle keep-alive connection would hold it).
		if cap(s.buf) > readChunk {
			s.buf, s.off = nil, 0
		} else {
			s.buf, s.off = s.buf[:0], 0
		}
	}
	s.cond.Broadcast() // room for a waiting push
	return n, nil
}

// WriteTo writes what the stream receives to w until the peer's FIN (or
// RST, or the connection's end: then nil) or a Reset here (nil), or a
// write to w fails (its error). The connection's reader writes to w
// itself, so a received frame reaches w with no goroutine hand-off; a w
// that blocks holds up the connection's other streams, as a full stream
// buffer does. io.Copy(w, stream) uses it.
func (s *spdyStream) WriteTo(w io.Writer) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.sink != nil || s.sinking {
		return 0, fmt.Errorf("stream %d: WriteTo while another WriteTo runs", s.id)
	}
	held := s.buf[s.off:]
	s.buf, s.off = nil, 0
	s.sink, s.sunk, s.sinkErr = w, 0, nil
	if len(held) > 0 && !s.reset {
		s.sinkWrite(held) // what arrived before goes first; push waits on sinking
	}
	for s.sinking || (!s.reset && !s.remoteFin && s.sinkErr == nil) {
		s.cond.Wait()
	}
	s.sink = nil
	return s.sunk, s.sinkErr
}

// Write sends p as data frames.
func (s *spdyStream) Write(p []byte) (int, error) {
	s.mu.Lock()
	reset, fin := s.reset, s.localFin
	s.mu.Unlock()
	if reset {
		return 0, errStreamReset
	}
	if fin {
		return 0, fmt.Errorf("write on stream %d: closed for writing", s.id)
	}
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.c.writeData(s.id, p, false); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Close half-closes the stream: FIN, no more writes; reads go on.
func (s *spdyStream) Close() error {
	s.mu.Lock()
	if s.localFin {
		s.mu.Unlock()
		return fmt.Errorf("close stream %d: already closed for writing", s.id)
	}
	s.localFin = true
	both := s.remoteFin
	s.mu.Unlock()
	if both {
		s.c.remove(s.id)
	}
	return s.c.writeData(s.id, nil, true)
}

// Reset ends both directions: reads end now, and the peer gets RST_STREAM
// unless this end already sent FIN or RST (as spdystream does: a stream
// closed for writing is not reset on the wire).
func (s *spdyStream) Reset() error {
	s.mu.Lock()
	s.reset = true
	send := !s.localFin
	s.localFin = true
	s.buf, s.off = nil, 0
	s.cond.Broadcast()
	s.mu.Unlock()
	s.c.remove(s.id)
	if send {
		return s.c.writeControl(&spdy.RstStreamFrame{StreamId: spdy.StreamId(s.id), Status: spdy.Cancel})
	}
	return nil
}

// Headers are the headers the stream was created with.
func (s *spdyStream) Headers() http.Header { return s.headers }

// Identifier is the stream's SPDY stream ID.
func (s *spdyStream) Identifier() uint32 { return s.id }
