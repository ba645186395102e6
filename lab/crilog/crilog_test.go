package crilog

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestWriteStreamsAndSanitizes(t *testing.T) {
	path := filepath.Join(t.TempDir(), "logs", "c1", "ns_pod_app.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []struct{ stream, msg string }{
		{Stdout, "plain"},
		{Stderr, "[INFO] Starting gunicorn"},
		{Stdout, "a\ttab stays\nnewline and \x1b escape do not"},
		{Stdout, ""},
	} {
		if err := l.Write(w.stream, w.msg); err != nil {
			t.Fatalf("Write(%s, %q): %v", w.stream, w.msg, err)
		}
	}
	if err := l.Write("stdin", "x"); err == nil || !strings.Contains(err.Error(), `unknown stream "stdin"`) {
		t.Errorf("Write to stdin: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.Line("after close"); err == nil {
		t.Error("Line after Close succeeded")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	ts := `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z`
	want := []*regexp.Regexp{
		regexp.MustCompile(`^` + ts + ` stdout F plain$`),
		regexp.MustCompile(`^` + ts + ` stderr F \[INFO\] Starting gunicorn$`),
		regexp.MustCompile(`^` + ts + " stdout F a\ttab stays\\?newline and \\? escape do not$"),
		regexp.MustCompile(`^` + ts + ` stdout F $`),
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), b)
	}
	for i, re := range want {
		if !re.MatchString(lines[i]) {
			t.Errorf("line %d %q does not match %s", i, lines[i], re)
		}
	}
}

// Output lines are records as a container runtime writes them: a line
// longer than chunk is split into partial records whose messages,
// joined, are the line; a last line without a newline is a full record.
func TestCopyKeepsLongLines(t *testing.T) {
	const chunk = 16 << 10
	path := filepath.Join(t.TempDir(), "x.log")
	l, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("0123456789", chunk/10*2+7) // over two chunks
	l.Copy(strings.NewReader("first\n"+long+"\n\ncut"), Stderr, chunk)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lines []string
	var partial strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 4*chunk)
	var tags []string
	for sc.Scan() {
		fields := strings.SplitN(sc.Text(), " ", 4)
		if len(fields) != 4 || fields[1] != Stderr {
			t.Fatalf("record %q", sc.Text())
		}
		tags = append(tags, fields[2])
		partial.WriteString(fields[3])
		if fields[2] == "F" {
			lines = append(lines, partial.String())
			partial.Reset()
		}
	}
	if want := []string{"first", long, "", "cut"}; strings.Join(lines, "|") != strings.Join(want, "|") {
		t.Errorf("lines joined from the records differ: %d lines, want %d", len(lines), len(want))
	}
	if got := strings.Join(tags, ""); got != "FPPFFF" {
		t.Errorf("record tags %s, want FPPFFF", got)
	}
}
