package daemon

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/meshsim"
	"github.com/mesh-verify/mesh-verify/lab/nginx"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// dataPlane plays one entry pod's routing: the mesh simulator, or nginx.
type dataPlane interface {
	Addr() string
	SetBackends(ctx context.Context, bs []meshsim.Backend) error
	// Stats are the simulator's routed counts; nil for nginx, whose
	// access log (Log) records every request instead.
	Stats() *meshsim.Stats
	// Log is the data plane's own request log, "" when it keeps none.
	Log() string
	Stop()
}

// entryPlane is the data plane of one entry pod or sidecar.
type entryPlane struct {
	entry *topology.Entry
	dp    dataPlane
	// seed seeds the simulator's random choices (nginx has its own).
	seed uint64
	// policy is the one the data plane started with.
	policy meshsim.Policy
}

// simPlane runs a meshsim.Sim on a loopback listener.
type simPlane struct {
	s    *meshsim.Sim
	addr string
	stop context.CancelFunc
	done chan struct{}
}

func (p *simPlane) Addr() string { return p.addr }
func (p *simPlane) SetBackends(_ context.Context, bs []meshsim.Backend) error {
	p.s.SetBackends(bs)
	return nil
}
func (p *simPlane) Stats() *meshsim.Stats { st := p.s.Stats(); return &st }
func (p *simPlane) Log() string           { return "" }
func (p *simPlane) Stop() {
	p.stop()
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
	}
}

// nginxPlane adapts nginx.Plane.
type nginxPlane struct{ p *nginx.Plane }

func (p nginxPlane) Addr() string { return p.p.Addr() }
func (p nginxPlane) SetBackends(ctx context.Context, bs []meshsim.Backend) error {
	return p.p.SetBackends(ctx, bs)
}
func (p nginxPlane) Set(ctx context.Context, pol meshsim.Policy, bs []meshsim.Backend) error {
	return p.p.Set(ctx, pol, bs)
}
func (p nginxPlane) Stats() *meshsim.Stats { return nil }
func (p nginxPlane) Log() string           { return p.p.AccessLog() }
func (p nginxPlane) Stop()                 { p.p.Stop(stopTimeout) }

// startPlane starts the data plane of entry e for the pod ref; px says
// how the simulator proxies (nginx logs and proxies as nginx does).
func (d *Daemon) startPlane(ctx context.Context, e *topology.Entry, ref podRef, px meshsim.Proxying) (*entryPlane, error) {
	p, err := d.entryPolicy(e)
	if err != nil {
		return nil, err
	}
	if e.UsesNginx() {
		bin, err := d.nginx.binary(d.cfg.Dir)
		if err != nil {
			return nil, fmt.Errorf("entry %s: %w", e.Name, err)
		}
		dir := filepath.Join(d.cfg.Dir, "nginx", ref.cluster+"_"+ref.namespace+"_"+ref.name)
		np, err := nginx.Start(ctx, bin, dir, p)
		if err != nil {
			return nil, fmt.Errorf("entry %s: %w", e.Name, err)
		}
		d.log.Info("nginx data plane started", "entry", e.Name, "pod", ref.String(), "pid", np.PID(), "addr", np.Addr())
		return &entryPlane{entry: e, dp: nginxPlane{np}, policy: p}, nil
	}
	d.mu.Lock()
	instance := d.instances[e.Name+"@"+ref.cluster]
	d.instances[e.Name+"@"+ref.cluster]++
	d.mu.Unlock()
	p.Seed = entrySeed(d.cfg.Seed, e.Name, ref.cluster, instance)
	s, err := meshsim.New(p)
	if err != nil {
		return nil, fmt.Errorf("entry %s: %w", e.Name, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("entry %s: listen: %w", e.Name, err)
	}
	sctx, cancel := context.WithCancel(context.Background())
	out := &simPlane{s: s, addr: ln.Addr().String(), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(out.done)
		if err := s.ServeWith(sctx, ln, px); err != nil {
			d.log.Error("mesh simulator stopped", "entry", e.Name, "err", err)
		}
	}()
	return &entryPlane{entry: e, dp: out, seed: p.Seed, policy: p}, nil
}

// NginxBinary is where the daemon of the lab in dir copies nginx: every
// nginx process of the lab runs this executable.
func NginxBinary(dir string) string { return filepath.Join(dir, "nginx", "bin", "nginx") }

// nginxBinary is the lab's own copy of the machine's nginx, made once:
// run from inside the lab directory, its processes are recognisably the
// lab's (`lab down` finds any it left behind by their executable).
type nginxBinary struct {
	mu   sync.Mutex
	path string
}

func (n *nginxBinary) binary(labDir string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.path != "" {
		return n.path, nil
	}
	src, err := nginx.Find()
	if err != nil {
		return "", err
	}
	dst := NginxBinary(labDir)
	if err := copyFile(src, dst); err != nil {
		return "", fmt.Errorf("copy %s into the lab: %w", src, err)
	}
	n.path = dst
	return dst, nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
