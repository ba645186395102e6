package portforward

import (
	"bytes"
	"net"
	"testing"
)

// messageConn records each Write as one message: the WebSocket tunnel's
// message boundaries, which a real socket would not show.
type messageConn struct {
	net.Conn
	msgs [][]byte
}

func (m *messageConn) Write(p []byte) (int, error) {
	m.msgs = append(m.msgs, bytes.Clone(p))
	return len(p), nil
}

// frameConn writes each SPDY frame, however the framer splits it, as one
// message, and the byte stream is unchanged.
func TestFrameConnWritesWholeFrames(t *testing.T) {
	frame := func(first byte, payload string) []byte {
		n := len(payload)
		return append([]byte{first, 0, 0, 1, 0, byte(n >> 16), byte(n >> 8), byte(n)}, payload...)
	}
	frames := [][]byte{frame(0x80, "syn-stream headers"), frame(0, "GET / HTTP/1.1\r\n\r\n"), frame(0, ""),
		frame(0, string(bytes.Repeat([]byte("x"), 70_000)))}
	var stream []byte
	for _, f := range frames {
		stream = append(stream, f...)
	}
	for _, tc := range []struct {
		name  string
		split []int // write sizes, repeated
	}{
		{"as the framer writes (4, 4, payload)", nil},
		{"bytewise", []int{1}},
		{"odd", []int{3, 5, 7, 11}},
		{"all at once", []int{len(stream)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &messageConn{}
			c := &frameConn{Conn: rec}
			var writes [][]byte
			if tc.split == nil {
				for _, f := range frames {
					writes = append(writes, f[:4], f[4:8], f[8:])
				}
			} else {
				for i, k := 0, 0; i < len(stream); k++ {
					n := min(tc.split[k%len(tc.split)], len(stream)-i)
					writes, i = append(writes, stream[i:i+n]), i+n
				}
			}
			for _, w := range writes {
				if n, err := c.Write(w); n != len(w) || err != nil {
					t.Fatalf("Write: %d, %v", n, err)
				}
			}
			if len(rec.msgs) != len(frames) {
				t.Fatalf("%d messages for %d frames", len(rec.msgs), len(frames))
			}
			for i, m := range rec.msgs {
				if !bytes.Equal(m, frames[i]) {
					t.Errorf("message %d: %d bytes, want frame %d's %d", i, len(m), i, len(frames[i]))
				}
			}
		})
	}
}
