package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/topology"
	"github.com/mesh-verify/mesh-verify/reports"
)

// ClusterStatus is one cluster as `lab status` sees it.
type ClusterStatus struct {
	Name    string
	Context string
	Server  string
	// Up is true when the API server answered.
	Up  bool
	Err string
}

// StatusReport is `lab status`.
type StatusReport struct {
	Dir        string
	Kubeconfig string
	State      *State
	Topology   *topology.Topology
	DaemonPID  int
	DaemonLog  string
	Clusters   []ClusterStatus
	// Status is the daemon's published state (nil when it is not running).
	Status *daemon.Status
	// Ready is true when every pod the topology implies is serving.
	Ready bool
	Why   string
}

// ErrNoLab is returned by Status and Env when there is no lab in the dir.
var ErrNoLab = errors.New("no lab")

// existingState reads the state of the lab in o.Dir, or says there is none.
func existingState(o *Options) (*State, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	st, err := readState(o.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w in %s (start one with: mesh-verify lab up)", ErrNoLab, o.Dir)
	}
	return st, err
}

// Status inspects the lab in o.Dir without changing it.
func Status(ctx context.Context, o Options) (*StatusReport, error) {
	st, err := existingState(&o)
	if err != nil {
		return nil, err
	}
	r := &StatusReport{Dir: o.Dir, Kubeconfig: st.Kubeconfig, State: st, DaemonLog: filepath.Join(o.Dir, daemonLog)}
	if t, err := st.topology(); err == nil {
		r.Topology = t
	}
	servers := map[string]string{}
	if cfg, err := clientcmd.LoadFromFile(st.Kubeconfig); err == nil {
		for name, c := range cfg.Contexts {
			if cl, ok := cfg.Clusters[c.Cluster]; ok {
				servers[name] = cl.Server
			}
		}
	}
	// Pods wanted are the Deployments' replicas as they are now, not as
	// the topology created them: a `kubectl scale` is part of the lab.
	want := map[string]int{}
	for _, c := range st.Clusters {
		cs := ClusterStatus{Name: c, Context: st.Contexts[c], Server: servers[st.Contexts[c]]}
		if n, err := wantedPods(ctx, st.Kubeconfig, cs.Context); err != nil {
			cs.Err = err.Error()
		} else {
			cs.Up, want[c] = true, n
		}
		r.Clusters = append(r.Clusters, cs)
	}
	r.DaemonPID = daemonPID(o.Dir)
	if r.DaemonPID != 0 {
		// A status left by a daemon that died is not this one's.
		if s, err := daemon.ReadStatus(o.Dir); err == nil && s.PID == r.DaemonPID {
			r.Status = s
		}
	}
	switch {
	case r.DaemonPID == 0:
		r.Why = "the lab daemon is not running (run mesh-verify lab up again)"
		if stale := daemon.StaleDataPlanes(o.Dir, nil); len(stale) > 0 {
			r.Why += "; stale processes still serve: " + strings.Join(stale, "; ")
		}
	case r.Status == nil:
		r.Why = "the lab daemon has not published its status"
	default:
		r.Ready, r.Why = labReady(o.Dir, st.Clusters, want, r.Status)
	}
	return r, nil
}

// wantedPods sums the replicas of the lab's Deployments in one cluster.
func wantedPods(ctx context.Context, kubeconfigPath, kubeContext string) (int, error) {
	cfg, err := daemon.RESTConfig(kubeconfigPath, kubeContext)
	if err != nil {
		return 0, err
	}
	cfg.Timeout = 5 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	list, err := cs.AppsV1().Deployments("").List(ctx, metav1.ListOptions{LabelSelector: topology.LabelManaged + "=true"})
	if err != nil {
		return 0, fmt.Errorf("list Deployments (context %s): %w", kubeContext, err)
	}
	n := 0
	for _, d := range list.Items {
		if d.Spec.Replicas != nil {
			n += int(*d.Spec.Replicas)
		} else {
			n++
		}
	}
	return n, nil
}

// Environment is what `lab env` exports.
type Environment struct {
	// Kubeconfig is KUBECONFIG: the lab's kubeconfig.
	Kubeconfig string
	// KubeCacheDir is KUBECACHEDIR: kubectl's discovery and HTTP cache,
	// which it writes to ~/.kube/cache otherwise, even with a kubeconfig.
	KubeCacheDir string
}

// Env returns the environment that points kubectl at the lab in o.Dir.
func Env(o Options) (*Environment, error) {
	st, err := existingState(&o)
	if err != nil {
		return nil, err
	}
	return &Environment{Kubeconfig: st.Kubeconfig, KubeCacheDir: filepath.Join(o.Dir, kubeCacheDir)}, nil
}

