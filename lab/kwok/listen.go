package kwok

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/mesh-verify/mesh-verify/internal/boundedfile"
)

// listenTimeout bounds how long a create holds the machine-wide create
// lock waiting for its components to listen. They bind within seconds of
// kwokctl returning; one slower than this is left to the checks after the
// create (a cluster whose controller-manager is gone is created again,
// lab.createClusters).
const listenTimeout = 20 * time.Second

// maxKwokConfig bounds the kwokctl configuration read for its ports (some
// 30 KB: the components and the lab's stages).
const maxKwokConfig = 1 << 20

// componentPort is one port kwokctl chose for a component of a cluster.
type componentPort struct {
	Component string
	Port      int
}

func (p componentPort) String() string { return fmt.Sprintf("%s's port %d", p.Component, p.Port) }

// componentPorts reads the ports of a cluster's components from the
// kwokctl configuration kwokctl writes for it (clusters/<name>/kwok.yaml:
// a KwokctlConfiguration, then the stages): components[].ports[].port, in
// the file's order.
func componentPorts(b []byte) ([]componentPort, error) {
	var conf struct {
		Kind       string `yaml:"kind"`
		Components []struct {
			Name  string `yaml:"name"`
			Ports []struct {
				Port int `yaml:"port"`
			} `yaml:"ports"`
		} `yaml:"components"`
	}
	// The first document only: the stages after it are not read.
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&conf); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("empty kwokctl configuration")
		}
		return nil, fmt.Errorf("kwokctl configuration: %w", err)
	}
	if conf.Kind != "KwokctlConfiguration" {
		return nil, fmt.Errorf("kwokctl configuration: kind %q, want KwokctlConfiguration", conf.Kind)
	}
	var out []componentPort
	for i, c := range conf.Components {
		for j, p := range c.Ports {
			if p.Port < 1 || p.Port > 65535 {
				return nil, fmt.Errorf("kwokctl configuration: components[%d] (%s) ports[%d].port %d: want 1-65535", i, c.Name, j, p.Port)
			}
			out = append(out, componentPort{c.Name, p.Port})
		}
	}
	return out, nil
}

// notListening returns the ports nothing listens on yet, by the kernel's
// socket tables; ok is false when they cannot be read (not Linux).
func notListening(ports []componentPort) (waiting []componentPort, ok bool) {
	var tables [][]byte
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		if b, err := os.ReadFile(f); err == nil {
			tables = append(tables, b)
		}
	}
	if len(tables) == 0 {
		return nil, false
	}
	for _, p := range ports {
		listening := false
		for _, t := range tables {
			if len(listeningInodes(t, p.Port)) > 0 {
				listening = true
				break
			}
		}
		if !listening {
			waiting = append(waiting, p)
		}
	}
	return waiting, true
}

// waitListening waits, while the caller holds the machine-wide create
// lock, until every component of cluster name listens on the port kwokctl
// chose for it. kwokctl returns once the API server answers, and a
// controller-manager starting on a loaded machine (it makes its serving
// certificate first) may not have bound its port by then; kwokctl skips
// only ports that are bound or recorded in the same lab, so another lab's
// create, once the lock is released, could choose that port, and the
// controller-manager would exit on it (one way to the clusters with no
// ServiceAccounts after 30 s and no controller-manager running that make
// demo saw with labs side by side on 2 busy cores). A component that
// could not bind is a *PortConflictError, as in create.
func (l *Lab) waitListening(ctx context.Context, name string) error {
	path := filepath.Join(l.clusterDir(name), "kwok.yaml")
	b, err := boundedfile.Read(path, maxKwokConfig, "a kwokctl configuration")
	if err != nil {
		return fmt.Errorf("lab cluster %s: %w", name, err)
	}
	ports, err := componentPorts(b)
	if err != nil {
		return fmt.Errorf("lab cluster %s: %s: %w", name, path, err)
	}
	deadline := time.Now().Add(listenTimeout)
	for {
		if pc := findPortConflict(l.clusterDir(name), name); pc != nil {
			return pc
		}
		waiting, ok := notListening(ports)
		if !ok || len(waiting) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			names := make([]string, len(waiting))
			for i, p := range waiting {
				names[i] = p.String()
			}
			sort.Strings(names)
			fmt.Fprintf(l.out(), "  cluster %s: nothing listens on %s after %v; going on\n", name, strings.Join(names, ", "), listenTimeout)
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(conflictPoll):
		}
	}
}
