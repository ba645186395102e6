package portforward

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	"github.com/moby/spdystream"
	clientportforward "k8s.io/client-go/tools/portforward"
)

// spdyPeer is the far end of a test connection: moby/spdystream's server
// (what the kubelet's port-forward runs, behind the API server's
// WebSocket tunnel) over a real WebSocket on a loopback HTTP server. Its
// streams echo what they read and then close, unless a stream's "test"
// header asks for a reset ("reset") or refusal ("refuse").
type spdyPeer struct {
	conn chan *spdystream.Connection // the server end, once upgraded
}

func startSPDYPeer(t *testing.T) (*spdyPeer, *spdyConn) {
	t.Helper()
	p := &spdyPeer{conn: make(chan *spdystream.Connection, 1)}
	up := gwebsocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		sc, err := spdystream.NewConnection(clientportforward.NewTunnelingConnection("server", ws), true)
		if err != nil {
			ws.Close()
			return
		}
		p.conn <- sc
		sc.Serve(func(s *spdystream.Stream) {
			switch s.Headers().Get("test") {
			case "refuse":
				s.Refuse()
				return
			case "reset":
				s.SendReply(http.Header{}, false)
				s.Reset()
				return
			}
			s.SendReply(http.Header{}, false)
			go func() {
				io.Copy(s, s)
				s.Close()
			}()
		})
	}))
	t.Cleanup(srv.Close)
	ws, _, err := gwebsocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatalf("dial the test peer: %v", err)
	}
	tc := clientportforward.NewTunnelingConnection("client", ws)
	c, err := newSPDYConn(ws, tc, tc, 0)
	if err != nil {
		t.Fatalf("newSPDYConn: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return p, c
}

// Payloads of every size class round-trip unchanged through the real
// peer: empty, within one frame header, across the reader's chunk and
// buffer sizes, past the per-stream buffer bound, and split into frames
// of a few bytes.
func TestSPDYConnEchoesThroughSpdystream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		size     int
		maxFrame int // 0: SPDY's own limit
		write    int // bytes per Write; 0: all at once
	}{
		{"one byte", 1, 0, 0},
		{"header-sized", spdyHeader, 0, 0},
		{"a request", 180, 0, 0},
		{"one read chunk", readChunk, 0, 0},
		{"just over a chunk", readChunk + 1, 0, 0},
		{"over the read buffer", readBuffer + 3, 0, 0},
		{"over the stream buffer", maxStreamBuffer + readChunk + 5, 0, 0},
		{"tiny frames", 1000, 7, 0},
		{"bytewise writes", 300, 0, 1},
		{"odd writes, small frames", 50_000, 4096, 999},
	} {
		for _, viaWriteTo := range []bool{false, true} {
			name := tc.name
			if viaWriteTo {
				name += ", WriteTo"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				_, c := startSPDYPeer(t)
				if tc.maxFrame > 0 {
					c.maxFrame = tc.maxFrame
				}
				echoThroughPeer(t, c, tc.size, tc.write, viaWriteTo)
			})
		}
	}
}

