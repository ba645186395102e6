package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Every bad fixture of the scenarios package, through the built binary: the
// exit code is 4 and each expected problem is printed as FILE:LINE:COL:
// FIELD: MESSAGE.
func TestValidateBadScenarios(t *testing.T) {
	files, err := filepath.Glob("../scenarios/testdata/bad/*.yaml")
	if err != nil || len(files) < 15 {
		t.Fatalf("want at least 15 bad fixtures, found %d (%v)", len(files), err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			wants := wantLines(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			r := runBinary(t, ctx, "validate", f)
			if r.Code != 4 {
				t.Fatalf("exit %d, want 4\n%s", r.Code, r.Stderr)
			}
			for _, w := range wants {
				line, rest, _ := strings.Cut(w, ":")
				prefix := f + ":" + line + ":"
				field, msg, hasField := strings.Cut(strings.TrimSpace(rest), ": ")
				found := false
				for _, l := range strings.Split(r.Stderr, "\n") {
					if !strings.HasPrefix(l, prefix) {
						continue
					}
					if hasField && strings.Contains(l, ": "+field+": ") && strings.Contains(l, msg) ||
						!hasField && strings.Contains(l, strings.TrimSpace(rest)) {
						found = true
					}
				}
				if !found {
					t.Errorf("want %q, got:\n%s", w, r.Stderr)
				}
			}
		})
	}
}

func TestValidateGoodScenarios(t *testing.T) {
	files, _ := filepath.Glob("../scenarios/testdata/good/*.yaml")
	if len(files) == 0 {
		t.Fatal("no good fixtures")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	r := runBinary(t, ctx, append([]string{"validate"}, files...)...)
	if r.Code != 0 {
		t.Fatalf("exit %d: %s", r.Code, r.Stderr)
	}
	if n := strings.Count(r.Stdout, ": ok"); n != len(files) {
		t.Errorf("%d ok lines for %d files:\n%s", n, len(files), r.Stdout)
	}
}

func wantLines(t *testing.T, f string) []string {
	t.Helper()
	fh, err := os.Open(f)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	var out []string
	sc := bufio.NewScanner(fh)
	for sc.Scan() {
		if w, ok := strings.CutPrefix(sc.Text(), "# want: "); ok {
			out = append(out, w)
		}
	}
	if len(out) == 0 {
		t.Fatalf("%s has no # want: line", f)
	}
	return out
}
