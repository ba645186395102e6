package kwok

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/crilog"
	"github.com/mesh-verify/mesh-verify/lab/internal/detach"
)

// kwokctl create cluster starts the kwok controller (Up) before it creates
// kwok's CRDs (InitCRDs). The controller's informers for Logs and
// PortForward objects list once at start; when that list comes before
// the CRD is served it fails with 404, and client-go's reflector retries
// with a backoff that grows to 30-60 s. Until then every `kubectl logs`
// and port-forward of a pod is refused ("the server rejected our request
// for an unknown reason"). On an idle machine the list usually wins the
// race; on a loaded one (CI running several labs) a pod could stay
// unreadable for a minute. tools/lab/NOTES.md, "kwok's CRD watches".
const (
	canaryName      = "mesh-verify-kwok-canary"
	canaryContainer = "canary"
	// canaryGrace is how long a kwok that answers may take to see the
	// canary before it is restarted: its reflector's first retry comes
	// 0.8-1.6 s after a failed list.
	canaryGrace = 3 * time.Second
	// kwokUpTimeout bounds the wait for kwok's server, once at start
	// and once after a restart.
	kwokUpTimeout = 90 * time.Second
	// watchFailure is what client-go's reflector logs (klog, on the
	// controller's stderr, which kwokctl sends to its log) when a list
	// or watch fails; kwok's own types are the ones that matter here.
	watchFailure = `"Failed to watch"`
	kwokTypes    = "v1alpha1."
)

