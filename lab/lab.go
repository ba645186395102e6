// Package lab runs the local lab (docs/architecture.md, "The lab"; lab/README.md): real Kubernetes
// API servers (kwok clusters named c1, c2… with contexts kind-c1…, in a
// lab-owned kubeconfig), the Deployments and Services of a topology, and
// a detached daemon (lab/daemon) that backs every simulated pod with a
// tutorial app or a mesh simulator. Up is idempotent and cleans up after
// a crashed run; Down stops everything it started and checks that no
// process is left.
package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/internal/detach"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/nginx"
	"github.com/mesh-verify/mesh-verify/lab/topologies"
	"github.com/mesh-verify/mesh-verify/lab/topology"
	"github.com/mesh-verify/mesh-verify/reports"
)

// Options are shared by the lab commands.
type Options struct {
	// Dir is the lab's state directory (DefaultDir when empty).
	Dir string
	// Topology is a built-in name or a file (Up only).
	Topology string
	// Bin is the directory of the lab's tool binaries; empty means
	// $MESH_VERIFY_LAB_BIN, else tools/lab/build.sh of the repository
	// around the working directory (or RepoRoot), else the newest complete
	// build in ~/.cache/mesh-verify/lab.
	Bin      string
	RepoRoot string
	// Daemon starts the daemon (`mesh-verify-lab serve`); nil means SelfDaemon.
	Daemon DaemonCommand
	// ReadyTimeout bounds the wait for every pod to serve (default 2m).
	ReadyTimeout time.Duration
	// KeepOnFailure keeps what a failed Up started (daemon, clusters) for
	// inspection; by default Up removes it again.
	KeepOnFailure bool
	// DataPlane, when set, plays every entry with this data plane
	// (topology.DataPlaneNginx: Debian's nginx instead of the simulator).
	DataPlane string
	// Seed, when set, is the lab's seed (`lab up --seed N`): every
	// simulator's random choices derive from it, so a lab brought up with
	// the seed another one recorded replays its routing. Nil picks a
	// random seed, or keeps the seed of a lab that is already up.
	Seed *uint64
	// Out receives progress and the summary; nil discards them.
	Out io.Writer
}

func (o *Options) defaults() error {
	if o.Dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return err
		}
		o.Dir = d
	}
	abs, err := filepath.Abs(o.Dir)
	if err != nil {
		return fmt.Errorf("lab directory %s: %w", o.Dir, err)
	}
	o.Dir = abs
	if o.Daemon == nil {
		o.Daemon = SelfDaemon
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 2 * time.Minute
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	return nil
}

// Lab is a running lab as Up leaves it.
type Lab struct {
	Dir        string
	Kubeconfig string
	Topology   *topology.Topology
	State      *State
	Status     *daemon.Status
	DaemonPID  int
	// Reused is true when Up found the same lab already up.
	Reused bool
}

// Context is the kubeconfig context of a cluster.
func (l *Lab) Context(cluster string) string { return l.State.Contexts[cluster] }

