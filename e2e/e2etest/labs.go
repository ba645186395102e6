package e2etest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/mesh-verify/mesh-verify/lab"
	"github.com/mesh-verify/mesh-verify/lab/labtest"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// LabSpec is the lab a test needs.
type LabSpec struct {
	// Topology is a built-in topology's name or a file.
	Topology string
	// Source, when set, is the topology's YAML instead of Topology.
	Source string
	// Manifests, with Source, are the YAML manifests of cluster
	// ManifestsCluster (the mesh's objects, as a topology directory's
	// <cluster>/ holds them). Strings, not a map: a LabSpec is a map key.
	Manifests, ManifestsCluster string
	// DataPlane plays every entry with this data plane (lab up
	// --data-plane), e.g. nginx.
	DataPlane string
	// Seed is the lab's routing seed (lab up --seed); 0 is Seed's, the
	// one every e2e lab shares.
	Seed uint64
}

func (s LabSpec) String() string {
	name := s.Topology
	if s.Source != "" {
		name = "topology from the test"
	}
	if s.DataPlane != "" {
		name += " with data plane " + s.DataPlane
	}
	return name
}

// Lab brings up a lab of the test's own, taken down (by the pids the lab
// recorded) when the test ends.
func (b *Binary) Lab(t testing.TB, spec LabSpec) *lab.Lab {
	t.Helper()
	return own(t, spec, b.up(t, spec))
}

// own makes a lab the test's: taken down when it ends.
func own(t testing.TB, spec LabSpec, u *labUp) *lab.Lab {
	t.Helper()
	t.Cleanup(func() {
		if err := u.down(); err != nil {
			t.Errorf("lab down (%s): %v", spec, err)
		}
	})
	if u.err != nil {
		t.Fatalf("lab up %s: %v", spec, u.err)
	}
	return u.lab
}

// SharedLab is the package's one lab of spec, brought up by the first
// test that asks and taken down by Main after the last test: tests that
// only read a lab (run scenarios, read its logs and status) share it
// instead of paying a bring-up each (10-20 s a cluster). A test that
// breaks or changes its lab uses Lab or TakeLab.
func (b *Binary) SharedLab(t testing.TB, spec LabSpec) *lab.Lab {
	t.Helper()
	b.shared.mu.Lock()
	if b.shared.m == nil {
		b.shared.m = map[LabSpec]*labUp{}
	}
	e, ok := b.shared.m[spec]
	if !ok {
		e = &labUp{ready: make(chan struct{})}
		b.shared.m[spec] = e
	}
	e.users++
	b.shared.mu.Unlock()
	t.Cleanup(func() {
		b.shared.mu.Lock()
		e.users--
		b.shared.mu.Unlock()
	})
	if !ok {
		up := b.up(t, spec)
		e.lab, e.opts, e.topoDir, e.err = up.lab, up.opts, up.topoDir, up.err
		close(e.ready)
	}
	<-e.ready
	if e.err != nil {
		t.Fatalf("lab up %s (shared): %v", spec, e.err)
	}
	return e.lab
}

// TakeLab is for the last test of a shared lab, one that breaks it (kills
// an API server, scales a workload): it takes the shared lab of spec if
// one is up and no test uses it, else brings up its own; either way the
// lab is the test's and is taken down when it ends.
func (b *Binary) TakeLab(t testing.TB, spec LabSpec) *lab.Lab {
	t.Helper()
	b.shared.mu.Lock()
	e, ok := b.shared.m[spec]
	if ok {
		select {
		case <-e.ready:
			ok = e.err == nil && e.users == 0
		default:
			ok = false
		}
	}
	if ok {
		delete(b.shared.m, spec)
	}
	b.shared.mu.Unlock()
	if !ok {
		return b.Lab(t, spec)
	}
	t.Logf("lab %s: taken over from the tests that shared it", spec)
	return own(t, spec, e)
}

// labs are the package's shared labs by spec.
type labs struct {
	mu sync.Mutex
	m  map[LabSpec]*labUp
}

func (l *labs) downAll() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for spec, e := range l.m {
		<-e.ready
		if err := e.down(); err != nil {
			errs = append(errs, fmt.Errorf("lab down (%s): %w", spec, err))
		}
		delete(l.m, spec)
	}
	return errors.Join(errs...)
}

// labUp is one lab brought up (or the reason it is not).
type labUp struct {
	ready   chan struct{}
	users   int
	lab     *lab.Lab
	opts    lab.Options
	topoDir string
	err     error
}

// up brings a lab up with the lab package's own Up, its daemon being
// the built mesh-verify-lab's `serve` (the default, this executable, is
// the test binary here), which runs Job pods as the mesh-verify beside it. A failed Up removes what it started.
func (b *Binary) up(t testing.TB, spec LabSpec) *labUp {
	t.Helper()
	bin := labtest.Binaries(t)
	u := &labUp{}
	topo := spec.Topology
	if spec.Source != "" {
		u.topoDir, u.err = os.MkdirTemp("", "mve2e-topo-")
		if u.err != nil {
			return u
		}
		topo = filepath.Join(u.topoDir, "topology.yaml")
		if spec.Manifests != "" {
			// A topology directory: lab.yaml and <cluster>/*.yaml.
			topo = u.topoDir
			cdir := filepath.Join(u.topoDir, spec.ManifestsCluster)
			if u.err = os.Mkdir(cdir, 0o700); u.err != nil {
				return u
			}
			if u.err = os.WriteFile(filepath.Join(cdir, "manifests.yaml"), []byte(spec.Manifests), 0o600); u.err != nil {
				return u
			}
			if u.err = os.WriteFile(filepath.Join(u.topoDir, topology.LabFile), []byte(spec.Source), 0o600); u.err != nil {
				return u
			}
		} else if u.err = os.WriteFile(topo, []byte(spec.Source), 0o600); u.err != nil {
			return u
		}
	}
	// A short directory: kwokctl puts unix sockets and long pki paths in it.
	dir, err := os.MkdirTemp("", "mve2e-")
	if err != nil {
		u.err = err
		return u
	}
	seed := spec.Seed
	if seed == 0 {
		seed = Seed(t)
	}
	u.opts = lab.Options{Dir: dir, Topology: topo, Bin: string(bin), RepoRoot: labtest.RepoRoot(), Seed: &seed, DataPlane: spec.DataPlane,
		Daemon: func(dir string) (*exec.Cmd, error) { return exec.Command(b.LabPath, "serve", "--dir", dir), nil }}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	began := time.Now()
	u.lab, u.err = lab.Up(ctx, u.opts)
	if u.err == nil {
		t.Logf("lab up %s (seed %d) in %s", spec, seed, time.Since(began).Round(time.Millisecond))
	}
	return u
}

// down stops the lab's daemon and clusters by their pids and removes its
// directory.
func (u *labUp) down() error {
	if u.topoDir != "" {
		defer os.RemoveAll(u.topoDir)
	}
	if u.opts.Dir == "" {
		return nil
	}
	defer os.RemoveAll(u.opts.Dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := lab.Down(ctx, u.opts)
	return err
}