// echoThroughPeer writes size bytes on a new stream of c, write bytes at
// a time (0: at once), half-closes, and reads the echo back by Read or by
// WriteTo.
func echoThroughPeer(t *testing.T, c *spdyConn, size, write int, viaWriteTo bool) {
	t.Helper()
	s, err := c.CreateStream(http.Header{"Streamtype": {"data"}})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	want := make([]byte, size)
	for i := range want {
		want[i] = byte(i*7 + i/251)
	}
	got := make(chan []byte, 1)
	go func() {
		if viaWriteTo {
			var b bytes.Buffer
			n, err := s.(io.WriterTo).WriteTo(&b)
			if err != nil || n != int64(b.Len()) {
				t.Errorf("WriteTo: %d, %v (wrote %d)", n, err, b.Len())
			}
			got <- b.Bytes()
			return
		}
		b, _ := io.ReadAll(s)
		got <- b
	}()
	step := write
	if step == 0 {
		step = len(want)
	}
	for i := 0; i < len(want); i += step {
		if _, err := s.Write(want[i:min(i+step, len(want))]); err != nil {
			t.Fatalf("Write at %d: %v", i, err)
		}
	}
	if err := s.Close(); err != nil { // FIN: the peer's echo ends and closes
		t.Fatalf("Close: %v", err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, want) {
			t.Fatalf("echo: %d bytes, want %d (first difference at %d)", len(b), len(want), firstDiff(b, want))
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no EOF after the peer's FIN")
	}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// Many streams at once on one connection keep their bytes apart.
func TestSPDYConnConcurrentStreams(t *testing.T) {
	t.Parallel()
	_, c := startSPDYPeer(t)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			s, err := c.CreateStream(http.Header{})
			if err != nil {
				errs <- err
				return
			}
			want := bytes.Repeat([]byte(fmt.Sprintf("stream %d;", i)), 500*(i+1))
			go func() {
				for j := 0; j < len(want); j += 1000 {
					s.Write(want[j:min(j+1000, len(want))])
				}
				s.Close()
			}()
			got, err := io.ReadAll(s)
			if err != nil || !bytes.Equal(got, want) {
				errs <- fmt.Errorf("stream %d: %d bytes, want %d (%v)", i, len(got), len(want), err)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// A stream the peer refuses fails CreateStream; one it resets reads EOF
// and refuses writes; the connection carries on.
func TestSPDYConnPeerResetAndRefuse(t *testing.T) {
	t.Parallel()
	_, c := startSPDYPeer(t)
	if _, err := c.CreateStream(http.Header{"Test": {"refuse"}}); !errors.Is(err, errStreamReset) {
		t.Errorf("refused stream: CreateStream error %v, want %v", err, errStreamReset)
	}
	s, err := c.CreateStream(http.Header{"Test": {"reset"}})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	if n, err := s.Read(make([]byte, 10)); n != 0 || err != io.EOF {
		t.Errorf("Read after the peer's reset: %d, %v; want 0, EOF", n, err)
	}
	if _, err := s.Write([]byte("x")); err == nil {
		t.Error("Write after the peer's reset succeeded")
	}
	ok, err := c.CreateStream(http.Header{})
	if err != nil {
		t.Fatalf("CreateStream after a reset: %v", err)
	}
	ok.Write([]byte("still up"))
	ok.Close()
	if b, _ := io.ReadAll(ok); string(b) != "still up" {
		t.Errorf("echo after a reset: %q", b)
	}
}

// A local Reset ends a blocked Read at once; Close ends the connection:
// CloseChan closes, reads end, new streams fail; and the peer's end of the
// connection (its pings) sees it.
func TestSPDYConnResetAndClose(t *testing.T) {
	t.Parallel()
	p, c := startSPDYPeer(t)
	s, err := c.CreateStream(http.Header{})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	read := make(chan error, 1)
	go func() {
		_, err := s.Read(make([]byte, 1))
		read <- err
	}()
	s.Reset()
	select {
	case err := <-read:
		if err != io.EOF {
			t.Errorf("Read after Reset: %v, want EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reset did not end a blocked Read")
	}
	sc := <-p.conn
	// The peer's PING (even ID) is answered.
	if _, err := sc.Ping(); err != nil {
		t.Errorf("peer's ping: %v", err)
	}
	s2, err := c.CreateStream(http.Header{})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	c.Close()
	select {
	case <-c.CloseChan():
	case <-time.After(10 * time.Second):
		t.Fatal("CloseChan not closed after Close")
	}
	if _, err := s2.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("Read after Close: %v, want EOF", err)
	}
	if _, err := c.CreateStream(http.Header{}); !errors.Is(err, errConnClosed) {
		t.Errorf("CreateStream after Close: %v, want %v", err, errConnClosed)
	}
	select {
	case <-sc.CloseChan():
	case <-time.After(10 * time.Second):
		t.Fatal("the peer did not see the connection close")
	}
}

// The peer closing the tunnel ends the connection here.
func TestSPDYConnPeerCloses(t *testing.T) {
	t.Parallel()
	p, c := startSPDYPeer(t)
	if _, err := c.CreateStream(http.Header{}); err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	(<-p.conn).Close()
	select {
	case <-c.CloseChan():
	case <-time.After(10 * time.Second):
		t.Fatal("CloseChan not closed after the peer closed")
	}
}

// messageLog records each WebSocket message the connection writes.
type messageLog struct {
	mu   sync.Mutex
	msgs [][]byte
}

type messageBuf struct {
	bytes.Buffer
	log *messageLog
}

func (m *messageBuf) Close() error {
	m.log.mu.Lock()
	m.log.msgs = append(m.log.msgs, bytes.Clone(m.Bytes()))
	m.log.mu.Unlock()
	return nil
}

func (l *messageLog) NextWriter(int) (io.WriteCloser, error) { return &messageBuf{log: l}, nil }

// Every message written is exactly one SPDY frame: a data frame's header
// says its stream, FIN and length, and the payload follows in the same
// message, split at maxFrame.
func TestSPDYConnWritesOneFramePerMessage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		size     int
		maxFrame int
		fin      bool
		want     []int // payload length of each message
	}{
		{"request", 120, 1 << 20, false, []int{120}},
		{"fin alone", 0, 1 << 20, true, []int{0}},
		{"exactly maxFrame", 64, 64, false, []int{64}},
		{"one over", 65, 64, true, []int{64, 1}},
		{"three frames", 130, 64, false, []int{64, 64, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			log := &messageLog{}
			c := &spdyConn{out: log, maxFrame: tc.maxFrame, closeCh: make(chan bool)}
			p := bytes.Repeat([]byte{0xab}, tc.size)
			if err := c.writeData(5, p, tc.fin); err != nil {
				t.Fatalf("writeData: %v", err)
			}
			if len(log.msgs) != len(tc.want) {
				t.Fatalf("%d messages, want %d", len(log.msgs), len(tc.want))
			}
			for i, m := range log.msgs {
				if len(m) != spdyHeader+tc.want[i] {
					t.Fatalf("message %d: %d bytes, want header + %d", i, len(m), tc.want[i])
				}
				id, flags, n := binary.BigEndian.Uint32(m[:4]), m[4], int(m[5])<<16|int(m[6])<<8|int(m[7])
				wantFin := tc.fin && i == len(tc.want)-1
				if id != 5 || n != tc.want[i] || (flags == 1) != wantFin || flags > 1 {
					t.Errorf("message %d: stream %d flags %#x length %d; want stream 5 fin %v length %d", i, id, flags, n, wantFin, tc.want[i])
				}
			}
		})
	}
}

// frame encodes a data frame.
func dataFrame(id uint32, fin bool, payload []byte) []byte {
	h := make([]byte, spdyHeader, spdyHeader+len(payload))
	binary.BigEndian.PutUint32(h, id)
	if fin {
		h[4] = 1
	}
	h[5], h[6], h[7] = byte(len(payload)>>16), byte(len(payload)>>8), byte(len(payload))
	return append(h, payload...)
}

// readConn runs a connection's reader over in (the tunnel's bytes) with
// streams 1 and 3 open, and returns what each stream read and the
// reader's error.
func readConn(t testing.TB, in io.Reader) (map[uint32][]byte, error) {
	c, err := initSPDYConn(&messageLog{}, in, io.NopCloser(nil))
	if err != nil {
		t.Fatal(err)
	}
	c.next = 5
	got := map[uint32][]byte{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, id := range []uint32{1, 3} {
		s := &spdyStream{c: c, id: id, replied: make(chan struct{})}
		s.cond.L = &s.mu
		c.streams[id] = s
		wg.Go(func() {
			b, _ := io.ReadAll(s)
			mu.Lock()
			got[id] = b
			mu.Unlock()
		})
	}
	c.readLoop()
	wg.Wait()
	return got, c.readErr
}

// Frames reach their streams however the tunnel splits the byte stream
// (a WebSocket message boundary can fall anywhere in a frame), a frame
// for an unknown stream is skipped, and FIN ends a stream's reads.
func TestSPDYConnReadsFramesAcrossBoundaries(t *testing.T) {
	t.Parallel()
	big := bytes.Repeat([]byte("0123456789abcdef"), (2*readChunk)/16+3)
	var in []byte
	in = append(in, dataFrame(1, false, []byte("HTTP/1.1 200 OK\r\n"))...)
	in = append(in, dataFrame(7, false, []byte("nobody's"))...)
	in = append(in, dataFrame(3, false, big)...)
	in = append(in, dataFrame(1, false, nil)...)
	in = append(in, dataFrame(1, true, []byte("\r\n"))...)
	in = append(in, dataFrame(3, true, nil)...)
	for _, tc := range []struct {
		name string
		r    func([]byte) io.Reader
	}{
		{"whole", func(b []byte) io.Reader { return bytes.NewReader(b) }},
		{"one byte at a time", func(b []byte) io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }},
		{"half reads", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := readConn(t, tc.r(in))
			if err != io.EOF {
				t.Errorf("reader ended with %v, want EOF", err)
			}
			if string(got[1]) != "HTTP/1.1 200 OK\r\n\r\n" {
				t.Errorf("stream 1 read %q", got[1])
			}
			if !bytes.Equal(got[3], big) {
				t.Errorf("stream 3 read %d bytes, want %d", len(got[3]), len(big))
			}
		})
	}
	// A frame cut short ends the connection with an error naming it.
	if _, err := readConn(t, bytes.NewReader(dataFrame(3, false, big)[:100])); err == nil || !strings.Contains(err.Error(), "stream 3") {
		t.Errorf("truncated frame: %v, want an error naming stream 3", err)
	}
	if _, err := readConn(t, bytes.NewReader(dataFrame(0, false, []byte("x")))); err == nil || !strings.Contains(err.Error(), "stream 0") {
		t.Errorf("data on stream 0: %v, want a protocol error", err)
	}
}

// FuzzSPDYConnRead: any bytes from the tunnel end the reader with an
// error (EOF at the latest) and no panic, and no stream gets more bytes
// than came in.
func FuzzSPDYConnRead(f *testing.F) {
	f.Add(dataFrame(1, true, []byte("hello")))
	f.Add(append(dataFrame(3, false, []byte("a")), dataFrame(1, true, nil)...))
	f.Add([]byte{0x80, 3, 0, 6, 0, 0, 0, 4, 0, 0, 0, 2})             // PING 2
	f.Add([]byte{0x80, 3, 0, 3, 0, 0, 0, 8, 0, 0, 0, 1, 0, 0, 0, 5}) // RST_STREAM 1
	f.Add([]byte{0x80, 3, 0, 7, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0}) // GOAWAY
	f.Add([]byte{0, 0, 0, 1, 0, 0xff, 0xff, 0xff})                   // a 16 MiB frame, cut short
	f.Fuzz(func(t *testing.T, in []byte) {
		type result struct {
			got map[uint32][]byte
			err error
		}
		done := make(chan result, 1)
		go func() {
			got, err := readConn(t, bytes.NewReader(in))
			done <- result{got, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(10 * time.Second):
			buf := make([]byte, 1<<20)
			t.Fatalf("reader still running after 10s on %x\n%s", in, buf[:runtime.Stack(buf, true)])
		}
		got, err := r.got, r.err
		if err == nil {
			t.Fatal("reader ended without an error")
		}
		if n := len(got[1]) + len(got[3]); n > len(in) {
			t.Fatalf("streams read %d bytes of %d in", n, len(in))
		}
	})
}

// A stream nobody reads holds at most maxStreamBuffer (plus one chunk)
// before the reader waits for it; resetting it lets the others go on.
func TestSPDYConnStreamBufferBound(t *testing.T) {
	t.Parallel()
	var in []byte
	in = append(in, dataFrame(1, false, make([]byte, 2*maxStreamBuffer))...)
	in = append(in, dataFrame(3, true, []byte("after"))...)
	c, err := initSPDYConn(&messageLog{}, bytes.NewReader(in), io.NopCloser(nil))
	if err != nil {
		t.Fatal(err)
	}
	var st [2]*spdyStream
	for i, id := range []uint32{1, 3} {
		st[i] = &spdyStream{c: c, id: id, replied: make(chan struct{})}
		st[i].cond.L = &st[i].mu
		c.streams[id] = st[i]
	}
	c.next = 5
	go c.readLoop()
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(st[1])
		got <- b
	}()
	held := func() int {
		st[0].mu.Lock()
		defer st[0].mu.Unlock()
		return len(st[0].buf) - st[0].off
	}
	deadline := time.Now().Add(10 * time.Second)
	for held() < maxStreamBuffer && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond) // polling the reader's progress: there is no event to wait on
	}
	select {
	case b := <-got:
		t.Fatalf("stream 3 read %q while stream 1's frame was still being delivered", b)
	default:
	}
	if n := held(); n < maxStreamBuffer || n > maxStreamBuffer+readChunk {
		t.Fatalf("stream 1 holds %d bytes, want between %d and %d", n, maxStreamBuffer, maxStreamBuffer+readChunk)
	}
	st[0].Reset()
	select {
	case b := <-got:
		if string(b) != "after" {
			t.Errorf("stream 3 read %q, want %q", b, "after")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("stream 3 still blocked after stream 1 was reset")
	}
}

