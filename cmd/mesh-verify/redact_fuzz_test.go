package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// tokenChars are the characters of the credentials the fuzz target plants.
const tokenChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._~-"

// FuzzNoCredentialInAnyOutput plants a password (user info) and a token
// (query) in a target URL made malformed by junk in its host, path or
// query, and runs validate, validate --set, plan, run (-o json and -o md,
// against a closed port, with a step summary) and report (terminal and
// md) on each run directory: neither secret may appear
// on stdout, stderr, in any file of the run directory or in the step
// summary, whatever error quotes the URL.
func FuzzNoCredentialInAnyOutput(f *testing.F) {
	for _, s := range []struct {
		junk  string
		where uint8
	}{
		{"%zz", 0}, {"", 0}, {"a b", 0}, {"\x7f", 0}, {"x\"y", 0}, {"<a>", 2}, {"%", 2}, {":9x", 1}, {"[::1", 1}, {"\n", 0}, {"\\", 2}, {"`'", 0},
	} {
		f.Add("hunter2pass", "tok3nsecret", s.junk, s.where)
	}
	f.Fuzz(func(t *testing.T, pw, tok, junk string, where uint8) {
		if len(pw) < 6 || len(tok) < 6 || strings.Trim(pw+tok, tokenChars) != "" || !utf8.ValidString(junk) ||
			strings.ContainsAny(junk, "#\x00") || len(junk) > 64 {
			return
		}
		pw, tok = "PW"+pw, "TK"+tok // no output says these by chance
		host, path, query := "127.0.0.1:1", "/ping", "token="+tok+"&x=1"
		switch where % 3 {
		case 0:
			path += junk
		case 1:
			host += junk
		case 2:
			query += junk
		}
		raw := "http://alice:" + pw + "@" + host + path + "?" + query
		quoted, _ := json.Marshal(raw) // a JSON string is a YAML one
		dir := t.TempDir()
		file := filepath.Join(dir, "s.yaml")
		scenario := "apiVersion: mesh-verify.io/v1alpha1\nkind: Scenario\nmetadata: {name: leak}\nclusters: [{name: c1}]\n" +
			"target:\n  url: " + string(quoted) + "\nattack: {rate: 10/s, duration: 1s}\nattribution: {preset: tutorial}\nexpect:\n  - reached: {buckets: [c1]}\n"
		if err := os.WriteFile(file, []byte(scenario), 0o644); err != nil {
			t.Fatal(err)
		}
		summary := filepath.Join(dir, "step-summary.md")
		t.Setenv("GITHUB_STEP_SUMMARY", summary)
		out := filepath.Join(dir, "runs")
		runs := [][]string{
			{"validate", file},
			{"validate", file, "--set", "target.url=" + raw},
			{"validate", file, "--set", "target.url: " + raw},
			{"validate", file, "--set", "attack.rate=" + raw},
			{"plan", file},
		}
		if where%3 != 1 {
			// A host of junk would be looked up in DNS: only validated.
			runs = append(runs, []string{"run", file, "--out", out, "-o", "json", "--quiet"},
				[]string{"run", file, "--out", out, "-o", "md", "--quiet"})
		}
		check := func(args []string) {
			var stdout, stderr bytes.Buffer
			execute(args, &stdout, &stderr)
			for _, o := range []struct{ name, text string }{{"stdout", stdout.String()}, {"stderr", stderr.String()}} {
				if leak(o.text, pw, tok) {
					t.Errorf("%q: %s keeps a credential of %q:\n%s", args, o.name, raw, o.text)
				}
			}
		}
		for _, args := range runs {
			check(args)
		}
		// report reads the run directories back: its outputs too.
		dirs, _ := filepath.Glob(filepath.Join(out, "*"))
		for _, d := range dirs {
			check([]string{"report", d})
			check([]string{"report", d, "-o", "md"})
		}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || p == file {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if leak(string(b), pw, tok) {
				t.Errorf("%s keeps a credential of %q:\n%s", p, raw, b)
			}
			return nil
		})
	})
}

func leak(text string, secrets ...string) bool {
	for _, s := range secrets {
		if strings.Contains(text, s) {
			return true
		}
	}
	return false
}
