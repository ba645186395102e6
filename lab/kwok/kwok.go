// Package kwok runs real Kubernetes API servers for the local lab with
// kwokctl's binary runtime: etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler and the kwok controller as local processes, bound to
// 127.0.0.1, in a lab-owned work directory and kubeconfig. It never reads
// or writes the user's ~/.kube or ~/.kwok (tools/lab/NOTES.md).
package kwok

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/mesh-verify/mesh-verify/lab/internal/detach"
)

// stages are the lab's kwok stages: kwok's defaults, except that a lab
// pod's deletion honours its grace period (stages.yaml says how).
//
//go:embed stages.yaml
var stages string

// kwokctlConfig is the lab's kwokctl configuration: where components
// bind, and what each cluster's control plane serves and runs (the file
// says why each setting).
//
//go:embed kwokctl.yaml
var kwokctlConfig string

// kubectlPlaceholder is the line of kwokctl.yaml naming the lab's kubectl.
const kubectlPlaceholder = "kubectlBinary: KUBECTL_BINARY"

// ManagedLabel marks the pods the lab daemon serves; kwok leaves their
// deletion to the daemon until their grace period ends (stages.yaml).
const ManagedLabel = "lab.mesh-verify.io/managed"

// Binaries is the directory tools/lab/build.sh fills.
type Binaries string

// Names of the binaries a lab needs.
func binaryNames() []string {
	return []string{"kwokctl", "kwok", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}
}

// Path returns the path of one binary.
func (b Binaries) Path(name string) string { return filepath.Join(string(b), name) }

// Check reports the first missing binary.
func (b Binaries) Check() error {
	for _, n := range binaryNames() {
		if st, err := os.Stat(b.Path(n)); err != nil || st.IsDir() {
			return fmt.Errorf("lab binary %s missing in %s (run tools/lab/build.sh)", n, b)
		}
	}
	return nil
}

// FindBinaries locates the lab's tool binaries: $MESH_VERIFY_LAB_BIN, else
// the output of tools/lab/build.sh under repoRoot, which builds them on
// first use (minutes) and answers at once when they are cached.
func FindBinaries(ctx context.Context, repoRoot string) (Binaries, error) {
	if d := os.Getenv("MESH_VERIFY_LAB_BIN"); d != "" {
		if err := Binaries(d).Check(); err == nil {
			return Binaries(d), nil
		}
	}
	script := filepath.Join(repoRoot, "tools", "lab", "build.sh")
	cmd := exec.CommandContext(ctx, "bash", script)
	// Its own process group, so that a cancel stops the whole build (go
	// build, its compilers, the heartbeat), not only bash.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("build lab binaries with %s: %w", script, err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	b := Binaries(strings.TrimSpace(lines[len(lines)-1]))
	return b, b.Check()
}

// Lab is a set of clusters sharing one work directory and one kubeconfig.
type Lab struct {
	Bin        Binaries
	Dir        string
	Kubeconfig string
	// ContextPrefix names contexts like the tutorials' kind clusters.
	ContextPrefix string
	// Out receives progress worth telling (a create retried after a port
	// conflict); nil discards it.
	Out io.Writer

	mu       sync.Mutex // kwokctl picks ports racily: clusters are created one at a time
	clusters []string
}

// New prepares a lab in dir (created if missing).
func New(bin Binaries, dir string) (*Lab, error) {
	if err := bin.Check(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create lab directory %s: %w", dir, err)
	}
	l := &Lab{Bin: bin, Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig"), ContextPrefix: "kind-"}
	conf := Config(bin.Path("kubectl")) + "---\n" + stages
	if err := os.WriteFile(l.config(), []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("write kwokctl config: %w", err)
	}
	return l, nil
}

// Config is the KwokctlConfiguration document of a lab whose kubectl is
// at kubectl (quoted: a path may hold any character).
func Config(kubectl string) string {
	return strings.Replace(kwokctlConfig, kubectlPlaceholder, "kubectlBinary: "+strconv.Quote(kubectl), 1)
}

func (l *Lab) config() string { return filepath.Join(l.Dir, "kwok.yaml") }

// Context is the kubeconfig context of a cluster.
func (l *Lab) Context(cluster string) string { return l.ContextPrefix + cluster }

// Env is the environment every lab tool runs with: our kubectl first on
// PATH (kwokctl calls `kubectl`), and kwok's, kubectl's and the kubeconfig's
// state inside the lab directory.
func (l *Lab) Env() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, e := range env {
		if strings.HasPrefix(e, "KUBECONFIG=") || strings.HasPrefix(e, "KWOK_WORKDIR=") ||
			strings.HasPrefix(e, "KUBECACHEDIR=") || strings.HasPrefix(e, "PATH=") {
			continue
		}
		out = append(out, e)
	}
	return append(out,
		"PATH="+string(l.Bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"KUBECONFIG="+l.Kubeconfig,
		"KWOK_WORKDIR="+filepath.Join(l.Dir, "kwok"),
		"KUBECACHEDIR="+filepath.Join(l.Dir, "kubecache"),
	)
}

func (l *Lab) run(ctx context.Context, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, l.Bin.Path(name), args...)
	cmd.Env = l.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(lastLines(out.String(), 8)))
	}
	return out.String(), nil
}

