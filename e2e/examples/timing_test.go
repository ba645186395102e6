package examples_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// flaggerDefaultWebhookTimeout is the timeout Flagger gives a webhook
// that sets none (or one shorter than 2 characters).
const flaggerDefaultWebhookTimeout = 10 * time.Second

// runAllowance bounds one run of the Flagger example's scenario after
// its wait: the logs' 30 s background, 10 s of attack (1500 requests at
// 150/s) and the 3 s settle, with room. TestFlaggerGate checks it against
// the runs it makes.
const runAllowance = 80 * time.Second

// flaggerTiming is the Canary's analysis interval and, per webhook type,
// its timeout and the longest its mesh-verify command can take.
type flaggerTiming struct {
	interval time.Duration
	timeout  map[string]time.Duration
	bound    map[string]time.Duration
}

var durationFlag = regexp.MustCompile(`--(wait-ready|within) (\S+)`)

// readFlaggerTiming parses canary.yaml's timing.
func readFlaggerTiming(t *testing.T) flaggerTiming {
	t.Helper()
	canary := readDocs(t, filepath.Join(examplesDir(), "flagger", "canary.yaml"))[0]
	ft := flaggerTiming{timeout: map[string]time.Duration{}, bound: map[string]time.Duration{}}
	var err error
	if ft.interval, err = time.ParseDuration(str(canary, "spec", "analysis", "interval")); err != nil {
		t.Fatalf("canary.yaml: spec.analysis.interval: %v", err)
	}
	hooks, _ := dig(canary, "spec", "analysis", "webhooks").([]any)
	for _, h := range hooks {
		typ := str(h, "type")
		to := flaggerDefaultWebhookTimeout
		if s := str(h, "timeout"); len(s) >= 2 {
			if to, err = time.ParseDuration(s); err != nil {
				t.Fatalf("canary.yaml: webhook %s: timeout: %v", str(h, "name"), err)
			}
		}
		ft.timeout[typ] = to
		cmd := str(h, "metadata", "cmd")
		if !strings.HasPrefix(cmd, "mesh-verify ") {
			continue
		}
		bound := runAllowance
		for _, m := range durationFlag.FindAllStringSubmatch(cmd, -1) {
			d, err := time.ParseDuration(m[2])
			if err != nil {
				t.Fatalf("canary.yaml: webhook %s: --%s: %v", str(h, "name"), m[1], err)
			}
			bound += d // --within: no attempt starts after it, the last one still runs
		}
		ft.bound[typ] = bound
	}
	return ft
}

// TestFlaggerWebhookTiming checks the Canary against Flagger's timing
// rule: every webhook's timeout is shorter than the analysis interval,
// and long enough for the mesh-verify command it runs (a left-out timeout
// is Flagger's 10 s, far too short for a run).
func TestFlaggerWebhookTiming(t *testing.T) {
	ft := readFlaggerTiming(t)
	if len(ft.bound) == 0 {
		t.Fatal("canary.yaml: no webhook runs mesh-verify")
	}
	for typ, to := range ft.timeout {
		if to >= ft.interval {
			t.Errorf("webhook %s: timeout %s is not shorter than the analysis interval %s (Flagger: it must be)", typ, to, ft.interval)
		}
		if b, ok := ft.bound[typ]; ok && b > to {
			t.Errorf("webhook %s: its command can take %s (its waits plus one run), longer than the timeout %s", typ, b, to)
		}
	}
}

// attempts is the number of run directories a gate's command wrote
// (--converge writes one per attempt).
func attempts(t *testing.T, runs string) int {
	t.Helper()
	entries, err := os.ReadDir(runs)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(runs, e.Name(), "report.json")); err == nil {
			n++
		}
	}
	return n
}