// Up brings the topology's lab up in o.Dir and returns once every pod is
// Running and its logs and port-forward answer through the API server.
// If it fails or ctx ends first, it stops the daemon and deletes the
// clusters it started, unless o.KeepOnFailure.
func Up(ctx context.Context, o Options) (_ *Lab, err error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	start := time.Now()
	t, src, err := topologies.Resolve(o.Topology)
	if err != nil {
		return nil, err
	}
	if o.DataPlane != "" {
		if err := t.UseDataPlane(o.DataPlane); err != nil {
			return nil, err
		}
	}
	// Before anything starts: the daemon would otherwise retry the entry
	// pods until the ready timeout, with the reason only in its log.
	for _, e := range t.Entries {
		if e.UsesNginx() {
			if _, err := nginx.Find(); err != nil {
				return nil, fmt.Errorf("topology %s, entry %s: %w", t.Metadata.Name, e.Name, err)
			}
		}
	}
	unlock, err := lock(o.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	if err := claimDir(o.Dir); err != nil {
		return nil, err
	}

	if st, alive := healthy(ctx, o.Dir, src, t.ManifestsDigest(), o.DataPlane, o.Seed); st != nil {
		// Same topology, API servers alive: apply the topology again
		// (undoing any `kubectl scale` since) and wait, which is seconds
		// instead of a new lab. A daemon that died (kill -9, a crash) is
		// started again; the new one stops what the old one left running.
		// The state names the contexts in full (kind-c1 for cluster c1).
		k := &kwok.Lab{Bin: kwok.Binaries(st.Bin), Dir: o.Dir, Kubeconfig: st.Kubeconfig, ContextPrefix: contextPrefix(st)}
		meshCRDs := crdFiles(t)
		for _, c := range st.Clusters {
			cfg, err := daemon.RESTConfig(st.Kubeconfig, st.Contexts[c])
			if err != nil {
				return nil, fmt.Errorf("cluster %s: %w", c, err)
			}
			if err := registerCRDs(ctx, kubectlOf(k, c), c, meshCRDs); err != nil {
				return nil, err
			}
			if err := applyCluster(ctx, cfg, c, t, kubectlOf(k, c), func() bool { return k.ControllerManagerRunning(c) }); err != nil {
				return nil, err
			}
		}
		pid, exited := daemonPID(o.Dir), (<-chan struct{})(nil)
		if !alive {
			p, done, err := startDaemon(o.Dir, o.Daemon)
			if err != nil {
				return nil, err
			}
			pid, exited = p.Pid, done
			fmt.Fprintf(o.Out, "  the lab daemon was not running: started it again, pid %d (log %s)\n", pid, filepath.Join(o.Dir, daemonLog))
		}
		status, err := waitReady(ctx, o.Dir, t, pid, exited, o.ReadyTimeout, healKwok(ctx, k, o.Out))
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(o.Out, "lab %s was already up in %s (topology re-applied; seed %d)\n", t.Metadata.Name, o.Dir, st.Seed)
		return &Lab{Dir: o.Dir, Kubeconfig: st.Kubeconfig, Topology: t, State: st, Status: status, DaemonPID: pid, Reused: true}, nil
	}
	if err := cleanup(ctx, o.Dir, o.Out); err != nil {
		return nil, fmt.Errorf("clean up the previous lab in %s: %w", o.Dir, err)
	}
	if err := mark(o.Dir); err != nil { // the cleanup removed the previous lab's
		return nil, err
	}
	bin, err := findBinaries(ctx, o)
	if err != nil {
		return nil, err
	}
	k, err := kwok.New(bin, o.Dir)
	if err != nil {
		return nil, err
	}
	k.Out = o.Out
	// From here on this up starts processes: if it fails, Ctrl-C included,
	// it removes them again unless asked to keep them.
	var proc *os.Process
	var exited <-chan struct{}
	defer func() {
		if err != nil {
			err = undoUp(ctx, o, proc, exited, err)
		}
	}()
	st := &State{
		Topology: t.Metadata.Name, File: t.File, Source: string(src), Manifests: t.ManifestsDigest(), ManifestFiles: t.ManifestFiles(),
		DataPlane: o.DataPlane, Bin: string(bin),
		Kubeconfig: k.Kubeconfig, Clusters: t.Clusters, Contexts: map[string]string{}, Created: time.Now(),
		Seed: newSeed(o.Seed),
	}
	for _, c := range t.Clusters {
		st.Contexts[c] = k.Context(c)
	}
	// Recorded before anything starts, so a crash from here on is
	// cleaned up by the next up or down.
	if err := writeState(o.Dir, st); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "lab %s: %s\n", t.Metadata.Name, t.Metadata.Seed)
	// What the mesh objects say that the simulator does not play is said
	// up front, never dropped silently (the daemon logs it per entry too).
	if notes, err := t.CheckRoutes(); err == nil {
		for _, n := range notes {
			fmt.Fprintf(o.Out, "  %s\n", reports.Printable(n))
		}
	}
	fmt.Fprintf(o.Out, "  routing seed %d (replay this lab's random routing with: mesh-verify lab up --seed %d)\n", st.Seed, st.Seed)
	// The daemon starts as soon as every API server answers, while the
	// workloads are still being applied: it serves pods as they appear.
	startD := func() error {
		// Before the daemon reads the kubeconfig, never while it does.
		if err := useContext(k.Kubeconfig, k.Context(t.Clusters[0])); err != nil {
			return err
		}
		p, done, err := startDaemon(o.Dir, o.Daemon)
		if err != nil {
			return err
		}
		proc, exited = p, done
		fmt.Fprintf(o.Out, "  daemon pid %d (log %s)\n", p.Pid, filepath.Join(o.Dir, daemonLog))
		return nil
	}
	recreated, err := createClusters(ctx, k, t, o.Out, startD)
	if err != nil {
		return nil, err
	}
	if recreated {
		// A recreated cluster has new ports: the daemon must reconnect.
		if _, err := stopDaemon(o.Dir, 10*time.Second); err != nil {
			return nil, err
		}
		if err := startD(); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Out, "  Deployments and Services applied after %.1fs\n", time.Since(start).Seconds())
	status, err := waitReady(ctx, o.Dir, t, proc.Pid, exited, o.ReadyTimeout, healKwok(ctx, k, o.Out))
	if err != nil {
		return nil, err
	}
	st.Ready = true
	if err := writeState(o.Dir, st); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Out, "  every pod serving after %.1fs\n", time.Since(start).Seconds())
	return &Lab{Dir: o.Dir, Kubeconfig: k.Kubeconfig, Topology: t, State: st, Status: status, DaemonPID: proc.Pid}, nil
}

