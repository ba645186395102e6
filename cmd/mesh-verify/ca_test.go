package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/exitcode"
	"github.com/mesh-verify/mesh-verify/internal/certtest"
	"github.com/mesh-verify/mesh-verify/measure"
)

// validate and run refuse the same target.tls.ca files, each with an
// error naming the file, and never echo a key: a CA file that does not
// exist, holds a private key, is over measure.MaxCAFileBytes, or is not a
// regular file (a FIFO with no writer, /dev/zero) — none of which blocks.
func TestTargetCAFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cert, key := certtest.Pair(t)
	keyLine := certtest.KeyLine(key)
	put := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	fifo := filepath.Join(dir, "ca.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat(cert, measure.MaxCAFileBytes/len(cert)+1)
	for _, tc := range []struct {
		name, ca string
		want     string // "" for ok
	}{
		{"a certificate", put("good.pem", cert), ""},
		{"missing", filepath.Join(dir, "absent.pem"), "no such file or directory"},
		{"with its private key", put("keyed.pem", append(append([]byte{}, cert...), key...)), "PEM block 2 (PRIVATE KEY) holds a private key: a CA file needs only the certificates"},
		{"over the limit", put("big.pem", big), "is larger than 512 KiB"},
		{"a FIFO", fifo, "is not a regular file (a FIFO)"},
		{"/dev/zero", "/dev/zero", "is not a regular file (a character device)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sc := filepath.Join(t.TempDir(), "s.yaml")
			if err := os.WriteFile(sc, []byte(`apiVersion: mesh-verify.io/v1alpha1
kind: Scenario
metadata: {name: ca}
clusters: [{name: c1}]
target: {url: "https://127.0.0.1:1/", tls: {ca: `+tc.ca+`}}
attack: {rate: 10/s, requests: 1}
attribution: {preset: tutorial}
expect: [{successRate: {atLeast: 99%}}]
`), 0o600); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{{"validate", sc}, {"run", sc, "--out", t.TempDir(), "-q"}} {
				var out, errb bytes.Buffer
				start := time.Now()
				code := execute(args, &out, &errb)
				if d := time.Since(start); d > 10*time.Second {
					t.Errorf("%s took %s", args[0], d)
				}
				if strings.Contains(out.String()+errb.String(), keyLine) {
					t.Fatalf("%s echoes the private key:\n%s%s", args[0], out.String(), errb.String())
				}
				if tc.want == "" {
					if args[0] == "validate" && (code != exitcode.Pass || !strings.Contains(out.String(), sc+": ok")) {
						t.Errorf("validate: exit %d:\n%s%s", code, out.String(), errb.String())
					}
					continue
				}
				if code != exitcode.InvalidInput || !strings.Contains(errb.String(), "target.tls.ca: ") ||
					!strings.Contains(errb.String(), tc.ca) || !strings.Contains(errb.String(), tc.want) {
					t.Errorf("%s: exit %d, stderr %q; want %d and an error naming %s saying %q", args[0], code, errb.String(), exitcode.InvalidInput, tc.ca, tc.want)
				}
			}
		})
	}
}