// Kubectl runs the lab's kubectl against one cluster, through the
// cluster's own kubeconfig (ClusterKubeconfig) once Start wrote it: the
// shared one is rewritten in place by every kwokctl create of another
// cluster, and a kubectl reading it mid-rewrite failed with "context
// kind-c1 does not exist" while lab up applied c1's manifests. Without
// that file it fails naming it: falling back to the shared one would hide
// a cluster whose Start failed.
func (l *Lab) Kubectl(ctx context.Context, cluster string, stdin []byte, args ...string) (string, error) {
	kubeconfig := l.ClusterKubeconfig(cluster)
	if _, err := os.Stat(kubeconfig); err != nil {
		return "", fmt.Errorf("kubectl %s (cluster %s): the cluster's kubeconfig, written when it started: %w", strings.Join(args, " "), cluster, err)
	}
	full := append([]string{"--kubeconfig", kubeconfig, "--context", l.Context(cluster)}, args...)
	cmd := exec.CommandContext(ctx, l.Bin.Path("kubectl"), full...)
	cmd.Env = l.Env()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s (cluster %s): %w: %s", strings.Join(args, " "), cluster, err, strings.TrimSpace(errb.String()))
	}
	return out.String(), nil
}

// Create starts one cluster and renames its context to ContextPrefix+name.
// A cluster left over by a crashed run of the same lab is deleted first.
// It returns once the default ServiceAccount exists (pods can be created).
func (l *Lab) Create(ctx context.Context, name string) error {
	if err := l.start(ctx, name, "60s"); err != nil {
		return err
	}
	if _, err := l.EnsureWatches(ctx, name); err != nil {
		return err
	}
	return l.waitReady(ctx, name)
}

// Start is Create without waiting for the controllers: it returns once the
// API server has taken kwok's CRDs (about 2 s instead of 4), so a caller
// can create the next cluster while this one's controller-manager,
// scheduler and kwok controller come up. The caller must wait for what it
// needs: pods are refused until the namespace's default ServiceAccount
// exists, and logs and port-forwards need the node's kubelet endpoint,
// which the kwok controller publishes, and EnsureWatches.
func (l *Lab) Start(ctx context.Context, name string) error {
	return l.start(ctx, name, "0s")
}

func (l *Lab) start(ctx context.Context, name, wait string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	// kwokctl picks free ports without reserving them, so two creates at
	// once (two labs, or test packages running in parallel) can pick the
	// same ones: serialise creates across processes too.
	unlock, err := LockCreates()
	if err != nil {
		return err
	}
	defer unlock()
	for attempt := 1; ; attempt++ {
		if _, err := os.Stat(l.clusterDir(name)); err == nil {
			_, _ = l.run(ctx, "kwokctl", "--name", name, "delete", "cluster", "--kubeconfig", l.Kubeconfig)
		}
		err = l.create(ctx, name, wait)
		var pc *PortConflictError
		if !errors.As(err, &pc) {
			break
		}
		pc.Attempts = attempt
		if attempt == maxCreateAttempts {
			_, _ = l.run(ctx, "kwokctl", "--name", name, "delete", "cluster", "--kubeconfig", l.Kubeconfig)
			return pc // it names the cluster
		}
		// kwokctl skips ports in use when it picks again.
		fmt.Fprintf(l.out(), "  %v; creating it again\n", pc)
	}
	if err != nil {
		return fmt.Errorf("create lab cluster %s: %w", name, err)
	}
	l.clusters = append(l.clusters, name)
	if err := privateKeys(l.clusterDir(name)); err != nil {
		return err
	}
	if err := renameContext(l.Kubeconfig, "kwok-"+name, l.Context(name)); err != nil {
		return fmt.Errorf("rename context of lab cluster %s: %w", name, err)
	}
	return extractContext(l.Kubeconfig, l.Context(name), l.ClusterKubeconfig(name))
}

