package daemon

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/relay"
)

// StatusFile is where the daemon publishes what it serves, in its dir.
const StatusFile = "status.json"

// Status is the daemon's published state: `lab up` waits on it and
// `lab status` prints it. It is rewritten atomically on every change.
type Status struct {
	PID      int    `json:"pid"`
	Topology string `json:"topology"`
	// Seed is the lab's seed (`lab up --seed`), from which every
	// simulator's random source is derived.
	Seed    uint64    `json:"seed"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// Synced is true once every cluster's pod watch has listed its pods.
	Synced bool  `json:"synced"`
	Pods   []Pod `json:"pods"`
	// Jobs are mesh-verify's own Job pods and their processes
	// (lab/README.md, "mesh-verify's Job pods"); never data plane backends.
	Jobs []JobPod `json:"jobs,omitempty"`
	// Workers are the workers entries' routes as last derived from the
	// mesh's objects, whether or not a worker pod runs.
	Workers []WorkersRoute `json:"workers,omitempty"`
	// Stopping is set when the daemon begins to shut down.
	Stopping bool `json:"stopping,omitempty"`
}

// WorkersRoute is a workers entry's route: Policy its data planes start
// with (and running ones take), RouteError why the objects give no new one.
type WorkersRoute struct {
	Entry      string `json:"entry"`
	Cluster    string `json:"cluster"`
	Policy     string `json:"policy"`
	Route      string `json:"route,omitempty"`
	RouteError string `json:"routeError,omitempty"`
}

// Roles a pod plays.
const (
	RoleApp   = "app"
	RoleEntry = "entry"
)

// Pod is one simulated pod and what backs it.
type Pod struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Container string `json:"container"`
	// Role is app or entry; App names the app or gateway entry.
	Role    string `json:"role"`
	App     string `json:"app"`
	Kind    string `json:"kind"`
	Version string `json:"version,omitempty"`
	// Port is the pod port; Addr the loopback address kwok forwards it to.
	Port int32  `json:"port"`
	Addr string `json:"addr"`
	// Forward is the relay in front of Addr that kwok's PortForward
	// targets (lab/relay: a backend's idle close must not hang a client).
	Forward string `json:"forward,omitempty"`
	// Relay counts what that relay did: connections, backend connections
	// opened again after an idle close, requests sent again, resets.
	Relay *relay.Stats `json:"relay,omitempty"`
	// Sidecar is the address of the data plane in a caller's pod, and
	// Policy the entry's routing policy (gateway entries and sidecars).
	Sidecar string `json:"sidecar,omitempty"`
	Policy  string `json:"policy,omitempty"`
	// RouteError says why the entry's mesh objects give no new route (an
	// object the mesh would refuse); the entry keeps Policy, its last one.
	RouteError string `json:"routeError,omitempty"`
	// DataPlane plays the policy: simulator or nginx; DataPlaneLog is
	// nginx's access log (request id and upstream of every request).
	DataPlane    string `json:"dataPlane,omitempty"`
	DataPlaneLog string `json:"dataPlaneLog,omitempty"`
	// DataPlanePID is the nginx master's pid (nginx data plane only): any
	// other nginx of the lab is stale.
	DataPlanePID int `json:"dataPlanePid,omitempty"`
	// Seed seeds this pod's simulator (derived from the lab's seed); 0
	// and omitted for nginx, which uses its own randomness.
	Seed uint64 `json:"seed,omitempty"`
	// Backends are what the pod's data plane routes to: cluster/pod.
	// BackendsStale is set while the pods changed and the data plane has
	// not applied them yet (an nginx reload in flight, or refused).
	Backends      []string `json:"backends,omitempty"`
	BackendsStale bool     `json:"backendsStale,omitempty"`
	// Routed is what the pod's simulator routed so far: the ground truth
	// a measurement through the lab can be compared with (nginx keeps
	// its access log instead).
	Routed  *Routed `json:"routed,omitempty"`
	LogFile string  `json:"logFile"`
	// SidecarFlavor (istio, kuma) and SidecarContainer name the pod's mesh
	// sidecar, if it has one; SidecarLogFile holds its Envoy access lines,
	// SidecarInbound is where mesh traffic to the pod enters it and
	// SidecarMetrics serves its Prometheus metrics (kwok forwards the
	// flavor's metrics ports there).
	SidecarFlavor    string `json:"sidecarFlavor,omitempty"`
	SidecarContainer string `json:"sidecarContainer,omitempty"`
	SidecarLogFile   string `json:"sidecarLogFile,omitempty"`
	SidecarInbound   string `json:"sidecarInbound,omitempty"`
	SidecarMetrics   string `json:"sidecarMetrics,omitempty"`
	// AppSeed is the app's seed (its data and delays), derived from the
	// lab's seed and the pod's name.
	AppSeed uint64 `json:"appSeed,omitempty"`
	// Ready is the pod's Ready condition; Verified that its logs and its
	// port-forward answered through the API server. Terminating is set
	// once the pod was deleted: it has left the endpoints and its app
	// drains (Ready is then false).
	Ready       bool `json:"ready"`
	Terminating bool `json:"terminating,omitempty"`
	Verified    bool `json:"verified"`
	// Unverified says why a pod's logs or port-forward have not answered
	// through the API server yet, once that has taken longer than it
	// should (kwok's controller may have missed its Logs objects); the
	// probes go on. Error is set when they gave up.
	Unverified string `json:"unverified,omitempty"`
	Error      string `json:"error,omitempty"`
}

// JobPod is one pod of mesh-verify's image and the process that plays
// its container.
type JobPod struct {
	Cluster   string `json:"cluster"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Container string `json:"container"`
	// PID is the process's (0 when it never started); Args what it was
	// started with; Dir its working directory (with its kubeconfig).
	PID     int      `json:"pid,omitempty"`
	Args    []string `json:"args,omitempty"`
	Dir     string   `json:"dir"`
	LogFile string   `json:"logFile"`
	// ConnectTo counts the entries of its $MESH_VERIFY_CONNECT_TO.
	ConnectTo int        `json:"connectTo"`
	Started   time.Time  `json:"started"`
	Finished  *time.Time `json:"finished,omitempty"`
	ExitCode  *int       `json:"exitCode,omitempty"`
	// Error says why the process could not start (the pod's message).
	Error string `json:"error,omitempty"`
	// Sidecar is the proxy the mesh's injector gave the pod (istio,
	// kuma), played by the daemon: SidecarAdmin is where its readiness
	// and quit endpoints listen ($MESH_VERIFY_SIDECAR_ADMIN),
	// SidecarLogFile its container's log (its access lines), SidecarQuit
	// whether the worker asked it to quit. Planes are the pod's outbound
	// data planes, one per workers entry that applies to it (a sidecar's
	// or a sidecar-less mesh's datapath), with what each routed.
	Sidecar        string `json:"sidecar,omitempty"`
	SidecarAdmin   string `json:"sidecarAdmin,omitempty"`
	SidecarLogFile string `json:"sidecarLogFile,omitempty"`
	SidecarQuit    bool   `json:"sidecarQuit,omitempty"`
	Planes         []Pod  `json:"planes,omitempty"`
}

