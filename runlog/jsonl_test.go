package runlog

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/attribution"
)

var hostile = []string{
	"", "c1", `"quoted"`, `back\slash`, "new\nline\r\n", "tab\tform\fbell\bnul\x00esc\x1b\x7f",
	"<script>alert('x')</script>", "a&b>c", "\u2028\u2029", "é日本語😀", "\xff\xfe", "ok\xc3(", "\xed\xa0\x80 surrogate",
	"\xf4\x90\x80\x80 beyond U+10FFFF", strings.Repeat("\"<", 5000),
}

func TestJSONStringIsEncodingJSONs(t *testing.T) {
	for _, s := range hostile {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: %s, encoding/json %s", s, got, want)
		}
	}
}

func FuzzJSONString(f *testing.F) {
	for _, s := range hostile {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := appendJSONString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("%q: %s, encoding/json %s", s, got, want)
		}
	})
}

// What a string reads back as: itself when valid UTF-8, else what
// encoding/json makes of it (U+FFFD for each invalid byte), as in the report.
func jsonRoundTrip(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

func TestAttributionLineRoundTrip(t *testing.T) {
	for i, s := range hostile {
		a := Attribution{Seq: uint64(i) * 1e15, RequestID: s, ConnID: uint64(i), Source: SourceBody, Code: 503, OK: i%2 == 0,
			Identity: attribution.Identity{Cluster: s, Pod: s + "-pod", Version: "v" + s, Service: s}}
		keys := 10
		if i%3 == 0 {
			a.Unread, keys = true, 11
		}
		line := appendAttribution(nil, &a)

		if bytes.Count(line, []byte("\n")) != 1 || line[len(line)-1] != '\n' {
			t.Fatalf("%q: not one line: %q", s, line)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil || len(m) != keys {
			t.Fatalf("%q: %v, %d keys: %s", s, err, len(m), line)
		}
		got, err := ParseAttribution(line[:len(line)-1])
		if err != nil {
			t.Fatal(err)
		}
		want := a
		want.RequestID = jsonRoundTrip(a.RequestID)
		want.Cluster, want.Pod, want.Version, want.Service = jsonRoundTrip(a.Cluster), jsonRoundTrip(a.Pod), jsonRoundTrip(a.Version), jsonRoundTrip(a.Service)
		if got != want {
			t.Errorf("%q:\n got %+v\nwant %+v", s, got, want)
		}
	}
}

func seedLines(f *testing.F) []byte {
	data, err := os.ReadFile("testdata/attribution.jsonl")
	if err != nil {
		f.Fatal(err)
	}
	return data
}

func FuzzParseAttribution(f *testing.F) {
	data := seedLines(f)
	for _, line := range bytes.Split(bytes.TrimSuffix(data, []byte("\n")), []byte("\n")) {
		f.Add(line)
	}
	f.Add(data) // the whole file, for the line reader
	f.Add([]byte("null"))
	f.Add([]byte(`{"seq":-1}`))
	f.Add([]byte(`{"seq":1}{"seq":2}`))
	f.Add([]byte(`{"code":70000}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		a, err := ParseAttribution(in)
		if err == nil {
			if !json.Valid(bytes.TrimSpace(in)) {
				t.Fatalf("accepted invalid JSON %q", in)
			}
			// Parsed strings are valid UTF-8: they survive a second trip.
			line := appendAttribution(nil, &a)
			b, err := ParseAttribution(line[:len(line)-1])
			if err != nil || b != a {
				t.Fatalf("%q -> %+v -> %q -> %+v, %v", in, a, line, b, err)
			}
		}
		// As a file: every whole line the reader returns parses as above,
		// and lines are never longer than the input.
		n := 0
		_ = ReadAttribution(bytes.NewReader(in), func(Attribution) error { n++; return nil })
		if n > bytes.Count(in, []byte("\n")) {
			t.Fatalf("%d lines read from %d newlines", n, bytes.Count(in, []byte("\n")))
		}
	})
}

func TestReadAttributionTestdata(t *testing.T) {
	f, err := os.Open("testdata/attribution.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var got []Attribution
	if err := ReadAttribution(bufio.NewReader(f), func(a Attribution) error { got = append(got, a); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[2].Cluster != "c\"2\"\n<script>alert(1)</script>" || got[2].Pod != "p\\od\u2028\x00" ||
		got[3].Seq != 3 || got[3].Code != 200 || !got[3].OK || got[4].ConnID != 1<<64-1 || got[4].Cluster != "😀" {
		t.Errorf("%+v", got)
	}
	// A last line without its newline is a cut, not a line.
	err = ReadAttribution(strings.NewReader(`{"seq":1}`+"\n"+`{"seq":2}`), func(Attribution) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "cut at line 2") {
		t.Errorf("cut last line: %v", err)
	}
	err = ReadAttribution(strings.NewReader("{\"seq\":1}\n[]\n"), func(Attribution) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("an array line: %v", err)
	}
}