// ClusterKubeconfig is the kubeconfig holding only one cluster's context
// (named as in the shared one), written once when Start has renamed it
// and never rewritten: what the lab's own kubectl and clients read while
// other clusters are being created.
func (l *Lab) ClusterKubeconfig(cluster string) string {
	return filepath.Join(l.clusterDir(cluster), "lab-context.kubeconfig")
}

// extractContext writes to path a kubeconfig with kubeContext of the
// kubeconfig at from, its cluster and its user only.
func extractContext(from, kubeContext, path string) error {
	cfg, err := clientcmd.LoadFromFile(from)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", from, err)
	}
	cfg.CurrentContext = kubeContext
	if err := clientcmdapi.MinifyConfig(cfg); err != nil {
		return fmt.Errorf("kubeconfig %s, context %s: %w", from, kubeContext, err)
	}
	return WriteKubeconfig(cfg, path)
}

// WriteKubeconfig writes cfg to path atomically (a file beside it, then a
// rename): a kubectl or client reading path meanwhile sees the old file
// or the new one, never a truncated one (clientcmd.WriteToFile truncates
// path, then writes it).
func WriteKubeconfig(cfg *clientcmdapi.Config, path string) error {
	b, err := clientcmd.Write(*cfg)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return fmt.Errorf("write kubeconfig %s: %w", path, err)
	}
	return nil
}

// renameContext renames kubeconfig context from to to, as `kubectl config
// rename-context` does, except that a context already named to is
// replaced: it is a stale one of the same cluster, created before and
// deleted (kwokctl delete removes only its own kwok-NAME context), and a
// cluster created again must not fail on it.
func renameContext(path, from, to string) error {
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	c, ok := cfg.Contexts[from]
	if !ok {
		return fmt.Errorf("kubeconfig %s has no context %s", path, from)
	}
	delete(cfg.Contexts, from)
	cfg.Contexts[to] = c
	if cfg.CurrentContext == from {
		cfg.CurrentContext = to
	}
	return WriteKubeconfig(cfg, path)
}

// privateKeys makes the private keys kwokctl wrote for a cluster (its CA's
// and the admin's, in pki/) readable by their owner only: kwokctl writes
// them 0644, and whoever reads the admin key is the cluster's admin.
func privateKeys(clusterDir string) error {
	keys, err := filepath.Glob(filepath.Join(clusterDir, "pki", "*.key"))
	if err != nil {
		return fmt.Errorf("find the keys of %s: %w", clusterDir, err)
	}
	for _, k := range keys {
		if err := os.Chmod(k, 0o600); err != nil {
			return fmt.Errorf("make key private: %w", err) // the PathError names the file
		}
	}
	return nil
}

// maxCreateAttempts bounds the creates of one cluster that lose a port
// to another process.
const maxCreateAttempts = 3

// conflictPoll is how often a create looks for a component that could not
// bind its port: kwokctl itself would wait minutes for the API server.
const conflictPoll = 200 * time.Millisecond

func (l *Lab) clusterDir(name string) string { return filepath.Join(l.Dir, "kwok", "clusters", name) }

func (l *Lab) out() io.Writer {
	if l.Out == nil {
		return io.Discard
	}
	return l.Out
}

// create runs one `kwokctl create cluster`, watching the components'
// logs: a component that cannot bind the port kwokctl chose for it ends
// the create at once with a *PortConflictError (kwokctl would wait two
// minutes for the API server, then fail on its CRDs).
func (l *Lab) create(ctx context.Context, name, wait string) error {
	b := l.Bin
	args := []string{"-c", l.config(), "--name", name, "create", "cluster", "--runtime", "binary",
		"--etcd-binary", b.Path("etcd"), "--kube-apiserver-binary", b.Path("kube-apiserver"),
		"--kube-controller-manager-binary", b.Path("kube-controller-manager"),
		"--kube-scheduler-binary", b.Path("kube-scheduler"), "--kwok-controller-binary", b.Path("kwok"),
		"--enable-crds=ClusterPortForward,ClusterLogs,PortForward,Logs",
		"--kubeconfig", l.Kubeconfig, "--wait", wait}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(cctx, b.Path("kwokctl"), args...)
	cmd.Env = l.Env()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// kwokctl starts the cluster's components in the background (each in
	// its own session, stdin /dev/null, stdout and stderr to its log in
	// the cluster's logs/), handing on every descriptor it inherited: it
	// must inherit none of this process's.
	if err := detach.CloseOnExec(); err != nil {
		return fmt.Errorf("kwokctl create cluster %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("kwokctl create cluster %s: %w", name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(conflictPoll)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if pc := findPortConflict(l.clusterDir(name), name); pc != nil {
				return pc
			}
			if err != nil {
				return fmt.Errorf("kwokctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(lastLines(out.String(), 8)))
			}
			// Before the create lock goes: until they listen, the ports
			// of this cluster's components look free to another lab.
			return l.waitListening(ctx, name)
		case <-tick.C:
			if pc := findPortConflict(l.clusterDir(name), name); pc != nil {
				cancel() // the components it started are deleted with the cluster
				<-done
				return pc
			}
		}
	}
}

