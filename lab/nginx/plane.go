package nginx

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/mesh-verify/mesh-verify/internal/nginxbin"
	"github.com/mesh-verify/mesh-verify/lab/internal/detach"
	"github.com/mesh-verify/mesh-verify/lab/kwok"
	"github.com/mesh-verify/mesh-verify/lab/meshsim"
)

// Find returns the nginx executable of the machine (internal/nginxbin).
func Find() (string, error) {
	p, err := nginxbin.Find()
	if err != nil {
		return "", fmt.Errorf("%w; the nginx data plane needs it", err)
	}
	return p, nil
}

// Plane is one running nginx playing one entry pod's data plane. It is
// started with no backends (everything answered 503) and given them with
// SetBackends, which reloads nginx and returns once the new configuration
// serves.
type Plane struct {
	bin, dir string
	policy   meshsim.Policy
	addr     string
	cmd      *exec.Cmd
	exited   chan struct{}

	mu  sync.Mutex
	gen int
	// backends are the last SetBackends or Set gave, for a SetPolicy.
	backends []meshsim.Backend
}

// Start runs nginx (bin, the lab's own copy, so that the lab's leftover
// check knows its processes) with its files in dir, listening on a free
// loopback port. nginx runs in the foreground with its master process,
// in a process group of its own, and is stopped by Stop.
func Start(ctx context.Context, bin, dir string, p meshsim.Policy) (*Plane, error) {
	if err := Supports(p); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("nginx data plane: %w", err)
	}
	var lastErr error
	// The port is picked free and then handed to nginx, so another
	// process may take it in between: try a few.
	for range 3 {
		pl, err := start(ctx, bin, dir, p)
		if err == nil {
			return pl, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "Address already in use") {
			break
		}
	}
	return nil, lastErr
}

func start(ctx context.Context, bin, dir string, p meshsim.Policy) (*Plane, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("nginx data plane: pick a port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	pl := &Plane{bin: bin, dir: dir, policy: p, addr: addr, exited: make(chan struct{})}
	if err := pl.write(nil); err != nil {
		return nil, err
	}
	logf, err := os.OpenFile(pl.stderrPath(), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("nginx data plane: %w", err)
	}
	defer logf.Close()
	cmd := exec.Command(bin, "-p", dir, "-c", pl.confPath())
	cmd.Dir = dir
	// In the background: stdin /dev/null, stdout and stderr to its file,
	// none of the daemon's descriptors, and a session of its own, so a
	// master that does not stop its workers can be made to, by its process
	// group's id (= the master's pid).
	if err := detach.Background(cmd, logf); err != nil {
		return nil, fmt.Errorf("nginx data plane: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("nginx data plane: start %s: %w", bin, err)
	}
	pl.cmd = cmd
	go func() { _ = cmd.Wait(); close(pl.exited) }()
	if err := pl.waitGeneration(ctx, 0, 10*time.Second); err != nil {
		pl.Stop(5 * time.Second)
		return nil, err
	}
	return pl, nil
}

// Addr is where nginx listens.
func (pl *Plane) Addr() string { return pl.addr }

// PID is the nginx master's process id.
func (pl *Plane) PID() int { return pl.cmd.Process.Pid }

// AccessLog is nginx's log of primary requests: time, request id,
// upstream address, status.
func (pl *Plane) AccessLog() string { return filepath.Join(pl.dir, "access.log") }

func (pl *Plane) confPath() string { return filepath.Join(pl.dir, "nginx.conf") }

// write renders the configuration for bs and, once `nginx -t` accepts
// it, puts it in place; a configuration nginx would refuse never reaches
// the running master (a reload would keep the old one and say so only in
// its error log).
func (pl *Plane) write(bs []meshsim.Backend) error {
	conf, err := Render(pl.policy, bs, Conf{Dir: pl.dir, Listen: pl.addr, Generation: pl.gen})
	if err != nil {
		return err
	}
	tmp := pl.confPath() + ".next"
	if err := os.WriteFile(tmp, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("nginx data plane: write config: %w", err)
	}
	if out, err := exec.Command(pl.bin, "-t", "-q", "-p", pl.dir, "-c", tmp).CombinedOutput(); err != nil {
		return fmt.Errorf("nginx data plane: nginx -t refuses the configuration for generation %d (%s): %w: %s", pl.gen, tmp, err, strings.TrimSpace(string(out)))
	}
	if err := os.Rename(tmp, pl.confPath()); err != nil {
		return fmt.Errorf("nginx data plane: write config: %w", err)
	}
	return nil
}

// SetBackends renders the configuration for bs, reloads nginx (SIGHUP to
// its master) and waits until the new configuration answers.
func (pl *Plane) SetBackends(ctx context.Context, bs []meshsim.Backend) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	pl.backends = bs
	return pl.reloadLocked(ctx)
}

// SetPolicy makes nginx play p from now on, as a control plane's push
// reconfigures a proxy (the daemon calls it when the mesh's objects
// change): a configuration rendered for p over the current backends,
// reloaded as SetBackends does. A policy nginx cannot play is refused and
// the old one kept.
func (pl *Plane) SetPolicy(ctx context.Context, p meshsim.Policy) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.setLocked(ctx, p, pl.backends)
}

