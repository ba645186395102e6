package runlog

import (
	"bytes"
	"encoding/gob"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"sync"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// resultEncoder writes results as the gob stream vegeta's NewEncoder
// writes (what `vegeta attack` prints), without the body and headers.
//
// gob allocates for every value (time.Time goes through GobEncode), so the
// values are encoded here by hand, per the gob wire format: the type
// descriptors the real encoder sends first are captured from it once, and
// every result is then one message, [length][type id][fields][0]. Should a
// vegeta release change Result, the layout check fails and the stream is
// written by gob itself: slower, never different. The tests compare both
// byte for byte with gob's own output.
type resultEncoder struct {
	hdr     *gobHeader // nil: encode with gob
	sent    bool
	payload []byte
	gob     *gob.Encoder
}

// gobHeader is what gob sends before the first Result: the type
// descriptors, then, in every value message, Result's type id.
type gobHeader struct {
	types  []byte
	typeID []byte
}

var header = sync.OnceValue(func() *gobHeader {
	if !resultLayoutKnown() {
		return nil
	}
	h, err := captureHeader()
	if err != nil {
		return nil
	}
	return h
})

// resultFields is vegeta.Result's layout the hand encoder knows: gob
// numbers the fields in declaration order.
var resultFields = []struct {
	name string
	typ  reflect.Type
}{
	{"Attack", reflect.TypeFor[string]()},
	{"Seq", reflect.TypeFor[uint64]()},
	{"Code", reflect.TypeFor[uint16]()},
	{"Timestamp", reflect.TypeFor[time.Time]()},
	{"Latency", reflect.TypeFor[time.Duration]()},
	{"BytesOut", reflect.TypeFor[uint64]()},
	{"BytesIn", reflect.TypeFor[uint64]()},
	{"Error", reflect.TypeFor[string]()},
	{"Body", reflect.TypeFor[[]byte]()},
	{"Method", reflect.TypeFor[string]()},
	{"URL", reflect.TypeFor[string]()},
	{"Headers", reflect.TypeFor[http.Header]()},
}

func resultLayoutKnown() bool {
	t := reflect.TypeFor[vegeta.Result]()
	if t.NumField() != len(resultFields) {
		return false
	}
	for i, f := range resultFields {
		sf := t.Field(i)
		if sf.Name != f.name || sf.Type != f.typ {
			return false
		}
	}
	return true
}

// captureHeader lets gob encode an empty Result and splits its output into
// the type descriptors and the value message [len][type id][0].
func captureHeader() (*gobHeader, error) {
	var buf bytes.Buffer
	if err := vegeta.NewEncoder(&buf).Encode(&vegeta.Result{}); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	start := 0
	for {
		n, w, err := readUint(b[start:])
		if err != nil || n > uint64(len(b)-start-w) {
			return nil, errors.New("runlog: unexpected gob framing")
		}
		end := start + w + int(n)
		if end == len(b) {
			payload := b[start+w : end]
			if len(payload) < 2 || payload[len(payload)-1] != 0 {
				return nil, errors.New("runlog: unexpected gob value message")
			}
			return &gobHeader{types: bytes.Clone(b[:start]), typeID: bytes.Clone(payload[:len(payload)-1])}, nil
		}
		start = end
	}
}

// readUint decodes one gob unsigned integer; w is its width in bytes.
func readUint(b []byte) (x uint64, w int, err error) {
	if len(b) == 0 {
		return 0, 0, io.ErrUnexpectedEOF
	}
	if b[0] <= 0x7f {
		return uint64(b[0]), 1, nil
	}
	n := -int(int8(b[0]))
	if n > 8 || len(b) < 1+n {
		return 0, 0, errors.New("runlog: bad gob uint")
	}
	for _, c := range b[1 : 1+n] {
		x = x<<8 | uint64(c)
	}
	return x, 1 + n, nil
}

func newResultEncoder(w io.Writer) *resultEncoder {
	e := &resultEncoder{hdr: header()}
	if e.hdr == nil {
		e.gob = gob.NewEncoder(w)
	}
	return e
}

// encode writes r, without its body and headers, to w: w must be the
// writer the encoder was made for when it falls back to gob.
func (e *resultEncoder) encode(w io.Writer, r *vegeta.Result) error {
	if e.hdr == nil {
		body, hdr := r.Body, r.Headers
		r.Body, r.Headers = nil, nil
		err := e.gob.Encode(r)
		r.Body, r.Headers = body, hdr
		return err
	}
	// The payload goes after room for its length, which is then put
	// right before it: one write, no allocation.
	const room = 9
	if cap(e.payload) < room {
		e.payload = make([]byte, room, 512)
	}
	p, err := e.appendValue(e.payload[:room], r)
	if err != nil {
		return err
	}
	e.payload = p
	var lb [room]byte
	l := appendUint(lb[:0], uint64(len(p)-room))
	msg := p[room-len(l):]
	copy(msg, l)
	if !e.sent {
		if _, err := w.Write(e.hdr.types); err != nil {
			return err
		}
		e.sent = true
	}
	_, err = w.Write(msg)
	return err
}

// appendValue appends one value message's payload: the type id, the
// non-zero fields as (field delta, value) pairs and the terminating 0.
func (e *resultEncoder) appendValue(b []byte, r *vegeta.Result) ([]byte, error) {
	b = append(b, e.hdr.typeID...)
	last := -1
	field := func(i int) {
		b = appendUint(b, uint64(i-last))
		last = i
	}
	if r.Attack != "" {
		field(0)
		b = appendString(b, r.Attack)
	}
	if r.Seq != 0 {
		field(1)
		b = appendUint(b, r.Seq)
	}
	if r.Code != 0 {
		field(2)
		b = appendUint(b, uint64(r.Code))
	}
	if r.Timestamp != (time.Time{}) {
		field(3)
		// GobEncode is MarshalBinary: sent as its length and bytes.
		var tb [24]byte
		t, err := r.Timestamp.AppendBinary(tb[:0])
		if err != nil {
			return b, fmt.Errorf("runlog: timestamp: %w", err)
		}
		b = appendUint(b, uint64(len(t)))
		b = append(b, t...)
	}
	if r.Latency != 0 {
		field(4)
		b = appendInt(b, int64(r.Latency))
	}
	if r.BytesOut != 0 {
		field(5)
		b = appendUint(b, r.BytesOut)
	}
	if r.BytesIn != 0 {
		field(6)
		b = appendUint(b, r.BytesIn)
	}
	if r.Error != "" {
		field(7)
		b = appendString(b, r.Error)
	}
	// 8 Body: not written.
	if r.Method != "" {
		field(9)
		b = appendString(b, r.Method)
	}
	if r.URL != "" {
		field(10)
		b = appendString(b, r.URL)
	}
	// 11 Headers: not written.
	return append(b, 0), nil
}

// appendUint is gob's unsigned integer: one byte below 128, else the
// negated byte count and the big-endian bytes.
func appendUint(b []byte, x uint64) []byte {
	if x <= 0x7f {
		return append(b, byte(x))
	}
	n := 0
	for y := x; y > 0; y >>= 8 {
		n++
	}
	b = append(b, byte(-n))
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(x>>(8*i)))
	}
	return b
}

// appendInt is gob's signed integer: the sign in the low bit.
func appendInt(b []byte, i int64) []byte {
	var x uint64
	if i < 0 {
		x = uint64(^i<<1) | 1
	} else {
		x = uint64(i << 1)
	}
	return appendUint(b, x)
}

func appendString(b []byte, s string) []byte {
	return append(appendUint(b, uint64(len(s))), s...)
}