// LockCreates takes the machine-wide lock (flock, released if the
// process dies) that every kwokctl create of a lab holds: while it is
// held no lab cluster picks ports. Tests that free a lab port for a moment
// (a component killed and started again) hold it across the gap.
//
// The lock file lives in the user's cache directory, not under a fixed
// name in the shared /tmp where another user could create it first and
// block (or read) it.
func LockCreates() (func(), error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return nil, fmt.Errorf("kwokctl create lock: %w", err)
	}
	dir := filepath.Join(cache, "mesh-verify")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("kwokctl create lock: %w", err)
	}
	path := filepath.Join(dir, "kwokctl-create.lock")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("kwokctl create lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("kwokctl create lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// waitReady waits for the default ServiceAccount, which the
// controller-manager creates about 2 s after the API server is up; pods
// are refused until it exists.
func (l *Lab) waitReady(ctx context.Context, name string) error {
	err := Retry(ctx, 60*time.Second, 200*time.Millisecond, func() error {
		_, err := l.Kubectl(ctx, name, nil, "get", "serviceaccount", "default", "-n", "default")
		return err
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("lab cluster %s: default service account never appeared: %w", name, err)
	}
	return err
}

// Delete stops one cluster's processes and removes its state.
func (l *Lab) Delete(ctx context.Context, name string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.run(ctx, "kwokctl", "--name", name, "delete", "cluster", "--kubeconfig", l.Kubeconfig)
	for i, c := range l.clusters {
		if c == name {
			l.clusters = append(l.clusters[:i], l.clusters[i+1:]...)
			break
		}
	}
	if err != nil {
		return fmt.Errorf("delete lab cluster %s: %w", name, err)
	}
	return nil
}

// Clusters lists what this process created and has not deleted.
func (l *Lab) Clusters() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.clusters...)
}

// Existing lists clusters kwokctl knows in this lab's work directory,
// including those of a crashed earlier run.
func (l *Lab) Existing() []string {
	entries, _ := os.ReadDir(filepath.Join(l.Dir, "kwok", "clusters"))
	var out []string
	for _, e := range entries {
		if e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

// DeleteAll deletes every cluster in the work directory.
func (l *Lab) DeleteAll(ctx context.Context) error {
	var errs []error
	for _, c := range l.Existing() {
		if err := l.Delete(ctx, c); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Leftovers lists the lab's live (non-zombie) processes as "PID ARGV0":
// what a clean shutdown must leave empty. A process is the lab's only when
// Owned says so; a process that merely names the lab directory (a user's
// `tail -f DIR/daemon.log`, a kubectl using DIR/kubeconfig, a wrapper
// script, another lab whose directory shares a prefix) is not, and is never
// listed here: see Strangers.
func (l *Lab) Leftovers() []string {
	own, _ := scan(l.Dir)
	return own
}

// Strangers lists the pids of live processes whose command line names the
// lab directory but which are not the lab's (nor the caller or its
// ancestors): to be reported, never stopped. Only pids: their command
// lines are none of the lab's business.
func (l *Lab) Strangers() []int {
	_, strangers := scan(l.Dir)
	return strangers
}

// scan walks /proc once for Leftovers and Strangers.
func scan(dir string) (own []string, strangers []int) {
	dir = filepath.Clean(dir)
	entries, _ := os.ReadDir("/proc")
	skip := ancestors()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || skip[pid] {
			continue // not a process, or the caller itself (`lab down --dir DIR` names the dir) or its parents
		}
		p, ok := ReadProc(pid)
		if !ok {
			continue // gone, or exited and waiting for PID 1 to reap it
		}
		switch {
		case p.OwnedBy(dir):
			own = append(own, strconv.Itoa(pid)+" "+p.Args[0])
		case p.mentions(dir):
			strangers = append(strangers, pid)
		}
	}
	return own, strangers
}

// RunningFrom lists the live processes whose executable is exe (also
// after exe was replaced: the kernel then shows it "(deleted)").
func RunningFrom(exe string) []Proc {
	entries, _ := os.ReadDir("/proc")
	var out []Proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if p, ok := ReadProc(pid); ok && (p.Exe == exe || p.Exe == exe+" (deleted)") {
			out = append(out, p)
		}
	}
	return out
}

// ancestors is the set of this process and its parents.
func ancestors() map[int]bool {
	out := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !out[pid]; {
		out[pid] = true
		st, ok := readStat(pid)
		if !ok {
			break
		}
		pid = st.ppid
	}
	return out
}

// stat is what this package reads of /proc/PID/stat.
type stat struct {
	state byte
	ppid  int
}

// readStat parses /proc/PID/stat: the state and parent follow the
// parenthesised command name, which may itself hold spaces and ")".
func readStat(pid int) (stat, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return stat{}, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return stat{}, false
	}
	f := strings.Fields(s[i+1:]) // state, ppid, ...
	if len(f) < 2 || len(f[0]) != 1 {
		return stat{}, false
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return stat{}, false
	}
	return stat{state: f[0][0], ppid: ppid}, true
}

// Alive reports whether pid runs: it exists and is not a zombie waiting
// to be reaped (which holds no resources and runs nothing).
func Alive(pid int) bool {
	st, ok := readStat(pid)
	return ok && st.state != 'Z' && st.state != 'X'
}

// Children lists the live child processes of pid.
func Children(pid int) []int {
	entries, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(c); ok && st.ppid == pid && st.state != 'Z' && st.state != 'X' {
			out = append(out, c)
		}
	}
	return out
}

