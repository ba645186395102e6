package meshsim

import (
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// flaky is a real backend that answers code to the first fails attempts of
// each request id and 200 after, recording the attempt-count headers.
type flaky struct {
	code, fails int
	mu          sync.Mutex
	seen        map[string][]string // request id → x-envoy-attempt-count per attempt
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get("X-Request-Id")
	f.mu.Lock()
	f.seen[id] = append(f.seen[id], r.Header.Get(AttemptCountHeader))
	n := len(f.seen[id])
	f.mu.Unlock()
	if n <= f.fails {
		w.WriteHeader(f.code)
		return
	}
	w.WriteHeader(http.StatusOK)
}

// TestRetry: a retried status is tried again up to Attempts more times,
// each attempt reaching the backend with the same request id and the next
// x-envoy-attempt-count; other statuses, no policy or attempts 0 pass
// the first answer on.
func TestRetry(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		retry       *Retry
		code, fails int
		want        int
		attempts    []string
	}{
		{"retried until it succeeds", &Retry{Attempts: 3, Codes: []int{502, 503, 504}}, 504, 2, 200, []string{"1", "2", "3"}},
		{"attempts run out", &Retry{Attempts: 1, Codes: []int{504}}, 504, 5, 504, []string{"1", "2"}},
		{"status not retried", &Retry{Attempts: 3, Codes: []int{503}}, 504, 1, 504, []string{"1"}},
		{"no policy", nil, 503, 1, 503, []string{"1"}},
		{"attempts 0", &Retry{Attempts: 0, Codes: []int{503}}, 503, 1, 503, []string{"1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := &flaky{code: c.code, fails: c.fails, seen: map[string][]string{}}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := &http.Server{Handler: f, ReadHeaderTimeout: 5 * time.Second}
			go func() { _ = srv.Serve(ln) }()
			t.Cleanup(func() { _ = srv.Close() })
			sim, addr := startSim(t, Policy{Mode: ModePerPod, Retry: c.retry},
				[]Backend{{Cluster: "c1", Pod: "p1", Version: "v1", Addr: ln.Addr().String(), Ready: true}})
			got := send(t, client(t), addr, 1, func(int) http.Header { return http.Header{"X-Request-Id": {"rid-1"}} })
			// send keys a 200 by its body (none here), others by "code body".
			want := ""
			if c.want != http.StatusOK {
				want = strconv.Itoa(c.want) + " "
			}
			if got[want] != 1 {
				t.Errorf("answers %v, want status %d", got, c.want)
			}
			f.mu.Lock()
			seen := f.seen["rid-1"]
			f.mu.Unlock()
			if !slices.Equal(seen, c.attempts) {
				t.Errorf("attempts reaching the backend: %q, want %q", seen, c.attempts)
			}
			if st := sim.Stats(); st.Retries != int64(len(c.attempts)-1) {
				t.Errorf("Stats().Retries = %d, want %d", st.Retries, len(c.attempts)-1)
			}
		})
	}
}

// TestMirrorKeepHost: Istio 1.28's mirror copies keep the primary's Host
// (no "-shadow"), with its request id; without KeepHost they carry it.
func TestMirrorKeepHost(t *testing.T) {
	t.Parallel()
	for _, keep := range []bool{false, true} {
		v1, v2 := startPod(t, "c1", "callme-v1", "v1"), startPod(t, "c2", "callme-v2", "v2")
		sim, addr := startSim(t, Policy{Mode: ModePerCluster, Mirror: &Mirror{Version: "v2", Percent: 100, KeepHost: keep}}, backends(v1, v2))
		const n = 20
		send(t, client(t), addr, n, func(i int) http.Header {
			return http.Header{"Host": {"callme-service:8080"}, "X-Request-Id": {"r-" + strconv.Itoa(i)}}
		})
		waitFor(t, "mirror copies delivered", func() bool {
			st := sim.Stats()
			return st.Mirror.InFlight == 0 && st.Mirror.Sent == n
		})
		want := "callme-service-shadow:8080"
		if keep {
			want = "callme-service:8080"
		}
		if h := v2.hostCounts(); h[want] != n || len(h) != 1 {
			t.Errorf("KeepHost %v: the mirror pod saw hosts %v, want %d× %s", keep, h, n, want)
		}
		ids := v2.requestIDs()
		slices.Sort(ids)
		if len(ids) != n || ids[0] != "r-0" {
			t.Errorf("KeepHost %v: copies' request ids %q, want the primaries'", keep, ids)
		}
	}
}