// undoUp handles a failed or interrupted Up: unless o.KeepOnFailure, it
// stops the daemon this up started (by its process, our child) and
// deletes the clusters and the lab's files, under its own time bound as
// ctx may be what ended the up. The error says what was done.
func undoUp(ctx context.Context, o Options, proc *os.Process, exited <-chan struct{}, cause error) error {
	if o.KeepOnFailure {
		return fmt.Errorf("%w\n(kept for inspection as --keep-on-failure asks; remove it with: mesh-verify lab down --dir %s)", cause, o.Dir)
	}
	what := "failed"
	if ctx.Err() != nil {
		what = "interrupted"
	}
	fmt.Fprintf(o.Out, "  lab up %s: stopping its daemon and deleting its clusters (--keep-on-failure keeps them)\n", what)
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer cancel()
	var errs []error
	if proc != nil {
		if err := stopChild(proc, exited, 10*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	if err := cleanup(cctx, o.Dir, o.Out); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w\n(removing what this up started failed too: %v; retry with: mesh-verify lab down --dir %s)", cause, err, o.Dir)
	}
	return fmt.Errorf("%w\n(what this up started is removed; --keep-on-failure keeps it for inspection)", cause)
}

// createClusters starts the API servers one at a time (kwokctl's port
// choice is racy) and applies each cluster's workloads while the next one
// starts, as that mostly waits for its controller-manager. started runs
// once every API server answers. A cluster that comes up broken is
// deleted and created again, twice at most; recreated says so.
func createClusters(ctx context.Context, k *kwok.Lab, t *topology.Topology, out io.Writer, started func() error) (recreated bool, err error) {
	pending := t.Clusters
	meshCRDs := crdFiles(t)
	for attempt := 1; len(pending) > 0; attempt++ {
		type result struct {
			cluster   string
			restarted bool // its kwok controller, which had listed its CRDs before they existed
			err       error
		}
		applied := make(chan result, len(pending))
		for _, c := range pending {
			begin := time.Now()
			if err := k.Start(ctx, c); err != nil {
				return recreated, err
			}
			// From the cluster's own kubeconfig: the next create rewrites the shared one.
			cfg, err := daemon.RESTConfig(k.ClusterKubeconfig(c), k.Context(c))
			if err != nil {
				return recreated, fmt.Errorf("cluster %s: %w", c, err)
			}
			// kwokctl returns without waiting (Start): the first kubectl
			// (the CRDs) waits on the condition it needs, the context in
			// the cluster's own kubeconfig answering, not on a pause.
			if err := waitAPI(ctx, k.ClusterKubeconfig(c), k.Context(c)); err != nil {
				return recreated, fmt.Errorf("cluster %s: API server of context %s not answering: %w", c, k.Context(c), err)
			}
			fmt.Fprintf(out, "  cluster %s: API server up (context %s) in %.1fs\n", c, k.Context(c), time.Since(begin).Seconds())
			// Before the daemon starts (once every API server answers): it
			// lists the mesh objects of these kinds.
			if err := registerCRDs(ctx, kubectlOf(k, c), c, meshCRDs); err != nil {
				return recreated, err
			}
			go func() {
				restarted, err := k.EnsureWatches(ctx, c)
				if err == nil {
					err = applyCluster(ctx, cfg, c, t, kubectlOf(k, c), func() bool { return k.ControllerManagerRunning(c) })
				}
				applied <- result{c, restarted, err}
			}()
		}
		var errs []error
		if attempt == 1 {
			if err := started(); err != nil {
				errs = append(errs, err)
			}
		}
		var broken []string
		for range pending {
			r := <-applied
			if r.restarted {
				fmt.Fprintf(out, "  cluster %s: kwok controller restarted: it had listed its CRDs before they existed\n", r.cluster)
			}
			var be *brokenClusterError
			switch {
			case errors.As(r.err, &be) && attempt < 3:
				fmt.Fprintf(out, "  %v; creating it again\n", r.err)
				broken = append(broken, r.cluster)
			case r.err != nil:
				errs = append(errs, r.err)
			}
		}
		if err := errors.Join(errs...); err != nil {
			return recreated, err
		}
		for _, c := range broken {
			if err := k.Delete(ctx, c); err != nil {
				return recreated, err
			}
			recreated = true
		}
		pending = broken
	}
	return recreated, nil
}

// healthy returns the state of the lab in dir when it was created from
// exactly src, data plane dp and seed (when one is asked for) and its API
// servers answer; alive says whether its daemon runs.
func healthy(ctx context.Context, dir string, src []byte, manifests, dp string, seed *uint64) (st *State, alive bool) {
	st, err := readState(dir)
	if err != nil || !st.Ready || st.Source != string(src) || st.Manifests != manifests || st.DataPlane != dp || seed != nil && *seed != st.Seed {
		return nil, false
	}
	for _, c := range st.Clusters {
		if err := probeAPI(ctx, st.Kubeconfig, st.Contexts[c]); err != nil {
			return nil, false
		}
	}
	return st, daemonPID(dir) != 0
}

// apiTimeout bounds waitAPI: kwokctl has started the API server, which
// answers within a second or two even on a loaded machine.
const apiTimeout = 30 * time.Second

// waitAPI waits until the API server of kubeContext in the kubeconfig at
// path answers /version, at most apiTimeout.
func waitAPI(ctx context.Context, path, kubeContext string) error {
	return kwok.Retry(ctx, apiTimeout, 100*time.Millisecond, func() error { return probeAPI(ctx, path, kubeContext) })
}

func probeAPI(ctx context.Context, kubeconfigPath, kubeContext string) error {
	cfg, err := daemon.RESTConfig(kubeconfigPath, kubeContext)
	if err != nil {
		return err
	}
	cfg.Timeout = 2 * time.Second
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	_, err = cs.Discovery().ServerVersion()
	return err
}

// cleanup removes whatever a previous lab left in dir: its daemon (by
// pid), its clusters, its files.
func cleanup(ctx context.Context, dir string, out io.Writer) error {
	if !isLabDir(dir) {
		return nil
	}
	var errs []error
	if pid, err := stopDaemon(dir, 10*time.Second); err != nil {
		errs = append(errs, err)
	} else if pid != 0 {
		fmt.Fprintf(out, "  stopped lab daemon pid %d\n", pid)
	}
	st, _ := readState(dir)
	bin := ""
	if st != nil {
		bin = st.Bin
	}
	if bin == "" {
		bin = os.Getenv("MESH_VERIFY_LAB_BIN")
	}
	if bin != "" {
		if k, err := kwok.New(kwok.Binaries(bin), dir); err == nil {
			if existing := k.Existing(); len(existing) > 0 {
				fmt.Fprintf(out, "  deleting clusters %s\n", strings.Join(existing, ", "))
			}
			if err := k.DeleteAll(ctx); err != nil {
				errs = append(errs, err)
			}
			left := waitLeftovers(k, 10*time.Second)
			if len(left) > 0 {
				killLeftovers(dir, left)
				if left = waitLeftovers(k, 5*time.Second); len(left) > 0 {
					errs = append(errs, fmt.Errorf("processes of the lab in %s left behind: %s", dir, strings.Join(left, "; ")))
				}
			}
			// Not the lab's (a tail -f of its log, a kubectl using its
			// kubeconfig): named by pid only, and left alone.
			if strangers := k.Strangers(); len(strangers) > 0 {
				fmt.Fprintf(out, "  not stopped: processes %s name %s but are not the lab's\n", joinInts(strangers), dir)
			}
		} else {
			errs = append(errs, err)
		}
	} else if existing := existingClusters(dir); len(existing) > 0 {
		errs = append(errs, fmt.Errorf("clusters %s exist but the lab binaries are unknown: set MESH_VERIFY_LAB_BIN", strings.Join(existing, ", ")))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return removeState(dir)
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ", ")
}

func existingClusters(dir string) []string {
	entries, _ := os.ReadDir(filepath.Join(dir, "kwok", "clusters"))
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// waitLeftovers waits for the lab's processes to exit (kwokctl's delete
// signals them; PID 1 reaps them late).
func waitLeftovers(k *kwok.Lab, d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		left := k.Leftovers()
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// useContext makes kubeContext the lab kubeconfig's current context, as
// the tutorials' `kubectx kind-c1`.
func useContext(path, kubeContext string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("lab kubeconfig: %w", err)
	}
	if _, ok := cfg.Contexts[kubeContext]; !ok {
		return fmt.Errorf("lab kubeconfig %s has no context %s", path, kubeContext)
	}
	cfg.CurrentContext = kubeContext
	// Atomically: the clusters' manifests are being applied meanwhile.
	return kwok.WriteKubeconfig(cfg, path)
}

// waitReady waits for the daemon to serve every pod the topology implies.
// exited, when not nil, is closed if the daemon (our child) ends; else the
// daemon is checked through /proc.
//
// A pod whose logs or port-forward stay unreadable (the daemon says so in
// PodStatus.Unverified) makes it check that cluster's kwok controller once
// with heal, which restarts a controller whose Logs or PortForward
// informer is not serving (tools/lab/NOTES.md, "kwok's CRD watches").
func waitReady(ctx context.Context, dir string, t *topology.Topology, pid int, exited <-chan struct{}, timeout time.Duration, heal func(cluster string) error) (*daemon.Status, error) {
	deadline := time.Now().Add(timeout)
	var why string
	healed := map[string]bool{}
	for {
		dead := false
		if exited != nil {
			select {
			case <-exited:
				dead = true
			default:
			}
		} else {
			dead = !labProcess(pid, dir)
		}
		if dead {
			return nil, fmt.Errorf("lab daemon pid %d exited; its log %s ends:\n%s", pid, filepath.Join(dir, daemonLog), tail(filepath.Join(dir, daemonLog), 15))
		}
		if st, err := daemon.ReadStatus(dir); err == nil && st.PID != pid {
			why = fmt.Sprintf("the status was written by daemon pid %d, not by the running one (pid %d)", st.PID, pid)
		} else if err == nil {
			var ok bool
			if ok, why = labReady(dir, t.Clusters, t.ExpectedPods(), st); ok {
				return st, nil
			}
			for _, p := range st.Pods {
				if p.Unverified == "" || healed[p.Cluster] || heal == nil {
					continue
				}
				healed[p.Cluster] = true
				if err := heal(p.Cluster); err != nil {
					return nil, fmt.Errorf("lab not ready: pod %s: %s; checking the kwok controller of cluster %s: %w", p.Key(), p.Unverified, p.Cluster, err)
				}
			}
		} else {
			why = "the daemon has not published its status yet"
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("lab not ready after %v: %s; daemon log %s ends:\n%s", timeout, why, filepath.Join(dir, daemonLog), tail(filepath.Join(dir, daemonLog), 15))
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// healKwok checks a cluster's kwok controller while `lab up` waits for a
// pod the daemon cannot read through the API server, and restarts it if
// its informers do not serve (kwok.(*Lab).EnsureWatches).
func healKwok(ctx context.Context, k *kwok.Lab, out io.Writer) func(string) error {
	return func(cluster string) error {
		restarted, err := k.EnsureWatches(ctx, cluster)
		if restarted {
			fmt.Fprintf(out, "  cluster %s: kwok controller restarted: a pod's logs or port-forward stayed unreadable\n", cluster)
		}
		return err
	}
}

// contextPrefix is what the state's context names add to the cluster
// names (kind- for kind-c1).
func contextPrefix(st *State) string {
	for _, c := range st.Clusters {
		if p, ok := strings.CutSuffix(st.Contexts[c], c); ok {
			return p
		}
	}
	return ""
}

// labReady is readiness, and no data plane left by a dead daemon
// answering beside the current one's. The stale planes are looked for (a
// walk of /proc) only once the pods are ready: they can only turn a ready
// lab into a not-ready one, and the wait polls ten times a second.
func labReady(dir string, clusters []string, want map[string]int, st *daemon.Status) (bool, string) {
	ok, why := readiness(clusters, want, st)
	if !ok {
		return ok, why
	}
	if stale := daemon.StaleDataPlanes(dir, st); len(stale) > 0 {
		return false, "stale processes still serve: " + strings.Join(stale, "; ")
	}
	return true, why
}

// readiness compares the daemon's pods with the pods wanted per cluster.
func readiness(clusters []string, want map[string]int, st *daemon.Status) (bool, string) {
	if !st.Synced {
		return false, "the daemon is still listing pods"
	}
	serving := map[string]int{}
	var problems []string
	for _, p := range st.Pods {
		switch {
		case p.Error != "":
			problems = append(problems, fmt.Sprintf("pod %s: %s", p.Key(), p.Error))
		case p.Ready && p.Verified && !p.BackendsStale:
			serving[p.Cluster]++
		}
	}
	var missing []string
	for _, c := range clusters {
		if serving[c] != want[c] {
			missing = append(missing, fmt.Sprintf("cluster %s has %d of %d pods serving", c, serving[c], want[c]))
		}
	}
	sort.Strings(problems)
	if len(missing) == 0 && len(problems) == 0 {
		return true, ""
	}
	return false, strings.Join(append(missing, problems...), "; ")
}

// Report is what Down did.
type Report struct {
	Dir       string
	DaemonPID int
	Clusters  []string
	// Nothing is true when there was no lab in Dir.
	Nothing bool
}

// Down stops the daemon, deletes the clusters, removes the lab's files
// and checks that no process of the lab is left.
func Down(ctx context.Context, o Options) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	r := &Report{Dir: o.Dir}
	if !isLabDir(o.Dir) {
		if found := labNamesIn(o.Dir); len(found) > 0 {
			return nil, &NotALabError{Dir: o.Dir, Found: found}
		}
		r.Nothing = true
		return r, nil
	}
	unlock, err := lock(o.Dir)
	if err != nil {
		return nil, err
	}
	defer unlock()
	r.DaemonPID = daemonPID(o.Dir)
	r.Clusters = existingClusters(o.Dir)
	if err := cleanup(ctx, o.Dir, o.Out); err != nil {
		return r, err
	}
	return r, nil
}

// Serve runs the daemon of the lab in dir until ctx ends (`lab serve`).
// It first closes the descriptors beyond stdio it was started with (none
// when `lab up` started it): a lock or a pipe of whoever started it would
// otherwise stay held for the lab's lifetime.
func Serve(ctx context.Context, dir string) error {
	closed, err := detach.CloseInherited()
	if err != nil {
		return fmt.Errorf("lab serve: %w", err)
	}
	if len(closed) > 0 {
		fmt.Fprintf(os.Stderr, "lab serve: closed descriptors %v, inherited from the process that started it\n", closed)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("lab serve: absolute path of lab directory %s: %w", dir, err)
	}
	st, err := readState(abs)
	if err != nil {
		return fmt.Errorf("lab serve: no lab in %s: %w", abs, err)
	}
	t, err := st.topology()
	if err != nil {
		return fmt.Errorf("lab serve: %w", err)
	}
	return daemon.Run(ctx, daemon.Config{
		Dir: abs, Kubeconfig: st.Kubeconfig, Topology: t, Seed: st.Seed,
		Context: func(c string) string { return st.Contexts[c] },
	})
}
