package daemon

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"

	"github.com/mesh-verify/mesh-verify/lab/meshroute"
	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// A route the nginx data plane refuses is not stored: the entry keeps the
// route nginx plays, so its backends, reachability and destinations stay
// that route's. Cilium's per-connection balancing (no Service: the local
// cluster only) is what nginx cannot play; the same objects for a
// simulator entry give the new route. No lab: no mesh object watched.
func TestSyncRoutesKeepsTheRouteNginxPlays(t *testing.T) {
	t.Parallel()
	for _, dataPlane := range []string{topology.DataPlaneNginx, topology.DataPlaneSimulator} {
		t.Run(dataPlane, func(t *testing.T) {
			t.Parallel()
			top := &topology.Topology{Clusters: []string{"c1", "c2"}, Entries: []topology.Entry{{
				Name: "x-wing", Mesh: meshroute.MeshCilium, Cluster: "c1", Namespace: "default", To: "rebel-base", DataPlane: dataPlane}}}
			last := meshroute.Route{Policy: meshsim.Policy{Mode: meshsim.ModePerPod, Local: "c1"}, Clusters: []string{"c1", "c2"}}
			d := &Daemon{cfg: Config{Topology: top}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), dirty: make(chan struct{}, 1),
				pods: map[podRef]*podRT{}, routes: map[string]*entryRoute{"x-wing": {route: last}}}
			err := d.syncRoutes(context.Background())
			got := d.routes["x-wing"]
			if dataPlane == topology.DataPlaneSimulator {
				// The simulator takes it: updateBackends then runs, with no
				// cluster to list pods of.
				if got.err != nil || !got.route.Policy.PerConnection || !reflect.DeepEqual(got.route.Clusters, []string{"c1"}) {
					t.Fatalf("simulator entry: route %+v, err %v (sync %v), want the per-connection route of c1", got.route, got.err, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("syncRoutes = %v", err)
			}
			if !reflect.DeepEqual(got.route, last) {
				t.Errorf("route = %+v, want the last one nginx plays, %+v", got.route, last)
			}
			if got.err == nil || !strings.Contains(got.err.Error(), "the nginx data plane cannot play the route: perConnection") {
				t.Errorf("route error = %v, want nginx's refusal of perConnection", got.err)
			}
		})
	}
}
