package e2e

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/assert"
	"github.com/mesh-verify/mesh-verify/e2e/e2etest"
	"github.com/mesh-verify/mesh-verify/lab/daemon"
)

// TestMirrorWithAndWithoutShadow runs the catalog's istio-mirror-sidecar
// scenario on istio-mirror (Istio up to 1.27: copies carry the authority
// callme-service-shadow:8080) and on istio-mirror-noshadow (1.28 and
// later: copies keep callme-service:8080). Both PASS: the copies are told
// by the primary's request id, not by the authority. callme v2's
// istio-proxy log shows which authority the lab sent.
func TestMirrorWithAndWithoutShadow(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		topology, authority string
	}{
		{"istio-mirror", `"callme-service-shadow:8080"`},
		{"istio-mirror-noshadow", `"callme-service:8080"`},
	} {
		t.Run(c.topology, func(t *testing.T) {
			t.Parallel()
			l := mv.Lab(t, e2etest.LabSpec{Topology: c.topology})
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
			defer cancel()
			r := runBinary(t, ctx, "run", filepath.Join("..", "scenarios", "catalog", "istio-mirror-sidecar.yaml"), "--kubeconfig", l.Kubeconfig)
			rep := r.Report()
			if rep == nil {
				t.Fatalf("no report (exit %d)\n%s\n%s", r.Code, r.Stdout, r.Stderr)
			}
			if rep.Verdict != assert.Pass {
				t.Errorf("verdict %s, want PASS\n%s", rep.Verdict, r.Stdout)
			}
			st, err := daemon.ReadStatus(l.Dir)
			if err != nil {
				t.Fatal(err)
			}
			var copies, want int
			for _, p := range st.Pods {
				if p.Routed != nil {
					for _, n := range p.Routed.Mirrored {
						want += int(n)
					}
				}
			}
			for _, line := range sidecarLines(t, l, "callme-service-v2", "inbound|") {
				if !strings.Contains(line, c.authority) {
					t.Fatalf("callme v2's istio-proxy line without authority %s: %s", c.authority, line)
				}
				copies++
			}
			if copies == 0 || copies != want {
				t.Errorf("callme v2's istio-proxy logged %d copies, the data plane mirrored %d", copies, want)
			}
			t.Logf("%s: %d copies with authority %s", c.topology, copies, c.authority)
		})
	}
}