// Proc is a live process as /proc shows it.
type Proc struct {
	PID  int
	PPID int
	Args []string // never empty
	// Exe is the target of /proc/PID/exe ("" when unreadable; with
	// " (deleted)" appended when the file was replaced since).
	Exe string
}

// ReadProc reads a live process; ok is false when it is gone, a zombie,
// or has no command line (a kernel thread).
func ReadProc(pid int) (p Proc, ok bool) {
	st, ok := readStat(pid)
	if !ok || st.state == 'Z' || st.state == 'X' {
		return p, false
	}
	base := filepath.Join("/proc", strconv.Itoa(pid))
	cmdline, err := os.ReadFile(filepath.Join(base, "cmdline"))
	if err != nil || len(cmdline) == 0 {
		return p, false
	}
	p.PID, p.PPID = pid, st.ppid
	p.Args = strings.Split(strings.TrimSuffix(string(cmdline), "\x00"), "\x00")
	p.Exe, _ = os.Readlink(filepath.Join(base, "exe"))
	return p, true
}

// OwnedBy reports whether p belongs to the lab in dir: its argv[0] or its
// executable lies inside dir (kwokctl starts every component through a
// symlink in its work directory), or it is the lab's daemon.
func (p Proc) OwnedBy(dir string) bool {
	dir = filepath.Clean(dir)
	return inside(p.Args[0], dir) || inside(p.Exe, dir) || IsDaemon(p.Args, dir)
}

// Owned reports whether pid is a live process of the lab in dir.
func Owned(pid int, dir string) bool {
	p, ok := ReadProc(pid)
	return ok && p.OwnedBy(dir)
}

// IsDaemon reports whether args are those of the lab daemon of dir:
// `mesh-verify-lab serve … --dir DIR` (or `--dir=DIR`), DIR exactly; or
// `… lab serve …`, as mesh-verify started it before the lab was a program
// of its own (a lab brought up then is still stopped) and as the lab's
// test binaries do.
func IsDaemon(args []string, dir string) bool {
	dir = filepath.Clean(dir)
	serve, hasDir := false, false
	for i, a := range args {
		next := ""
		if i+1 < len(args) {
			next = args[i+1]
		}
		switch {
		case a == "lab" && next == "serve", i == 0 && isLabProgram(a) && next == "serve":
			serve = true
		case a == "--dir" && next == dir, a == "--dir="+dir:
			hasDir = true
		}
	}
	return serve && hasDir
}

// LabProgram is the name of the lab's executable (lab/cmd/mesh-verify-lab).
const LabProgram = "mesh-verify-lab"

// isLabProgram reports whether argv0 names the lab's executable, by path
// or by name (with Windows' .exe).
func isLabProgram(argv0 string) bool {
	return strings.TrimSuffix(filepath.Base(argv0), ".exe") == LabProgram
}

func inside(path, dir string) bool {
	return filepath.IsAbs(path) && strings.HasPrefix(filepath.Clean(path), dir+"/")
}

func (p Proc) mentions(dir string) bool {
	for _, a := range p.Args {
		if strings.Contains(a, dir) {
			return true
		}
	}
	return false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