// EnsureWatches returns once the kwok controller of cluster name serves
// the Logs objects created from now on: a canary Logs object must be
// readable through kwok's own server, and kwok's log must show no failed
// list of its CRDs. Otherwise the controller is restarted (same command,
// environment and log), which lists the CRDs that now exist. It reports
// whether it restarted.
func (l *Lab) EnsureWatches(ctx context.Context, name string) (restarted bool, err error) {
	dir := l.clusterDir(name)
	canaryLog := filepath.Join(dir, canaryName+".log")
	// One CRI line, as a container runtime writes it.
	if err := writeCanary(canaryLog); err != nil {
		return false, fmt.Errorf("lab cluster %s: write kwok canary log: %w", name, err)
	}
	obj := fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: Logs
metadata: {name: %s, namespace: default}
spec:
  logs: [{containers: [%s], logsFile: %q}]
`, canaryName, canaryContainer, canaryLog)
	// The CRD may not be served yet (kwokctl has only just created it).
	if err := Retry(ctx, kwokUpTimeout, 200*time.Millisecond, func() error {
		_, err := l.Kubectl(ctx, name, []byte(obj), "apply", "-f", "-")
		return err
	}); err != nil {
		return false, fmt.Errorf("lab cluster %s: create kwok canary: %w", name, err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		// Retried: the next cluster's create may be rewriting the shared
		// kubeconfig kubectl reads (Start runs while this one is checked).
		derr := Retry(dctx, 20*time.Second, 200*time.Millisecond, func() error {
			_, err := l.Kubectl(dctx, name, nil, "delete", "logs.kwok.x-k8s.io", canaryName, "-n", "default", "--ignore-not-found")
			return err
		})
		if derr != nil && err == nil {
			err = fmt.Errorf("lab cluster %s: delete kwok canary: %w", name, derr)
		}
		_ = os.Remove(canaryLog)
	}()
	pc, err := kwokProcess(dir)
	if err != nil {
		return false, fmt.Errorf("lab cluster %s: %w", name, err)
	}
	if seen, err := waitCanary(ctx, pc.addr, kwokUpTimeout, canaryGrace); err != nil {
		return false, fmt.Errorf("lab cluster %s: %w", name, err)
	} else if seen {
		// Lists started together with the Logs one have ended by now.
		time.Sleep(200 * time.Millisecond)
		if !failedWatch(filepath.Join(dir, "logs", "kwok-controller.log")) {
			return false, nil
		}
	}
	if err := l.restartKwok(ctx, dir, pc); err != nil {
		return true, fmt.Errorf("lab cluster %s: %w", name, err)
	}
	if seen, err := waitCanary(ctx, pc.addr, kwokUpTimeout, kwokUpTimeout); err != nil || !seen {
		if err == nil {
			err = fmt.Errorf("kwok controller (restarted) at %s does not serve the canary's logs after %v", pc.addr, kwokUpTimeout)
		}
		return true, fmt.Errorf("lab cluster %s: %w", name, err)
	}
	return true, nil
}

// kwokCmd is how kwokctl started a cluster's kwok controller.
type kwokCmd struct {
	pid     int
	pidFile string
	args    []string
	env     []string
	cwd     string
	addr    string // --server-address: kwok's kubelet API, plain HTTP too
}

// ControllerManagerRunning reports whether cluster's kube-controller-manager
// runs (its pid file, as kwokctl writes it, names a live process of the
// cluster) and no component of the cluster logged a port it could not
// bind: a controller-manager that is slow, not gone.
func (l *Lab) ControllerManagerRunning(cluster string) bool {
	dir := l.clusterDir(cluster)
	if findPortConflict(dir, cluster) != nil {
		return false
	}
	b, err := os.ReadFile(filepath.Join(dir, "pids", "kube-controller-manager.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err == nil && Owned(pid, dir)
}

func kwokProcess(dir string) (kwokCmd, error) {
	pc := kwokCmd{pidFile: filepath.Join(dir, "pids", "kwok-controller.pid")}
	b, err := os.ReadFile(pc.pidFile)
	if err != nil {
		return pc, fmt.Errorf("kwok controller: %w", err)
	}
	if pc.pid, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil {
		return pc, fmt.Errorf("kwok controller: pid file %s: %w", pc.pidFile, err)
	}
	p, ok := ReadProc(pc.pid)
	if !ok || !p.OwnedBy(dir) {
		return pc, fmt.Errorf("kwok controller: pid %d (from %s) is not a running process of %s", pc.pid, pc.pidFile, dir)
	}
	pc.args = p.Args
	proc := filepath.Join("/proc", strconv.Itoa(pc.pid))
	env, err := os.ReadFile(filepath.Join(proc, "environ"))
	if err != nil {
		return pc, fmt.Errorf("kwok controller pid %d: %w", pc.pid, err)
	}
	pc.env = strings.Split(strings.TrimSuffix(string(env), "\x00"), "\x00")
	if pc.cwd, err = os.Readlink(filepath.Join(proc, "cwd")); err != nil {
		return pc, fmt.Errorf("kwok controller pid %d: %w", pc.pid, err)
	}
	for _, a := range pc.args {
		if v, ok := strings.CutPrefix(a, "--server-address="); ok {
			pc.addr = v
		}
	}
	if pc.addr == "" {
		return pc, fmt.Errorf("kwok controller pid %d has no --server-address in %q", pc.pid, pc.args)
	}
	return pc, nil
}

// waitCanary waits up to up for kwok's server to answer, then up to grace
// for it to serve the canary's log. seen is false when kwok answered but
// never served it.
func waitCanary(ctx context.Context, addr string, up, grace time.Duration) (seen bool, err error) {
	u := "http://" + addr + "/containerLogs/default/" + canaryName + "/" + canaryContainer + "?tailLines=1"
	client := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(up)
	var answered time.Time
	var last string
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && bytes.Contains(body, []byte("canary")) {
				return true, nil
			}
			last = fmt.Sprintf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(body))
			if answered.IsZero() {
				answered = time.Now()
			}
			if time.Since(answered) > grace {
				return false, nil
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return false, fmt.Errorf("kwok controller at %s: no answer to %s after %v: %s", addr, u, up, last)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// failedWatch reports whether kwok's log shows a failed list or watch of
// one of kwok's own types.
func failedWatch(log string) bool {
	b, err := readTail(log, 1<<20)
	if err != nil {
		return true // unknown: a restart is cheap and always safe
	}
	for _, line := range bytes.Split(b, []byte("\n")) {
		if bytes.Contains(line, []byte(watchFailure)) && bytes.Contains(line, []byte(kwokTypes)) {
			return true
		}
	}
	return false
}

// restartKwok stops the kwok controller and starts it again as kwokctl
// did: same argv, environment and directory, its own session, output
// appended to its log, its pid in kwokctl's pid file (which `kwokctl
// delete cluster` stops). The create lock is held across the gap, until
// the new process listens again, so that no lab's kwokctl picks the
// freed port.
func (l *Lab) restartKwok(ctx context.Context, dir string, pc kwokCmd) error {
	unlock, err := LockCreates()
	if err != nil {
		return err
	}
	defer unlock()
	if err := stopPID(ctx, pc.pid, 10*time.Second); err != nil {
		return fmt.Errorf("restart kwok controller: %w", err)
	}
	logf, err := os.OpenFile(filepath.Join(dir, "logs", "kwok-controller.log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return fmt.Errorf("restart kwok controller: %w", err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "--- mesh-verify lab: kwok controller restarted at %s: it listed kwok's CRDs before kwokctl created them (tools/lab/NOTES.md) ---\n", time.Now().UTC().Format(time.RFC3339Nano))
	cmd := exec.Command(pc.args[0], pc.args[1:]...)
	cmd.Env, cmd.Dir = pc.env, pc.cwd
	if err := detach.Background(cmd, logf); err != nil {
		return fmt.Errorf("restart kwok controller: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("restart kwok controller %s: %w", pc.args[0], err)
	}
	// Reaped here if it ends while we run; kwokctl delete stops it by pid.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(pc.pidFile, []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return fmt.Errorf("restart kwok controller: %w", err)
	}
	// Hold the lock until the port is taken again.
	return Retry(ctx, kwokUpTimeout, 100*time.Millisecond, func() error {
		c, err := net.DialTimeout("tcp", pc.addr, time.Second)
		if err != nil {
			return fmt.Errorf("restarted kwok controller does not listen on %s: %w", pc.addr, err)
		}
		return c.Close()
	})
}

// writeCanary writes the canary's one log line, with crilog's
// timestamps, as the lab's pods' logs are written.
func writeCanary(path string) error {
	lg, err := crilog.Open(path)
	if err != nil {
		return err
	}
	if err := lg.Line("canary"); err != nil {
		lg.Close()
		return err
	}
	return lg.Close()
}

// stopPID sends SIGTERM, then SIGKILL after d, and waits until pid is gone.
func stopPID(ctx context.Context, pid int, d time.Duration) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(d)
	killed := false
	for Alive(pid) {
		if !killed && time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed, deadline = true, time.Now().Add(5*time.Second)
		} else if killed && time.Now().After(deadline) {
			return fmt.Errorf("stop pid %d: still running 5s after SIGKILL", pid)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// Retry calls f every interval until it succeeds, d has passed (f's
// last error) or ctx ends.
func Retry(ctx context.Context, d, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}