// Set makes nginx play p over bs with one reload: a route change that
// also changes the backends (a split between other Services, a Skupper
// site linked) is one configuration, not two reloads in a row. As
// SetPolicy, a policy nginx cannot play is refused, and on any error the
// old policy and backends are kept.
func (pl *Plane) Set(ctx context.Context, p meshsim.Policy, bs []meshsim.Backend) error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.setLocked(ctx, p, bs)
}

func (pl *Plane) setLocked(ctx context.Context, p meshsim.Policy, bs []meshsim.Backend) error {
	if err := Supports(p); err != nil {
		return err
	}
	oldP, oldB := pl.policy, pl.backends
	pl.policy, pl.backends = p, bs
	if err := pl.reloadLocked(ctx); err != nil {
		pl.policy, pl.backends = oldP, oldB
		return err
	}
	return nil
}

// reloadLocked renders the configuration for pl.policy and pl.backends,
// reloads nginx (SIGHUP to its master) and waits until the new
// configuration answers. Callers hold pl.mu.
func (pl *Plane) reloadLocked(ctx context.Context) error {
	pl.gen++
	if err := pl.write(pl.backends); err != nil {
		return err
	}
	// The old workers keep accepting until the master has started the new
	// ones and told the old ones to quit: the reload is done when the new
	// configuration answers and every old worker has exited.
	old := kwok.Children(pl.PID())
	if err := pl.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("nginx data plane: reload (pid %d): %w", pl.PID(), err)
	}
	if err := pl.waitGeneration(ctx, pl.gen, 10*time.Second); err != nil {
		return err
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := 0
		for _, pid := range old {
			if kwok.Alive(pid) {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("nginx data plane (pid %d): %d old worker(s) still running 10s after a reload", pl.PID(), left)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// waitGeneration polls GenerationPath until it answers gen.
func (pl *Plane) waitGeneration(ctx context.Context, gen int, limit time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	// No keep-alive: a connection to an old worker would keep answering
	// the old generation while it drains.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true, Proxy: nil}, Timeout: time.Second}
	want := strconv.Itoa(gen)
	var last string
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+pl.addr+GenerationPath, nil)
		if resp, err := client.Do(req); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64))
			resp.Body.Close()
			last = strings.TrimSpace(string(b))
			if last == want {
				return nil
			}
		} else {
			last = err.Error()
		}
		select {
		case <-pl.exited:
			return fmt.Errorf("nginx data plane (pid %d) exited: %s", pl.PID(), pl.tail())
		case <-ctx.Done():
			return fmt.Errorf("nginx data plane (pid %d) on %s does not serve configuration generation %d after %v (last answer: %s): %s",
				pl.PID(), pl.addr, gen, limit, last, pl.tail())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stderrPath is where nginx's stdout and stderr go (what it prints before
// its error log is open: a configuration it refuses, a port in use).
func (pl *Plane) stderrPath() string { return filepath.Join(pl.dir, "stderr.log") }

// tail is the end of nginx's stderr and error log, for error messages.
func (pl *Plane) tail() string {
	var parts []string
	for _, p := range []string{pl.stderrPath(), filepath.Join(pl.dir, "error.log")} {
		b, err := os.ReadFile(p)
		if err != nil || len(bytes.TrimSpace(b)) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 5 {
			lines = lines[len(lines)-5:]
		}
		parts = append(parts, strings.Join(lines, "\n"))
	}
	if len(parts) == 0 {
		return "(nginx printed nothing)"
	}
	return strings.Join(parts, "\n")
}

// Stop ends nginx: SIGTERM to the master (fast shutdown; it stops its
// workers), then, past timeout, SIGKILL to its process group.
func (pl *Plane) Stop(timeout time.Duration) {
	select {
	case <-pl.exited:
		return // reaped: its pid may be someone else's by now
	default:
	}
	pid := pl.cmd.Process.Pid
	_ = pl.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-pl.exited:
		return // the master waits for its workers before it exits
	case <-time.After(timeout):
	}
	// The master is alive (not reaped, so its pid is still its own and
	// so is the group id): end it and its workers.
	_ = syscall.Kill(-pid, syscall.SIGKILL)
	<-pl.exited
}
