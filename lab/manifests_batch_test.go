package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestApplyAllOneKubectlThenEachToNameTheFault: a cluster's files go to
// one kubectl; when it fails they go again one at a time, so the error
// names the file at fault. kubectl is played by a function that fails on
// a marked document (the real kubectl applies the topologies in the
// lab-backed tests: TestLab, the e2e labs).
func TestApplyAllOneKubectlThenEachToNameTheFault(t *testing.T) {
	t.Parallel()
	doc := func(name string) applyDoc {
		return applyDoc{[]byte("kind: ConfigMap\nmetadata: {name: " + name + "}\n"), func(err error) error {
			return fmt.Errorf("file %s.yaml: %w", name, err)
		}}
	}
	for _, c := range []struct {
		name      string
		docs      []string
		bad       string // a stream holding this name fails
		flaky     bool   // only the first (batched) call fails
		wantCalls int
		wantErr   string
	}{
		{name: "none", wantCalls: 0},
		{name: "one", docs: []string{"a"}, wantCalls: 1},
		{name: "one failing, named", docs: []string{"a"}, bad: "a", wantCalls: 1, wantErr: "file a.yaml: refused a"},
		{name: "three in one kubectl", docs: []string{"a", "b", "c"}, wantCalls: 1},
		{name: "the second at fault is named", docs: []string{"a", "b", "c"}, bad: "b", wantCalls: 3, wantErr: "file b.yaml: refused b"},
		{name: "a passing failure", docs: []string{"a", "b"}, flaky: true, wantCalls: 3},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var docs []applyDoc
			for _, n := range c.docs {
				docs = append(docs, doc(n))
			}
			var streams [][]byte
			kubectl := func(_ context.Context, stdin []byte, args ...string) (string, error) {
				if strings.Join(args, " ") != "apply -f -" {
					t.Errorf("args %q", args)
				}
				streams = append(streams, stdin)
				if c.flaky && len(streams) == 1 {
					return "", errors.New("connection refused")
				}
				if c.bad != "" && bytes.Contains(stdin, []byte("name: "+c.bad+"}")) {
					return "", errors.New("refused " + c.bad)
				}
				return "", nil
			}
			err := applyAll(context.Background(), kubectl, docs, "apply", "-f", "-")
			if len(streams) != c.wantCalls {
				t.Errorf("%d kubectl calls, want %d", len(streams), c.wantCalls)
			}
			if (c.wantErr == "") != (err == nil) || err != nil && err.Error() != c.wantErr {
				t.Fatalf("err %v, want %q", err, c.wantErr)
			}
			// The first call carries every document, in order.
			if len(streams) > 0 {
				first := string(streams[0])
				at := 0
				for _, n := range c.docs {
					i := strings.Index(first[at:], "name: "+n+"}")
					if i < 0 {
						t.Fatalf("first stream lacks %s after offset %d:\n%s", n, at, first)
					}
					at += i
				}
				if len(c.docs) > 1 && strings.Count(first, "\n---\n") != len(c.docs) {
					t.Errorf("first stream's separators:\n%s", first)
				}
			}
		})
	}
}
