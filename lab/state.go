package lab

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/mesh-verify/mesh-verify/lab/daemon"
	"github.com/mesh-verify/mesh-verify/lab/topology"
)

// Files in the lab directory. Down removes exactly these (and nothing else
// a user may have put in a --dir), then the directory if it is empty.
const (
	stateFile  = "lab.json"
	daemonLog  = "daemon.log"
	lockFile   = ".lock"
	kubeconfig = "kubeconfig"
	// kubeCacheDir is KUBECACHEDIR for every kubectl of the lab (kwok.Lab.Env, lab env).
	kubeCacheDir = "kubecache"
	// markerFile is written by `up` before anything else: only a directory
	// holding it is the lab's to clean, so `down --dir` (and `up`, which
	// cleans a previous lab first) never deletes a user's kwok/, logs/ or
	// kubeconfig that merely share the lab's names.
	markerFile = ".mesh-verify-lab"
)

func labFiles() []string {
	return []string{markerFile, stateFile, daemonLog, lockFile, kubeconfig, daemon.PIDFile, daemon.StatusFile,
		"kwok.yaml", "kwok", kubeCacheDir, "logs", "nginx",
		// The daemon's working directories of mesh-verify's Job pods
		// (lab/daemon/jobs.go, jobDirName): a run with worker pods
		// leaves them.
		"jobs"}
}

// DefaultDir is ${XDG_STATE_HOME:-~/.local/state}/mesh-verify/lab: state,
// not configuration, and never under ~/.kube.
func DefaultDir() (string, error) {
	base := os.Getenv("XDG_STATE_HOME")
	if base == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("lab directory: no $XDG_STATE_HOME and no home directory: %w", err)
		}
		base = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(base, "mesh-verify", "lab"), nil
}

// State is what `lab up` recorded: enough for `lab serve`, `status` and
// `down` to work without the topology file or the build tree.
type State struct {
	// Topology is the name; Source its YAML as applied, so the daemon
	// serves exactly what was created even if the file changed since.
	Topology string `json:"topology"`
	File     string `json:"file"`
	Source   string `json:"source"`
	// Manifests identifies the topology directory's manifests as applied
	// (topology.ManifestsDigest); the daemon reads their objects from the
	// API servers, not from here.
	Manifests string `json:"manifests,omitempty"`
	// ManifestFiles are those manifests as applied, by their path in the
	// topology directory (c1/helloworld.yaml): the tutorial's Deployments
	// and Services among them are the lab's apps, which the daemon serves.
	ManifestFiles map[string]string `json:"manifestFiles,omitempty"`
	// DataPlane is `lab up --data-plane`, applied over Source.
	DataPlane  string            `json:"dataPlane,omitempty"`
	Bin        string            `json:"bin"`
	Kubeconfig string            `json:"kubeconfig"`
	Clusters   []string          `json:"clusters"`
	Contexts   map[string]string `json:"contexts"`
	Created    time.Time         `json:"created"`
	// Ready is set once `lab up` saw every pod serving.
	Ready bool `json:"ready"`
	// Seed is the lab's routing seed (Options.Seed).
	Seed uint64 `json:"seed"`
}

// newSeed is the seed asked for, or a random one.
func newSeed(asked *uint64) uint64 {
	if asked != nil {
		return *asked
	}
	return rand.Uint64()
}

// topology is the lab's topology as applied: Source with DataPlane.
func (s *State) topology() (*topology.Topology, error) {
	var t *topology.Topology
	var err error
	if len(s.ManifestFiles) > 0 {
		t, err = topology.ParseFiles(s.File, []byte(s.Source), s.ManifestFiles)
	} else {
		t, err = topology.Parse(s.File, []byte(s.Source))
	}
	if err != nil {
		return nil, err
	}
	if s.DataPlane != "" {
		if err := t.UseDataPlane(s.DataPlane); err != nil {
			return nil, err
		}
	}
	return t, nil
}

func readState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("read lab state: %w", err) // the PathError names the file; fs.ErrNotExist stays visible
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("lab state %s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}

func writeState(dir string, s *State) error {
	path := filepath.Join(dir, stateFile)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode lab state for %s: %w", path, err)
	}
	tmp := filepath.Join(dir, "."+stateFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write lab state: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write lab state: %w", err) // the LinkError names both files
	}
	return nil
}

// removeState deletes the lab's files from dir, and dir when empty.
func removeState(dir string) error {
	var errs []error
	for _, f := range labFiles() {
		if f == lockFile {
			continue // held by the caller; removed last
		}
		if err := os.RemoveAll(filepath.Join(dir, f)); err != nil {
			errs = append(errs, err)
		}
	}
	// The lock goes with the lab even when a user's files keep the
	// directory: a lab command that finds none creates it again.
	_ = os.Remove(filepath.Join(dir, lockFile))
	entries, err := os.ReadDir(dir)
	if err == nil && len(entries) == 0 {
		_ = os.Remove(dir)
	}
	return errors.Join(errs...)
}

// lock serialises lab commands on one directory (flock; released when
// the process dies, so a crashed `lab up` never blocks the next one). A
// lock file it created in a directory that holds no lab when the lock is
// released (a `lab up` refused on a directory of other files) is removed
// again: the refusal leaves the directory as it found it.
func lock(dir string) (func(), error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create lab directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, lockFile)
	created := true
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, fs.ErrExist) {
		created = false
		f, err = os.OpenFile(path, os.O_RDWR, 0o644)
	}
	if err != nil {
		return nil, fmt.Errorf("lock lab directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another mesh-verify lab command is running on %s", dir)
	}
	return func() {
		if created && !isLabDir(dir) {
			_ = os.Remove(path) // before the unlock: no one else holds it
		}
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}

// isLabDir reports whether dir holds a lab `up` made (so it may be
// cleaned): the marker file is there.
func isLabDir(dir string) bool {
	_, err := os.Stat(filepath.Join(dir, markerFile))
	return err == nil
}

// NotALabError is a directory that holds files with the lab's names but
// no marker: it was not made by `lab up` (or by a version before the
// marker), and nothing in it is removed.
type NotALabError struct {
	Dir   string
	Found []string
}

func (e *NotALabError) Error() string {
	return fmt.Sprintf("%s holds %s but no %s marker: it is not a directory `mesh-verify lab up` made, so nothing in it is removed (remove it yourself if it is a lab of an older version)",
		e.Dir, strings.Join(e.Found, ", "), markerFile)
}

// claimDir makes dir the lab's: a directory with the marker is already;
// an empty or missing one gets the marker; any other is refused, since
// `up` cleans what a previous lab left there.
func claimDir(dir string) error {
	if isLabDir(dir) {
		return nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("lab directory: %w", err)
	}
	var others []string
	for _, e := range entries {
		if e.Name() != lockFile {
			others = append(others, e.Name())
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("lab directory %s is not empty (%s) and holds no lab: pick an empty or new --dir", dir, strings.Join(others, ", "))
	}
	return mark(dir)
}

// mark writes the lab's marker into dir (created if missing).
func mark(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create lab directory %s: %w", dir, err)
	}
	id := fmt.Sprintf("mesh-verify lab %016x\n", rand.Uint64())
	if err := os.WriteFile(filepath.Join(dir, markerFile), []byte(id), 0o600); err != nil {
		return fmt.Errorf("mark lab directory: %w", err)
	}
	return nil
}

// labNamesIn lists the lab's file names present in dir (for NotALabError).
func labNamesIn(dir string) []string {
	var found []string
	for _, f := range labFiles() {
		if f == lockFile {
			continue
		}
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			found = append(found, f)
		}
	}
	return found
}