// Key is cluster/namespace/name.
func (j JobPod) Key() string { return j.Cluster + "/" + j.Namespace + "/" + j.Name }

// Routed summarises meshsim.Stats.
type Routed struct {
	Requests   int64 `json:"requests"`
	NoUpstream int64 `json:"noUpstream,omitempty"`
	// NoRoute counts 404 answers no route took (Envoy's NR).
	NoRoute     int64            `json:"noRoute,omitempty"`
	Connections int64            `json:"connections"`
	ByCluster   map[string]int64 `json:"byCluster,omitempty"`
	ByPod       map[string]int64 `json:"byPod,omitempty"`
	ByVersion   map[string]int64 `json:"byVersion,omitempty"`
	// ConnsByCluster counts the connections pinned per cluster
	// (per-connection policies).
	ConnsByCluster map[string]int64 `json:"connsByCluster,omitempty"`
	// Mirrored counts copies sent per cluster.
	Mirrored map[string]int64 `json:"mirrored,omitempty"`
	// Retries counts the attempts the route's retry policy sent again:
	// each reached its backend (and its sidecar's log) once more.
	Retries int64 `json:"retries,omitempty"`
}

// Key is cluster/namespace/name.
func (p Pod) Key() string { return p.Cluster + "/" + p.Namespace + "/" + p.Name }

// ReadStatus reads the status file of dir.
func ReadStatus(dir string) (*Status, error) {
	b, err := os.ReadFile(filepath.Join(dir, StatusFile))
	if err != nil {
		return nil, err
	}
	var s Status
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, StatusFile), err)
	}
	return &s, nil
}

func writeStatus(dir string, s *Status) error {
	sort.Slice(s.Pods, func(i, j int) bool { return s.Pods[i].Key() < s.Pods[j].Key() })
	sort.Slice(s.Jobs, func(i, j int) bool { return s.Jobs[i].Key() < s.Jobs[j].Key() })
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab status for %s: %w", filepath.Join(dir, StatusFile), err)
	}
	tmp, err := os.CreateTemp(dir, ".status-*.json")
	if err != nil {
		return fmt.Errorf("write status: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return fmt.Errorf("write status: %w", err)
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write status: %w", err)
	}
	// Rename is atomic: a reader never sees half a file.
	if err := os.Rename(tmp.Name(), filepath.Join(dir, StatusFile)); err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("write status: %w", err)
	}
	return nil
}