// failAfter accepts n bytes, then fails.
type failAfter struct {
	n   int
	got bytes.Buffer
}

var errSinkFull = errors.New("sink full")

func (f *failAfter) Write(p []byte) (int, error) {
	if f.got.Len()+len(p) > f.n {
		k := f.n - f.got.Len()
		f.got.Write(p[:k])
		return k, errSinkFull
	}
	return f.got.Write(p)
}

// WriteTo gets what was buffered before it began, then what arrives, in
// order; a failing writer ends it with the writer's error and the
// connection's other streams carry on; a Reset ends it.
func TestSPDYConnWriteTo(t *testing.T) {
	t.Parallel()
	_, c := startSPDYPeer(t)
	// Buffered first: the peer echoes before WriteTo starts.
	s, err := c.CreateStream(http.Header{})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	s.Write([]byte("early;"))
	first := make([]byte, 1)
	if _, err := io.ReadFull(s, first); err != nil { // the echo has arrived
		t.Fatalf("Read: %v", err)
	}
	done := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		s.(io.WriterTo).WriteTo(&b)
		done <- b.String()
	}()
	s.Write([]byte("late"))
	s.Close()
	select {
	case got := <-done:
		if string(first)+got != "early;late" {
			t.Errorf("Read then WriteTo: %q, want %q", string(first)+got, "early;late")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WriteTo did not end after the peer's FIN")
	}

	// A failing writer.
	s2, err := c.CreateStream(http.Header{})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	sink := &failAfter{n: 10}
	res := make(chan error, 1)
	go func() {
		_, err := s2.(io.WriterTo).WriteTo(sink)
		res <- err
	}()
	s2.Write(bytes.Repeat([]byte("x"), 25))
	select {
	case err := <-res:
		if !errors.Is(err, errSinkFull) || sink.got.Len() != 10 {
			t.Errorf("WriteTo into a failing writer: %v after %d bytes, want %v after 10", err, sink.got.Len(), errSinkFull)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WriteTo did not end when its writer failed")
	}
	s2.Write([]byte("more, dropped"))
	echoThroughPeer(t, c, 1000, 0, true) // the connection's reader is not stuck

	// Reset ends a waiting WriteTo.
	s3, err := c.CreateStream(http.Header{})
	if err != nil {
		t.Fatalf("CreateStream: %v", err)
	}
	go func() {
		_, err := s3.(io.WriterTo).WriteTo(io.Discard)
		res <- err
	}()
	s3.Reset()
	select {
	case err := <-res:
		if err != nil {
			t.Errorf("WriteTo after Reset: %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Reset did not end WriteTo")
	}
}