// Print writes the report: clusters, pods, and how to reach the entries.
func (r *StatusReport) Print(w io.Writer) {
	name, seed := r.State.Topology, ""
	if r.Topology != nil {
		seed = r.Topology.Metadata.Seed
	}
	fmt.Fprintf(w, "lab %s in %s\n", name, r.Dir)
	if seed != "" {
		fmt.Fprintf(w, "  %s\n", seed)
	}
	fmt.Fprintf(w, "kubeconfig  %s   (eval \"$(mesh-verify lab env)\")\n", r.Kubeconfig)
	if r.DaemonPID != 0 {
		fmt.Fprintf(w, "daemon      pid %d running, log %s\n", r.DaemonPID, r.DaemonLog)
	} else {
		fmt.Fprintf(w, "daemon      NOT RUNNING, log %s\n", r.DaemonLog)
	}
	fmt.Fprintf(w, "seed        %d   (random routing; replay it with: mesh-verify lab up --seed %d)\n", r.State.Seed, r.State.Seed)
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLUSTER\tCONTEXT\tAPI SERVER\tSTATE")
	for _, c := range r.Clusters {
		state := "up"
		if !c.Up {
			state = "DOWN: " + firstLine(c.Err)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.Name, c.Context, c.Server, state)
	}
	tw.Flush()
	if r.Status != nil {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "CLUSTER\tNAMESPACE\tPOD\tROLE\tSERVES\tPORT -> LISTENS\tSTATE")
		for _, p := range r.Status.Pods {
			serves := p.Kind + " " + p.Version
			policy := p.Policy
			if p.DataPlane == topology.DataPlaneNginx {
				policy += ", by nginx"
			}
			if p.Role == daemon.RoleEntry {
				serves = p.App + ": " + policy
			} else if p.Sidecar != "" {
				serves += " + sidecar " + p.Sidecar + " (" + policy + ")"
			}
			if p.SidecarContainer != "" {
				serves += " + " + p.SidecarContainer + " (metrics -> " + p.SidecarMetrics + ")"
			}
			state := "serving"
			switch {
			case p.Error != "":
				state = "ERROR: " + firstLine(p.Error)
			case p.Terminating:
				state = "terminating (out of the endpoints, draining)"
			case !p.Ready:
				state = "not ready"
			case !p.Verified:
				state = "starting"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d -> %s\t%s\n", p.Cluster, p.Namespace, p.Name, p.Role, strings.TrimSpace(serves), p.Port, p.Addr, state)
		}
		tw.Flush()
		r.printEntries(w)
	}
	fmt.Fprintln(w)
	if r.Ready {
		fmt.Fprintln(w, "ready: every pod is serving")
	} else if r.Why != "" {
		fmt.Fprintf(w, "NOT READY: %s\n", r.Why)
	}
}

// printEntries says how to reach each entry the way the tutorials do.
func (r *StatusReport) printEntries(w io.Writer) {
	t := r.Topology
	if t == nil {
		return
	}
	fmt.Fprintln(w)
	for _, e := range t.Entries {
		if e.Workers {
			how := "every worker pod's datapath"
			if sidecar := t.Envoy(&e); sidecar != "" {
				how = "the " + sidecar + " sidecar of worker pods the mesh's injector injects"
			}
			fmt.Fprintf(w, "entry %s: %s in cluster %s (mesh-verify run --workers N --kubeconfig %s), to Service %s/%s\n",
				e.Name, how, e.Cluster, r.Kubeconfig, e.Namespace, e.To)
			continue
		}
		var svc string
		var port int32
		if e.Gateway() {
			svc, port = e.Service, e.Port.Number
		} else if a := t.App(e.SidecarOf); a != nil {
			svc, port = a.Service, t.ServiceByName(a.Namespace, a.Service).Port
		}
		fmt.Fprintf(w, "entry %s: kubectl --kubeconfig %s --context %s -n %s port-forward svc/%s %d:%d\n",
			e.Name, r.Kubeconfig, r.State.Contexts[e.Cluster], e.Namespace, svc, port, port)
		if r.Status == nil {
			continue
		}
		for _, p := range r.Status.Pods {
			if p.Cluster == e.Cluster && p.Policy != "" && (p.App == e.Name || p.App == e.SidecarOf) {
				b := strings.Join(p.Backends, ", ")
				if b == "" {
					b = "none"
				}
				seed := ""
				if p.Seed != 0 {
					seed = fmt.Sprintf(", simulator seed %d", p.Seed)
				}
				fmt.Fprintf(w, "  %s routes %s/%s (%s%s) to: %s\n", p.Name, e.Namespace, e.To, p.Policy, seed, b)
				if p.RouteError != "" {
					// The message quotes the cluster's objects: escaped for the terminal.
					fmt.Fprintf(w, "    its %s objects are refused, it keeps that route: %s\n", e.Mesh, reports.Printable(p.RouteError))
				}
			}
		}
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
