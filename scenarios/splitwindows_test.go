package scenarios

import (
	"strings"
	"testing"
	"time"
)

// split.windows: fixed or following, each limit refused past its bound
// with the field named.
func TestSplitWindows(t *testing.T) {
	t.Parallel()
	const vs = "fromMesh: {virtualService: demo/reviews}"
	cases := []struct {
		name, expect string
		want         string // error substring; "" means it loads
	}{
		{"fixed", "  - split: {by: cluster, weights: {c1: 1, c2: 1}, windows: {every: 10s}}\n", ""},
		{"follow", "  - split: {by: version, " + vs + ", windows: {follow: true, poll: 1s, settle: 3s}}\n", ""},
		{"follow, no settle", "  - split: {by: version, " + vs + ", windows: {follow: true, settle: 0s}}\n", ""},
		{"neither", "  - split: {by: version, " + vs + ", windows: {}}\n", "expect[0].split.windows: set every"},
		{"both", "  - split: {by: version, " + vs + ", windows: {every: 10s, follow: true}}\n", "expect[0].split.windows: every and follow"},
		{"follow without fromMesh", "  - split: {by: cluster, weights: {c1: 1}, windows: {follow: true}}\n", "expect[0].split.windows.follow: follow needs fromMesh"},
		{"too short", "  - split: {by: cluster, weights: {c1: 1}, windows: {every: 100ms}}\n", "expect[0].split.windows.every: want at least 1s"},
		{"poll too fast", "  - split: {by: version, " + vs + ", windows: {follow: true, poll: 10ms}}\n", "expect[0].split.windows.poll: want 200ms to 1m0s"},
		{"poll without follow", "  - split: {by: cluster, weights: {c1: 1}, windows: {every: 5s, poll: 1s}}\n", "expect[0].split.windows.poll: applies to follow only"},
		{"settle too long", "  - split: {by: version, " + vs + ", windows: {follow: true, settle: 1h}}\n", "expect[0].split.windows.settle: want 0 to 10m0s"},
		{"two splits in windows", "  - split: {by: cluster, weights: {c1: 1}, windows: {every: 5s}}\n  - split: {by: cluster, weights: {c2: 1}, windows: {every: 5s}}\n", "expect[1].split.windows: a second split in windows"},
		{"readTimeout", "  - split: {by: version, " + vs + ", windows: {follow: true, readTimeout: 3s}}\n", ""},
		{"readTimeout too short", "  - split: {by: version, " + vs + ", windows: {follow: true, readTimeout: 10ms}}\n", "expect[0].split.windows.readTimeout: want 100ms to 1m0s"},
		{"readTimeout too long", "  - split: {by: version, " + vs + ", windows: {follow: true, readTimeout: 2m}}\n", "expect[0].split.windows.readTimeout: want 100ms to 1m0s"},
		{"readTimeout without follow", "  - split: {by: cluster, weights: {c1: 1}, windows: {every: 5s, readTimeout: 1s}}\n", "expect[0].split.windows.readTimeout: applies to follow only"},
		{"settle on fixed", "  - split: {by: cluster, weights: {c1: 1}, windows: {every: 5s, settle: 1s}}\n", "expect[0].split.windows.settle: applies to follow only"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s, err := Parse("w.yaml", []byte(minimal+"expect:\n"+c.expect))
			if c.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if s.Expect[0].Split.Windows == nil {
					t.Fatal("windows not read")
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got:\n%v\nwant: %s", err, c.want)
			}
		})
	}
	w := Windows{Follow: true}
	if w.SettleTime() != DefaultSettle || w.PollEvery() != DefaultPoll || w.ReadTimeoutOr() != DefaultReadTimeout {
		t.Errorf("follow's defaults: settle %s, poll %s, readTimeout %s", w.SettleTime(), w.PollEvery(), w.ReadTimeoutOr())
	}
	if w := (Windows{Every: Duration{10 * time.Second}}); w.SettleTime() != 0 {
		t.Errorf("fixed windows settle %s, want 0", w.SettleTime())
	}
}

// A distributed run cuts windows at the coordinator in every source's
// results together: a split in windows from workers loads, one judged
// from one source (from:) is refused, naming it.
func TestSplitWindowsFromWorkers(t *testing.T) {
	t.Parallel()
	const vs = "fromMesh: {virtualService: demo/reviews}"
	workers := strings.NewReplacer("attack: {rate: 10, requests: 100}", "attack: {rate: 10, requests: 100, sources: [{cluster: c1, workers: 2}, {cluster: c2, workers: 1}]}",
		"clusters: [{name: c1}, {name: c2}]", "clusters: [{name: c1, context: k1}, {name: c2, context: k2}]").Replace(minimal)
	for _, tc := range []struct{ name, expect, want string }{
		{"every source", "  - split: {by: version, " + vs + ", windows: {follow: true}}\n", ""},
		{"one source", "  - {from: c1, split: {by: version, " + vs + ", windows: {follow: true}}}\n", "expect[0].split.windows: windows are cut in the results of every source together: judge the split in windows without from: c1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse("w.yaml", []byte(workers+"expect:\n"+tc.expect))
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got:\n%v\nwant: %q", err, tc.want)
			}
		})
	}
}
